"""``zyx.matmul`` side by side with the peers installed, in one run on one device.

    python benchmarks/matmul_bench.py                  # host: f32 1024^3 vs numpy, torch
    python benchmarks/matmul_bench.py --device opencl  # PoCL (or any OpenCL device)
    python benchmarks/matmul_bench.py --device cuda    # the H200 goals (issue 20, item 2)
    python benchmarks/matmul_bench.py --device host --case f32:512 --case f64:256
    python benchmarks/matmul_bench.py --device cuda --variants   # each variant's kernels too

A case is ``dtype:n`` (n x n times n x n) or ``dtype:batch:n`` (batched). Writes
``matmul_bench_<machine>_<backend>.json`` to $OUT or . (benchmarks/results.py). zyx's
first call of a shape races core's generated matmul (zyx.graph.matmul) against the
generic lowering and keeps the faster (zyx.runtime); what is timed is ``zyx.matmul`` +
``zyx.realize`` after that, synchronized. Peers where installed: on CUDA torch (f32 in
true fp32: ``allow_tf32 = False``), torch.compile, cupy and tinygrad; on the host and
OpenCL numpy and torch on the CPU (beside an OpenCL device, rows of another device:
results.py's ``device``). Each number is the median of repeated runs after warm-up, the
runners' runs interleaved on a GPU (a round runs each once; tinygrad, in a CUDA context of
its own, apart: see ``measure``), on random
data; each result is checked against float64 (the relative error is in the row's note).
``--variants`` adds a row per variant of ``zyx.graph.matmul.variants(device)``: its
kernels alone, timed with ``Device.launch_timed`` (the best of a few), for choosing the
default; the ``zyx.matmul`` row stays the case's ``headline``. A kernel alone runs at
clocks that sustained work does not keep: on an H100 SXM (2026-12-07) the default bf16
8192³ kernel ran 448 TFLOP/s alone, 418 in 200 launches back to back, and 401-414 through
``zyx.matmul``, interleaved with torch or not.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import results

import zyx

DEFAULT_CASES = {
    "host": ["f32:1024"],
    "opencl": ["f32:512"],
    "cuda": ["f32:4096", "bf16:8192", "bf16:64:512"],
}
REPEATS = 15
WARMUP = 2


@dataclass(frozen=True)
class Timed:
    """One runner's time of one case (``headline``, ``device``: as results.py says)."""

    runner: str
    seconds: float
    error: float | None
    headline: bool = False
    device: str = ""


def parse_case(text: str) -> tuple[str, int, int]:
    parts = text.split(":")
    if len(parts) == 2:
        return parts[0], 0, int(parts[1])
    return parts[0], int(parts[1]), int(parts[2])


@dataclass(frozen=True)
class Runner:
    """One implementation of a case: ``run`` computes it, ``sync`` waits for the device;
    ``own_context``: it runs in a CUDA context of its own (``measure`` times it apart)."""

    name: str
    run: Callable[[], Any]
    sync: Callable[[], None]
    error: float
    headline: bool = False
    device: str = ""
    own_context: bool = False


def measure(runners: list[Runner], interleaved: bool = True) -> list[Timed]:
    """Each runner's median wall time, after warm-up; ``interleaved``, one run of each per
    round, so that a machine whose load changes skews them alike; else each runner's runs
    one after another, after its warm-up. On a CPU they are not interleaved: OpenBLAS's
    threads spin for about 0.1 s after a call (its THREAD_TIMEOUT, 2^28 cycles) on the
    cores that the next runner's threads want (zyx's f32 1024³ on the 2-core host: 0.25x
    numpy's interleaved, 0.5x alone). A runner in a CUDA context of its own (tinygrad
    makes one) is timed after the others, alone: the GPU's switch between contexts cost
    the runner after it in a round up to 0.2 ms a call (H100, 2026-12-06, 64 x 512³ bf16:
    zyx 70.8 µs alone, 298.6 after tinygrad; torch 58.7 alone, 193.8 in that round)."""
    times: dict[str, list[float]] = {r.name: [] for r in runners}

    def warm(runner: Runner) -> None:
        for _ in range(WARMUP):
            runner.run()
        runner.sync()

    def timed(runner: Runner) -> None:
        start = time.perf_counter()
        runner.run()
        runner.sync()
        times[runner.name].append(time.perf_counter() - start)

    together = [r for r in runners if interleaved and not r.own_context]
    for runner in together:
        warm(runner)
    for _ in range(REPEATS if together else 0):
        for runner in together:
            timed(runner)
    for runner in (r for r in runners if r not in together):
        warm(runner)
        for _ in range(REPEATS):
            timed(runner)
    return [Timed(r.name, statistics.median(times[r.name]), r.error, r.headline, r.device)
            for r in runners]  # fmt: skip


