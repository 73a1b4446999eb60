"""``zyx.jit`` replay against eager zyx, torch eager, torch.cuda.CUDAGraph and numpy.

    python benchmarks/jit_bench.py [--device cuda] [--repeats 2000]
        # writes jit_bench_<machine>_<backend>.json to $OUT or .

1. A 20-op elementwise program, ``10 x (x * 1.0001 + b)`` on 1024 f32 already on the
   device: µs per call, the result left on the device (a synchronize after each call).
   zyx fuses it into one kernel eagerly too; jit saves the plan lookup and binding. Rows
   "results kept" hold each call's result while the next call runs, so the replay writes
   a fresh buffer (``Recording.set_arg`` on the launch that writes it) instead of the one
   the last result gave back.
2. A 100-kernel program: 100 steps ``y = y * 1.0001 + b`` on 1024 f32, each realized on
   its own (one kernel each; torch: ``torch.add(b, y, alpha=1.0001)``, one kernel; numpy:
   two ufuncs): µs per kernel, calls in a burst of ``--burst`` with one synchronize at the
   end (the launch rate), and per call with a synchronize each (latency). The row "x
   alternating" passes one of two arrays in turn, so each replay rebinds the first
   launch's input (``Recording.set_arg``).

Goals on the H200 (issue 20): a replayed kernel ≤ 1.5 µs (torch.cuda.CUDAGraph 1.03), the
20-op program through jit ≤ 30 µs (torch eager 223). Times are wall clock, median of
repeated runs after warm-up, on random data; every implementation is checked against
numpy before it is timed. torch runs on CUDA where the zyx device is CUDA, else on the CPU.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import results

import zyx

Row = dict[str, Any]
N = 1024
STEPS = 100


def median_time(run: Callable[[], object], sync: Callable[[], None], repeats: int) -> float:
    """Seconds per ``run`` with a ``sync`` after each, median of ``repeats`` after warm-up."""
    for _ in range(10):
        run()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def burst_time(run: Callable[[], object], sync: Callable[[], None], burst: int) -> float:
    """Seconds per ``run`` in a burst of ``burst`` calls and one ``sync``, best of 5."""
    for _ in range(10):
        run()
    sync()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(burst):
            run()
        sync()
        best = min(best, (time.perf_counter() - start) / burst)
    return best


row = results.row


def _none() -> None:
    pass


def twenty_ops(xp: Any, x: Any, b: Any) -> Any:
    for _ in range(10):
        x = x * 1.0001 + b
    return x


def hundred_kernels(x: Any, b: Any) -> Any:
    for _ in range(STEPS):
        x = (x * 1.0001 + b).realize()
    return x


def _numpy_hundred(x: Any, b: Any) -> Any:
    for _ in range(STEPS):
        x = x * np.float32(1.0001) + b
    return x


class Torch:
    """torch on the zyx device's kind (CUDA, else the CPU), if installed."""

    def __init__(self, device: Any) -> None:
        try:
            import torch
        except ImportError:
            self.torch = None
            return
        self.torch = torch
        self.cuda = device.backend == "cuda" and torch.cuda.is_available()
        self.where = "cuda" if self.cuda else "cpu"
        self.elsewhere = "" if self.cuda else results.on_host(device)
        """Its rows' ``device`` (results.py): the host where zyx's device is another."""

    def tensor(self, values: np.ndarray[Any, Any]) -> Any:
        assert self.torch is not None
        return self.torch.from_numpy(values).to(self.where)

    def sync(self) -> None:
        if self.cuda:
            assert self.torch is not None
            self.torch.cuda.synchronize()

    def graph(self, program: Callable[[], Any]) -> tuple[Callable[[], None], Any]:
        """``program`` captured in a torch.cuda.CUDAGraph: its replay and its output."""
        torch = self.torch
        assert torch is not None
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                program()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = program()
        return graph.replay, out


def _check(what: str, out: Any, want: np.ndarray[Any, Any]) -> None:
    values = np.asarray(out.cpu() if hasattr(out, "cpu") else out, dtype=np.float64)
    error = np.linalg.norm(values - want) / np.linalg.norm(want)
    assert error < 1e-5, f"{what}: relative error {error:.2e} against numpy in float64"


