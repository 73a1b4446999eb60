"""Host-time measurements the launch benchmarks share (imported from the scripts' own
folder)."""

from __future__ import annotations

import time
from collections.abc import Callable


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
