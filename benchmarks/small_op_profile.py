"""Where the time of one small cached op goes: ``(a + b).numpy()`` on 1024 f32.

    python benchmarks/small_op_profile.py [--device cuda]

Times each phase of the front end's path alone (median µs of many calls, wall clock):
recording the op, the plan cache's key (``structure``: the C walk the runtime calls where
it is built, and the Python walk), running the cached plan (allocate, launch, release),
and reading the result into numpy; then the whole call, and a cProfile of it (its top
functions by own time). On CUDA, the driver's own routes for a read of the same 4 KiB too
(raw cuda-python: into the pageable array, or into page-locked memory and copied over),
the floor under "read a realized result". For finding Python overhead, not for comparing
with peers (``frontend_bench.py`` does that).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import zyx
from zyx import runtime
from zyx.allocator import allocator
from zyx.graph.structure import fastest


def median_us(fn: Callable[[], object], calls: int = 2000, repeats: int = 7) -> float:
    """Median over ``repeats`` bursts of µs per call of ``fn``."""
    for _ in range(200):
        fn()
    bursts = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        bursts.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(bursts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="a zyx device name (default: zyx's)")
    args = parser.parse_args()
    device = zyx.device(args.device) if args.device else zyx.device()
    host = np.random.default_rng(0).random(1024, dtype=np.float32)
    a, b = zyx.asarray(host, device=device), zyx.asarray(host, device=device)
    done = a + b
    zyx.realize(done)
    node = (a + b).node
    key, leaves = runtime.structure([node])
    plan = runtime.runtime.plans[key]
    walk = fastest()  # what the runtime calls: the C walk where it is built

    def run_plan() -> None:
        target = (a + b).node
        with allocator.held:
            plan.run(leaves, [target])

    phases = {
        "record a + b": lambda: a + b,
        "structure (plan key)": lambda: walk([node]),
        "structure, Python walk": lambda: runtime.structure([node]),
        "record + run cached plan": run_plan,
        "zyx.realize(a + b)": lambda: zyx.realize(a + b),
        "read a realized result": done.numpy,
        "(a + b).numpy()": lambda: (a + b).numpy(),
    }
    program = next(step.program for step in plan.steps if hasattr(step, "program"))
    launcher = getattr(program, "submit", None)
    native = getattr(getattr(launcher, "__self__", None), "launched", None)
    before = zyx.stats().launches
    print(f"{device.name}: µs per call (median)")
    for name, fn in phases.items():
        print(f"  {name:28s} {median_us(fn):8.2f}")
    if native is not None:  # zyx-cuda's native Launcher counts what it ran itself
        ran = launcher.__self__.launched - native  # type: ignore[union-attr]
        print(f"  launches in C: {ran} of {zyx.stats().launches - before}")
    if device.backend == "cuda":
        out = np.empty_like(host)  # alive until main returns, as the reads need
        for name, fn in raw_reads(done, out).items():
            print(f"  {name:28s} {median_us(fn):8.2f}")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(3000):
        (a + b).numpy()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def raw_reads(done: zyx.Tensor, out: np.ndarray[Any, Any]) -> dict[str, Callable[[], object]]:
    """Raw cuda-python reads of ``done``'s buffer into ``out`` (the caller keeps it alive:
    the reads hold its address only), on a stream of the device's current context: by the
    route zyx takes (into the pageable array), and into page-locked memory then copied
    over."""
    import ctypes

    from cuda.bindings import driver

    def ok(result: tuple[object, ...]) -> object:
        if result[0] != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(result)
        return result[1] if len(result) > 1 else None

    zyx.realize(done)
    src = done.node.buffer.handle  # type: ignore[union-attr]  # a realized node's buffer
    stream = ok(driver.cuStreamCreate(1))
    nbytes = out.nbytes
    pinned: Any = ok(driver.cuMemHostAlloc(nbytes, 0))
    base = out.ctypes.data

    def pageable() -> None:
        ok(driver.cuMemcpyDtoHAsync(base, src, nbytes, stream))
        ok(driver.cuStreamSynchronize(stream))

    def page_locked() -> None:
        ok(driver.cuMemcpyDtoHAsync(pinned, src, nbytes, stream))
        ok(driver.cuStreamSynchronize(stream))
        ctypes.memmove(base, pinned, nbytes)

    return {"raw read, pageable": pageable, "raw read, page-locked + copy": page_locked}


if __name__ == "__main__":
    main()