def program_rows(device: Any, peers: Torch, repeats: int) -> list[Row]:
    bench = "20-op elementwise program, 1024 f32 (µs per call, result on the device)"
    rng = np.random.default_rng(0)
    hx, hb = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    want = twenty_ops(np, hx.astype(np.float64), hb.astype(np.float64))
    x, b = zyx.asarray(hx, device=device), zyx.asarray(hb, device=device)
    jitted = zyx.jit(lambda x, b: twenty_ops(zyx, x, b))
    _check("zyx jit", jitted(x, b).numpy(), want)
    _check("zyx jit replay", jitted(x, b).numpy(), want)
    kept: list[Any] = [None]

    def keep() -> None:
        kept[0] = jitted(x, b)

    zyx_sync = device.synchronize
    rows = [
        row(bench, "zyx jit", 1e6 * median_time(lambda: jitted(x, b), zyx_sync, repeats), "µs"),
        row(bench, "zyx jit, results kept", 1e6 * median_time(keep, zyx_sync, repeats), "µs"),
        row(
            bench,
            "zyx eager",
            1e6 * median_time(lambda: twenty_ops(zyx, x, b).realize(), zyx_sync, repeats),
            "µs",
        ),
    ]
    _check("zyx jit, results kept", kept[0].numpy(), want)
    if peers.torch is not None:
        tx, tb = peers.tensor(hx), peers.tensor(hb)
        _check("torch", twenty_ops(peers.torch, tx, tb), want)
        eager = 1e6 * median_time(lambda: twenty_ops(peers.torch, tx, tb), peers.sync, repeats)
        rows.append(row(bench, f"torch eager ({peers.where})", eager, "µs", device=peers.elsewhere))
        if peers.cuda:
            replay, out = peers.graph(lambda: twenty_ops(peers.torch, tx, tb))
            replay()
            _check("torch.cuda.CUDAGraph", out, want)
            graphed = 1e6 * median_time(replay, peers.sync, repeats)
            rows.append(row(bench, "torch.cuda.CUDAGraph", graphed, "µs"))
    numpy = 1e6 * median_time(lambda: twenty_ops(np, hx, hb), _none, repeats)
    rows.append(row(bench, "numpy (host)", numpy, "µs", device=results.on_host(device)))
    return rows


def kernel_rows(device: Any, peers: Torch, repeats: int, burst: int) -> list[Row]:
    rng = np.random.default_rng(1)
    hx, hb = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    want = _numpy_hundred(hx.astype(np.float64), hb.astype(np.float64))
    x, b = zyx.asarray(hx, device=device), zyx.asarray(hb, device=device)
    jitted = zyx.jit(hundred_kernels)
    _check("zyx jit", jitted(x, b).numpy(), want)
    before = zyx.stats()
    _check("zyx jit replay", jitted(x, b).numpy(), want)
    ran = zyx.stats() - before
    assert (ran.replays, ran.launches, ran.plans_built) == (1, STEPS, 0), ran
    other = zyx.asarray(hx, device=device)
    turn = [x, other]

    def alternate() -> object:
        turn.reverse()
        return jitted(turn[0], b)

    runs: list[tuple[str, Callable[[], object], Callable[[], None], str]] = [
        ("zyx jit", lambda: jitted(x, b), device.synchronize, ""),
        ("zyx jit, x alternating (rebound each call)", alternate, device.synchronize, ""),
        ("zyx eager", lambda: hundred_kernels(x, b), device.synchronize, ""),
    ]
    if peers.torch is not None:
        torch = peers.torch
        tx, tb = peers.tensor(hx), peers.tensor(hb)

        def torch_program() -> Any:
            y = tx
            for _ in range(STEPS):
                y = torch.add(tb, y, alpha=1.0001)
            return y

        _check("torch", torch_program(), want)
        runs.append((f"torch eager ({peers.where})", torch_program, peers.sync, peers.elsewhere))
        if peers.cuda:
            replay, out = peers.graph(torch_program)
            replay()
            _check("torch.cuda.CUDAGraph", out, want)
            runs.append(("torch.cuda.CUDAGraph", replay, peers.sync, ""))
    numpy = ("numpy (host, 2 ufuncs per step)", lambda: _numpy_hundred(hx, hb), _none)
    runs.append((*numpy, results.on_host(device)))
    rows = []
    for name, run, sync, where in runs:
        rate = 1e6 * burst_time(run, sync, burst) / STEPS
        latency = 1e6 * median_time(run, sync, max(repeats // 20, 20)) / STEPS
        rows.append(row(f"{STEPS}-kernel program: µs per kernel, burst of {burst} calls",
                        name, rate, "µs", device=where))  # fmt: skip
        rows.append(row(f"{STEPS}-kernel program: µs per kernel, synchronize each call",
                        name, latency, "µs", device=where))  # fmt: skip
    return sorted(rows, key=lambda r: r["workload"])


def environment(device: Any, peers: Torch) -> dict[str, str]:
    hardware, driver = results.describe(device)
    versions = {"numpy": np.__version__, "zyx-core": zyx.__version__}
    if peers.torch is not None:
        versions["torch"] = f"{peers.torch.__version__} on {peers.where}"
    return results.environment(
        hardware, driver, versions, "IEEE f32 (no fast math)",
        "wall clock, median of repeats after warm-up; checked against numpy first",
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="zyx device name (default: zyx's default)")
    parser.add_argument("--repeats", type=int, default=2000, help="timed calls per row")
    parser.add_argument("--burst", type=int, default=200, help="calls per burst")
    args = parser.parse_args()
    device = zyx.device(args.device)
    peers = Torch(device)
    rows = program_rows(device, peers, args.repeats)
    print(results.table(rows), flush=True)
    more = kernel_rows(device, peers, args.repeats, args.burst)
    print(results.table(more), flush=True)
    rows += more
    machine = f"{results.machine()}_{device.backend}"
    results.write("jit_bench", machine, rows, environment(device, peers))


if __name__ == "__main__":
    main()
