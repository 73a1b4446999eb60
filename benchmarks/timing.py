"""Host-time measurements the launch benchmarks share (imported from the scripts' own
folder)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping


def per_launch(
    run: Callable[[], None],
    drain: Callable[[], None],
    launches: int,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Microseconds per call of ``run`` in a burst of ``launches``, ``drain`` called
    (untimed) before and after the burst. ``clock``: wall time, or ``time.thread_time``
    (the calling thread's CPU time: what a launch costs the caller whatever else the
    machine runs, for comparing builds on a loaded machine)."""
    drain()
    start = clock()
    for _ in range(launches):
        run()
    elapsed = clock() - start
    drain()
    return elapsed / launches * 1e6


def interleaved(
    runs: Mapping[str, Callable[[], object]],
    measure: Callable[[Callable[[], object]], float],
    rounds: int,
) -> dict[str, float]:
    """The median over ``rounds`` of ``measure(run)`` for each of ``runs``, after one
    untimed warm-up each; every round measures each run once, in turn, so that a GPU whose
    clocks drift as it heats (an H100 at 8192³ bf16 moved 5 to 10% within one run, in
    either direction), or a host whose load changes, skews them all alike."""
    for run in runs.values():
        measure(run)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(measure(run))
    return {name: statistics.median(found) for name, found in times.items()}
