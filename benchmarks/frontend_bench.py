"""The array front end side by side with torch, torch.compile, cupy and numpy, in one run.

    python benchmarks/frontend_bench.py [--device cuda] [--size-mib 1024] [--only WORDS]
        # writes frontend_bench_<machine>_<backend>.json to $OUT or .

1. One small op realized: ``a + b`` on 1024 f32 arrays already on the device, then to a
   numpy array; zyx's plan is cached (the second and later runs). Wall time per call.
2. A 5-op elementwise chain ``relu((a * b + c) * 0.5 - a)`` on three inputs of
   ``--size-mib`` each: effective bandwidth, 16 bytes moved per element (3 reads, 1 write).
3. Row softmax of a square f32 matrix of ``--size-mib``: bandwidth of one read and one
   write of the matrix.
4. Ten ops ``x = x * 1.0001 + b`` on 1024 f32, then to the host: wall time per program.
5. On the host device only: the first realize of a new small op (``sin(a) + 1`` on 1024
   f32) in a new process, cold (an empty compile cache: the C compiler runs) and warm (the
   compiled kernel on disk from an earlier process): median of fresh processes, from the
   op recorded to its value read back (``import zyx`` and the device's opening not counted).

Times are wall clock around the work and a synchronize, median of repeated runs after
warm-up, on random data; every implementation is timed the same way in the same run.
Math mode: IEEE f32 (no fast math).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import results

import zyx

Row = dict[str, Any]


def median_time(run: Callable[[], object], sync: Callable[[], None], repeats: int) -> float:
    """Seconds per ``run`` (synchronized before and after), median of ``repeats``."""
    for _ in range(3):
        run()
    sync()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


row = results.row


class Peers:
    """The peers installed here, each as (name, module-like namespace, sync)."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.torch = _try_import("torch") if device.backend == "cuda" else None
        self.cupy = _try_import("cupy") if device.backend == "cuda" else None

    def sync_zyx(self) -> None:
        self.device.synchronize()

    def sync_torch(self) -> None:
        assert self.torch is not None
        self.torch.cuda.synchronize()

    def sync_cupy(self) -> None:
        assert self.cupy is not None
        self.cupy.cuda.Device().synchronize()


def _try_import(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        return None


def small_op(peers: Peers) -> list[Row]:
    bench = "a + b on 1024 f32, to the host (µs per call)"
    rng = np.random.default_rng(0)
    x, y = rng.random(1024, dtype=np.float32), rng.random(1024, dtype=np.float32)
    a, b = zyx.asarray(x, device=peers.device), zyx.asarray(y, device=peers.device)
    rows = [row(bench, "zyx", 1e6 * median_time(lambda: (a + b).numpy(), _none, 2000), "µs")]
    if peers.torch is not None:
        ta, tb = peers.torch.from_numpy(x).cuda(), peers.torch.from_numpy(y).cuda()
        rows.append(
            row(
                bench,
                "torch",
                1e6 * median_time(lambda: (ta + tb).cpu().numpy(), _none, 2000),
                "µs",
            )
        )
    if peers.cupy is not None:
        ca, cb = peers.cupy.asarray(x), peers.cupy.asarray(y)
        rows.append(
            row(
                bench,
                "cupy",
                1e6 * median_time(lambda: peers.cupy.asnumpy(ca + cb), _none, 2000),
                "µs",
            )
        )
    numpy = 1e6 * median_time(lambda: x + y, _none, 2000)
    rows.append(row(bench, "numpy (host)", numpy, "µs", device=results.on_host(peers.device)))
    return rows


def _none() -> None:
    pass


def chain(peers: Peers, mib: int) -> list[Row]:
    n = mib * (1 << 20) // 4
    bench = f"relu((a*b+c)*0.5-a), 3 x {mib} MiB f32 (effective TB/s, 16 B/element)"
    rng = np.random.default_rng(1)
    host = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    moved = 16 * n / 1e12

    def program(xp: Any, a: Any, b: Any, c: Any) -> Any:
        return xp.maximum((a * b + c) * 0.5 - a, 0.0)

    a, b, c = (zyx.asarray(h, device=peers.device) for h in host)
    out = program(zyx, a, b, c)
    expected = np.maximum((host[0] * host[1] + host[2]) * 0.5 - host[0], 0)
    assert np.allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6), "zyx chain is wrong"
    rows = [
        row(
            bench,
            "zyx",
            moved / median_time(lambda: program(zyx, a, b, c).realize(), peers.sync_zyx, 20),
            "TB/s",
        )
    ]
    del out
    if peers.torch is not None:
        torch = peers.torch
        ta, tb, tc = (torch.from_numpy(h).cuda() for h in host)
        eager = lambda: torch.relu((ta * tb + tc) * 0.5 - ta)  # noqa: E731
        rows.append(
            row(bench, "torch eager", moved / median_time(eager, peers.sync_torch, 20), "TB/s")
        )
        compiled = torch.compile(lambda p, q, r: torch.relu((p * q + r) * 0.5 - p))
        rows.append(
            row(
                bench,
                "torch.compile",
                moved / median_time(lambda: compiled(ta, tb, tc), peers.sync_torch, 20),
                "TB/s",
            )
        )
        del ta, tb, tc
    if peers.cupy is not None:
        cp = peers.cupy
        ca, cb, cc = (cp.asarray(h) for h in host)
        rows.append(
            row(
                bench,
                "cupy",
                moved / median_time(lambda: program(cp, ca, cb, cc), peers.sync_cupy, 20),
                "TB/s",
            )
        )
        del ca, cb, cc
    if peers.device.backend == "host":
        rows.append(
            row(bench, "numpy", moved / median_time(lambda: program(np, *host), _none, 5), "TB/s")
        )
    return rows