def schema_rows(case: Case, timed: list[Timed]) -> list[results.Row]:
    """The case's rows, in TFLOP/s where its fastest reaches 1 TFLOP/s, else in GFLOP/s."""
    tera = case.flops / min(t.seconds for t in timed) >= 1e12
    scale, unit = (1e12, "TFLOP/s") if tera else (1e9, "GFLOP/s")
    return [results.row(case.name, t.runner, case.flops / t.seconds / scale, unit,
                        "" if t.error is None else f"relative error {t.error:.1e}",
                        headline=t.headline, device=t.device)
            for t in timed]  # fmt: skip


def rel_error(out: np.ndarray[Any, Any], ref: np.ndarray[Any, Any]) -> float:
    return float(np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref))


class Case:
    """One workload's operands (f32 random on the host) and float64 reference."""

    def __init__(self, text: str, rng: np.random.Generator) -> None:
        self.text = text
        self.dtype, self.batch, self.n = parse_case(text)
        shape = ((self.batch,) if self.batch else ()) + (self.n, self.n)
        self.a = rng.standard_normal(shape, dtype=np.float32)
        self.b = rng.standard_normal(shape, dtype=np.float32)
        if self.dtype == "f64":
            self.a, self.b = self.a.astype(np.float64), self.b.astype(np.float64)
        self.flops = 2.0 * max(self.batch, 1) * self.n**3
        self._ref: np.ndarray[Any, Any] | None = None

    @property
    def name(self) -> str:
        """The workload's name in the results: ``matmul bf16 64 x 512³`` for bf16:64:512."""
        batch = f"{self.batch} x " if self.batch else ""
        return f"matmul {self.dtype} {batch}{self.n}³"

    def reference(self) -> np.ndarray[Any, Any]:
        """In float64 of the operands as the 16-bit dtypes hold them (rounded by zyx)."""
        if self._ref is None:
            a, b = self.a, self.b
            if self.dtype in ("f16", "bf16"):
                a, b = (zyx.asarray(x).astype(self.zyx_dtype).astype(zyx.float64).numpy()
                        for x in (a, b))  # fmt: skip
            self._ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
        return self._ref

    @property
    def zyx_dtype(self) -> Any:
        return {"f16": zyx.float16, "bf16": zyx.bfloat16, "f32": zyx.float32,
                "f64": zyx.float64}[self.dtype]  # fmt: skip

    @property
    def torch_dtype(self) -> Any:
        import torch

        return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                "f64": torch.float64}[self.dtype]  # fmt: skip


def bench_zyx(case: Case, device: Any) -> Runner:
    a = zyx.asarray(case.a, device=device).astype(case.zyx_dtype)
    b = zyx.asarray(case.b, device=device).astype(case.zyx_dtype)
    zyx.realize(a, b)

    def run() -> Any:
        c = zyx.matmul(a, b)
        zyx.realize(c)
        return c

    error = rel_error(run().astype(zyx.float64).numpy(), case.reference())
    return Runner(f"zyx ({device.name})", run, device.synchronize, error, headline=True)


def bench_variants(case: Case, device: Any) -> list[Timed]:
    """Each variant's kernels of ``case`` on ``device``, launched directly (no front end)."""
    from zyx.graph import matmul
    from zyx.graph.claims import matmuls
    from zyx.graph.schedule import Graph

    a = zyx.asarray(case.a, device=device).astype(case.zyx_dtype)
    b = zyx.asarray(case.b, device=device).astype(case.zyx_dtype)
    zyx.realize(a, b)
    (m,) = matmuls(Graph([zyx.matmul(a, b).node]))
    out = zyx.empty(m.output.shape, dtype=case.zyx_dtype, device=device)
    zyx.realize(out)
    rows = []
    for variant in matmul.variants(device):
        if not matmul.fits(variant, m, device):
            continue
        scratch = [
            zyx.empty((n,), dtype=zyx.uint8, device=device) for n in matmul.scratch(m, variant)
        ]
        zyx.realize(*scratch)
        buffers = [x.node.buffer for x in (a, b, out, *scratch)]
        launches = [(device.compile(launch.kernel),
                     matmul.arguments(launch, *buffers[:3], buffers[3:]))
                    for launch in matmul.build(m, variant)]  # fmt: skip
        for program, args in launches:
            device.launch(program, args)
        error = rel_error(out.astype(zyx.float64).numpy().reshape(case.reference().shape),
                          case.reference())  # fmt: skip
        ns = min(sum(device.launch_timed(p, args) for p, args in launches) for _ in range(3))
        rows.append(Timed(f"zyx {variant}", ns / 1e9, error))
    return rows


def bench_numpy(case: Case) -> Runner | None:
    if case.dtype not in ("f32", "f64"):
        return None
    a, b = case.a, case.b
    error = rel_error(a @ b, case.reference())
    return Runner("numpy (OpenBLAS)", lambda: np.matmul(a, b), lambda: None, error)


