"""Host-time measurements the launch benchmarks share (imported from the scripts' own
folder)."""

from __future__ import annotations

import time
from collections.abc import Callable


def per_launch(run: Callable[[], None], drain: Callable[[], None], launches: int) -> float:
    """Microseconds per call of ``run`` in a burst of ``launches``, ``drain`` called
    (untimed) before and after the burst."""
    drain()
    start = time.perf_counter()
    for _ in range(launches):
        run()
    elapsed = time.perf_counter() - start
    drain()
    return elapsed / launches * 1e6