def softmax(peers: Peers, mib: int) -> list[Row]:
    side = int((mib * (1 << 20) // 4) ** 0.5)
    bench = f"row softmax {side}x{side} f32 (TB/s, one read + one write)"
    rng = np.random.default_rng(2)
    host = rng.standard_normal((side, side), dtype=np.float32)
    moved = 2 * host.nbytes / 1e12

    def zyx_softmax(x: Any) -> Any:
        e = zyx.exp(x - zyx.max(x, axis=1, keepdims=True))
        return e / zyx.sum(e, axis=1, keepdims=True)

    x = zyx.asarray(host, device=peers.device)
    check = zyx_softmax(x).numpy()[:4]
    ref = np.exp(host[:4] - host[:4].max(1, keepdims=True))
    assert np.allclose(check, ref / ref.sum(1, keepdims=True), rtol=1e-4, atol=1e-7), (
        "zyx softmax is wrong"
    )
    rows = [
        row(
            bench,
            "zyx",
            moved / median_time(lambda: zyx_softmax(x).realize(), peers.sync_zyx, 20),
            "TB/s",
        )
    ]
    if peers.torch is not None:
        t = peers.torch.from_numpy(host).cuda()
        rows.append(
            row(
                bench,
                "torch",
                moved / median_time(lambda: peers.torch.softmax(t, dim=1), peers.sync_torch, 20),
                "TB/s",
            )
        )
    if peers.device.backend == "host":

        def np_softmax() -> Any:
            e = np.exp(host - host.max(1, keepdims=True))
            return e / e.sum(1, keepdims=True)

        rows.append(row(bench, "numpy", moved / median_time(np_softmax, _none, 3), "TB/s"))
    return rows


def ten_ops(peers: Peers) -> list[Row]:
    bench = "10 x (x * 1.0001 + b) on 1024 f32, to the host (µs per program)"
    rng = np.random.default_rng(3)
    hx, hb = rng.random(1024, dtype=np.float32), rng.random(1024, dtype=np.float32)

    def program(x: Any, b: Any) -> Any:
        for _ in range(10):
            x = x * 1.0001 + b
        return x

    x, b = zyx.asarray(hx, device=peers.device), zyx.asarray(hb, device=peers.device)
    rows = [row(bench, "zyx", 1e6 * median_time(lambda: program(x, b).numpy(), _none, 500), "µs")]
    if peers.torch is not None:
        tx, tb = peers.torch.from_numpy(hx).cuda(), peers.torch.from_numpy(hb).cuda()
        rows.append(
            row(
                bench,
                "torch eager",
                1e6 * median_time(lambda: program(tx, tb).cpu().numpy(), _none, 500),
                "µs",
            )
        )
    return rows


_FIRST = """
import time, numpy as np, zyx
a = zyx.asarray(np.ones(1024, np.float32), device=zyx.device("host"))
start = time.perf_counter()
(zyx.sin(a) + 1).numpy()
print(time.perf_counter() - start)
"""
"""A new process's first realize of ``sin(a) + 1``: the op recorded, planned, its kernel
lowered, compiled or found on disk, loaded, run and read back; ``import zyx``, the device
opened and ``a`` uploaded before the clock starts."""

FIRST_RUNS = 11
"""Fresh processes per row (the median is reported)."""


def first_realize() -> list[Row]:
    """A new small op's first realize in a fresh process, median of ``FIRST_RUNS``: cold,
    each process with an empty compile cache of its own (the C compiler runs); warm, each
    with the cache an earlier process filled (it finds the compiled kernel on disk). The
    processes keep their bytecode (in a temporary folder), as an installed package has its
    .pyc, whatever ``PYTHONDONTWRITEBYTECODE`` says here: processes that compiled every
    module from source at import measured 0.1 to 0.25 ms more here (the garbage
    collector's counts left elsewhere, one of its collections landed in the timed realize)."""
    bench = "first realize of a new small op on the host (ms)"
    with tempfile.TemporaryDirectory() as pycache:
        python = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        python["PYTHONPYCACHEPREFIX"] = pycache

        def first(cache: str) -> float:
            env = {**python, "ZYX_CACHE_DIR": cache}
            out = subprocess.run(
                [sys.executable, "-c", _FIRST], env=env, capture_output=True, text=True, check=True
            )
            return 1e3 * float(out.stdout.strip())

        def empty() -> float:
            with tempfile.TemporaryDirectory() as cache:
                return first(cache)

        empty()  # writes the bytecode
        cold = [empty() for _ in range(FIRST_RUNS)]
        with tempfile.TemporaryDirectory() as cache:
            first(cache)
            warm = [first(cache) for _ in range(FIRST_RUNS)]
    return [
        row(bench, "zyx, cold (empty cache)", statistics.median(cold), "ms"),
        row(bench, "zyx, warm (disk cache)", statistics.median(warm), "ms"),
    ]


def environment(device: Any) -> dict[str, str]:
    hardware, driver = results.describe(device)
    versions = {"numpy": np.__version__, "zyx-core": results.version("zyx-core")}
    for name in ("torch", "cupy"):
        module = _try_import(name) if device.backend == "cuda" else None
        if module is not None:
            versions[name] = module.__version__
    return results.environment(
        hardware, driver, versions, "IEEE f32 (no fast math)",
        "wall clock around work + synchronize, median of repeats after warm-up",
    )  # fmt: skip


table = results.table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="zyx device name (default: zyx's default)")
    parser.add_argument("--size-mib", type=int, default=1024, help="size of each big input")
    parser.add_argument("--only", default="", help="the sections whose names hold these words")
    args = parser.parse_args()
    device = zyx.device(args.device)
    peers = Peers(device)
    rows: list[Row] = []
    sections: dict[str, Callable[[], list[Row]]] = {
        "small op": lambda: small_op(peers),
        "chain": lambda: chain(peers, args.size_mib),
        "softmax": lambda: softmax(peers, args.size_mib),
        "ten ops": lambda: ten_ops(peers),
    }
    if device.backend == "host":
        sections["first realize"] = first_realize
    for name, section in sections.items():
        if args.only not in name:
            continue
        new = section()
        rows += new
        print(table(new), flush=True)
    machine = f"{results.machine()}_{device.backend}"
    results.write("frontend_bench", machine, rows, environment(device))


if __name__ == "__main__":
    main()