def bench_torch(case: Case, on: str, compiled: bool) -> Runner | None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if on == "cpu" and case.dtype in ("f16",):
        return None
    a = torch.from_numpy(case.a).to(on).to(case.torch_dtype)
    b = torch.from_numpy(case.b).to(on).to(case.torch_dtype)
    fn: Callable[[Any, Any], Any] = torch.matmul
    if compiled:  # the default mode, as users meet it (max-autotune takes minutes a shape)
        fn = torch.compile(torch.matmul)
    sync = torch.cuda.synchronize if on == "cuda" else (lambda: None)
    error = rel_error(fn(a, b).double().cpu().numpy(), case.reference())
    name = "torch.compile" if compiled else "torch"
    return Runner(f"{name} ({on})", lambda: fn(a, b), sync, error)


def bench_cupy(case: Case) -> Runner | None:
    import cupy

    if case.dtype == "bf16":
        return None
    dtype = {"f16": cupy.float16, "f32": cupy.float32, "f64": cupy.float64}[case.dtype]
    a, b = cupy.asarray(case.a).astype(dtype), cupy.asarray(case.b).astype(dtype)
    sync = cupy.cuda.Device().synchronize
    error = rel_error(cupy.asnumpy(cupy.matmul(a, b)), case.reference())
    return Runner("cupy", lambda: cupy.matmul(a, b), sync, error)


def bench_tinygrad(case: Case) -> Runner | None:
    from tinygrad import Device, Tensor, dtypes

    dtype = {"f16": dtypes.half, "bf16": dtypes.bfloat16, "f32": dtypes.float32,
             "f64": dtypes.float64}[case.dtype]  # fmt: skip
    a = Tensor(case.a).cast(dtype).realize()
    b = Tensor(case.b).cast(dtype).realize()
    sync = Device[Device.DEFAULT].synchronize
    error = rel_error((a @ b).cast(dtypes.float64).numpy(), case.reference())
    run = lambda: (a @ b).realize()  # noqa: E731
    return Runner(f"tinygrad ({Device.DEFAULT})", run, sync, error, own_context=True)


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def peers(case: Case, device: Any) -> list[Runner]:
    """The peers installed for the device's kind; off CUDA they run on the host."""
    kind = device.backend
    runs: list[Callable[[], Runner | None]] = []
    if kind in ("host", "opencl"):
        runs.append(lambda: bench_numpy(case))
        if installed("torch"):
            runs.append(lambda: bench_torch(case, "cpu", compiled=False))
    if kind == "cuda":
        if installed("torch"):
            runs.append(lambda: bench_torch(case, "cuda", compiled=False))
            runs.append(lambda: bench_torch(case, "cuda", compiled=True))
        if installed("cupy"):
            runs.append(lambda: bench_cupy(case))
        if installed("tinygrad"):
            runs.append(lambda: bench_tinygrad(case))
    found = []
    for run in runs:
        try:
            runner = run()
        except Exception as error:  # noqa: BLE001 - a peer that fails is reported, not fatal
            print(f"  (a peer failed on {case.text}: {type(error).__name__}: {error})")
            continue
        if runner is not None:
            found.append(replace(runner, device="" if kind == "cuda" else results.on_host(device)))
    return found


def environment(device: Any) -> dict[str, str]:
    hardware, driver = results.describe(device)
    versions = {"numpy": np.__version__, "zyx-core": results.version("zyx-core")}
    for name in ("torch", "cupy", "tinygrad"):
        if installed(name):
            versions[name] = str(getattr(importlib.import_module(name), "__version__", "?"))
    return results.environment(
        hardware, driver, versions,
        "f32 in true fp32 (torch allow_tf32=False), f16/bf16 accumulate in f32",
        f"median of {REPEATS} runs after {WARMUP} warm-up, the runners "
        f"{'interleaved' if device.info.warp_size > 1 else 'one after another'}; "
        f"load average {os.getloadavg()[0]:.1f} at the end",
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="host", help="host, opencl, cuda or a zyx device name")
    parser.add_argument("--case", action="append", help="dtype:n or dtype:batch:n (repeatable)")
    parser.add_argument("--variants", action="store_true", help="time every variant too")
    args = parser.parse_args()
    kind = args.device.split(":")[0]
    device = zyx.device(args.device if ":" in args.device or kind == "host" else f"{kind}:0")
    rng = np.random.default_rng(0)
    rows: list[results.Row] = []
    for text in args.case or DEFAULT_CASES.get(kind, ["f32:512"]):
        case = Case(text, rng)
        runners = [bench_zyx(case, device), *peers(case, device)]
        timed = measure(runners, interleaved=device.info.warp_size > 1)
        if args.variants:
            timed += bench_variants(case, device)
        rows += schema_rows(case, timed)
        print(results.table(rows[-len(timed) :]), flush=True)
    machine = f"{results.machine()}_{device.backend}"
    print(results.write("matmul_bench", machine, rows, environment(device)))


if __name__ == "__main__":
    main()
