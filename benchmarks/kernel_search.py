"""Kernel search on each device: what the variants of generated kernels are worth.

    python benchmarks/kernel_search.py [DEVICE ...] [--only WORDS]
        # writes kernel_search_<machine>.json to $OUT or . (benchmarks/results.py)

For each workload (a row sum, a column sum, a row softmax, an elementwise chain, a bias and
relu in f32 and bf16; on random data; 1 GiB f32 matrices on a GPU, 16 MiB on a CPU) the
kernel the scheduler emits (or each of its stages) is searched twice, through
``zyx.search`` itself:

1. as a plan build searches it, with the default ``autotune`` options (budget, runs): the
   search's wall time, compiles included, and its winner;
2. every variant, without a budget, timed in turn over 7 rounds (the best of each): each
   one's time, the default's, and the best, to show what the search found or missed.

Times are ``Device.launch_timed`` (one warm-up, then the best of the runs). No tuning cache
is read or written (each search is called directly).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import results

import zyx
from zyx import search
from zyx.backend import Device, Program
from zyx.config import AutotuneSection
from zyx.graph.lower import KernelSpec
from zyx.graph.schedule import Graph, schedule
from zyx.ir.ops import Kernel
from zyx.runtime import local_size


def _softmax(x: Any) -> Any:
    e = zyx.exp(x - zyx.max(x, axis=1, keepdims=True))
    return e / zyx.sum(e, axis=1, keepdims=True)


def _bias_relu(x: Any) -> Any:
    """A matmul's epilogue: a bias along the rows, then relu (the standard's maximum)."""
    bias = zyx.asarray(np.linspace(-1, 1, x.shape[1]), dtype=x.dtype, device=x.device)
    return zyx.maximum(x + bias, 0.0)


WORKLOADS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "row sum": (lambda x: zyx.sum(x, axis=1), "float32"),
    "column sum": (lambda x: zyx.sum(x, axis=0), "float32"),
    "row softmax": (_softmax, "float32"),
    "elementwise chain": (lambda x: zyx.tanh(x * 0.5 + 1.0) - zyx.abs(x), "float32"),
    "bias + relu": (_bias_relu, "float32"),
    "bias + relu, bf16": (_bias_relu, "bfloat16"),
}
"""Per workload: the program, and the dtype of its matrix."""


def _side(device: Device) -> int:
    """Matrix side: 1 GiB of f32 on a GPU, 16 MiB on a CPU (warp of 1)."""
    return 16384 if device.info.warp_size > 1 else 2048


def _spaces(device: Device, out: Any) -> list[search.Generated]:
    """The space of each kernel of ``out``'s schedule (one, or a reduction's stages)."""
    sched = schedule(Graph([out.node]))
    programs: dict[tuple[Any, ...], Program] = {}

    def compile(kernel: Kernel) -> Program:
        found = programs.get(kernel.ops)
        if found is None:
            found = programs[kernel.ops] = device.compile(kernel)
        return found

    spaces = []
    for spec in sched.steps:
        assert isinstance(spec, KernelSpec)

        def is_input(n: Any, out: Any = spec.output) -> bool:
            return n is not out and (n.realized or id(n) in sched.boundaries)

        spaces.append(search.Generated(spec, is_input, local_size(device, spec), compile))
    return spaces


def measure(device: Device, name: str) -> list[dict[str, Any]]:
    side = _side(device)
    program, dtype = WORKLOADS[name]
    values = np.random.default_rng(0).standard_normal((side, side)).astype(np.float32)
    x = zyx.asarray(values, dtype=getattr(zyx, dtype), device=device)
    spaces = _spaces(device, program(x))
    count = len(spaces)
    rows = [_measure(s, f"{name} [{i + 1}/{count}]", side) for i, s in enumerate(spaces)]
    return [{**row, "dtype": dtype} for row in rows]


def _measure(space: search.Generated, name: str, side: int) -> dict[str, Any]:
    device = space.device
    with space:
        start = time.perf_counter()
        planned = search.search(space, AutotuneSection())
        seconds = time.perf_counter() - start
        times = _sweep(space)
    default = space.variants()[0]
    best = min(times, key=times.__getitem__)
    name_of = _short
    row = {
        "device": device.name,
        "device_name": device.info.name,
        "workload": name,
        "shape": [side, side],
        "kernel": space.name,
        "default": name_of(default),
        "search_s": round(seconds, 3),
        "search_winner": name_of(planned.winner),
        "search_timed": len(planned.times),
        "times_ns": {name_of(k): v for k, v in times.items()},
        "best": name_of(best),
        "speedup_best": round(times[default] / times[best], 3),
        "speedup_search": round(times[default] / times[planned.winner], 3),
    }
    print(
        f"{device.name:10} {name:24} default {row['default']:>12} {times[default] / 1e3:10.1f} us"
        f"  best {row['best']:>12} {times[best] / 1e3:10.1f} us ({row['speedup_best']:.2f}x)"
        f"  search {seconds:.2f} s -> {row['search_winner']} ({row['speedup_search']:.2f}x)",
        flush=True,
    )
    return row


def _short(variant: search.Layout) -> str:
    """``256x4``: work-items per group by elements per trip (``256x4 rows``: along rows)."""
    return f"{variant.local}x{variant.unroll}{' rows' if variant.rows else ''}"


def _sweep(space: search.Generated, rounds: int = 7) -> dict[search.Layout, int]:
    """Every variant's best time over ``rounds`` rounds, each round timing every variant
    once in turn (a machine's load drifts across all of them alike)."""
    timers = {v: space.timer(v) for v in space.variants()}
    for timer in timers.values():
        timer()  # the warm-up (and PoCL's build for this local size)
    best = dict.fromkeys(timers, sys.maxsize)
    for _ in range(rounds):
        for variant, timer in timers.items():
            best[variant] = min(best[variant], timer())
    return best


def schema_rows(row: dict[str, Any]) -> list[results.Row]:
    """One kernel's measurement as results rows: its default, the search's pick, the best."""
    side, times = row["shape"][0], row["times_ns"]
    dtype = {"float32": "f32", "bfloat16": "bf16"}[row["dtype"]]
    workload = f"{row['workload']}, {side}x{side} {dtype} on {row['device']} ({row['device_name']})"
    picks = [
        (f"zyx default variant ({row['default']})", row["default"], ""),
        (f"zyx search's winner ({row['search_winner']})", row["search_winner"],
         f"search {row['search_s']} s, {row['search_timed']} variants timed"),
        (f"zyx best of the sweep ({row['best']})", row["best"], ""),
    ]  # fmt: skip
    return [results.row(workload, who, times[v] / 1e3, "µs", note) for who, v, note in picks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("devices", nargs="*", help="zyx device names (default: every device)")
    parser.add_argument("--only", default="", help="the workloads whose names hold these words")
    args = parser.parse_args()
    devices = [zyx.device(n) for n in args.devices] if args.devices else zyx.devices()
    names = [w for w in WORKLOADS if args.only in w]
    rows = [row for d in devices if not d.interpreted for w in names for row in measure(d, w)]
    hardware = "; ".join(dict.fromkeys(results.describe(d)[0] for d in devices))
    driver = "; ".join(dict.fromkeys(results.describe(d)[1] for d in devices))
    env = results.environment(
        hardware, driver, {"numpy": np.__version__, "zyx-core": zyx.__version__},
        "IEEE f32 on the host and CUDA; OpenCL with its build options",
        "Device.launch_timed, the best of 7 rounds; no tuning cache read or written",
    )  # fmt: skip
    out = [r for row in rows for r in schema_rows(row)]
    results.write("kernel_search", results.machine(), out, env)


if __name__ == "__main__":
    main()
