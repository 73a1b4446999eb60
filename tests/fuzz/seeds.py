"""What the two fuzzers share: running a range of seeds for a while, and its report."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Report:
    """Outcomes of a range of seeds: per device, how many runs ended each way, and the
    findings (each prints itself with the command that reproduces it)."""

    title: str
    """The fuzzer: ``fuzz``, ``array fuzz``."""
    unit: str
    """What a seed makes: ``kernels``, ``programs``."""
    start: int
    done: int = 0
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    findings: list[Any] = field(default_factory=list)

    def run(self, fuzz_seed: Callable[[int], None], count: int | None, seconds: float) -> Report:
        """Seeds ``start``, ``start + 1``, ... until ``count`` of them or ``seconds`` are done."""
        deadline = time.monotonic() + seconds
        while (count is None or self.done < count) and time.monotonic() < deadline:
            fuzz_seed(self.start + self.done)
            self.done += 1
        return self

    def summary(self, seconds: float) -> str:
        per_device = "; ".join(
            f"{name}: " + ", ".join(f"{n} {what}" for what, n in sorted(c.items()))
            for name, c in self.outcomes.items()
        )
        last = self.start + self.done - 1
        return (
            f"{self.title}: {self.done} {self.unit} (seeds {self.start}..{last}) in "
            f"{seconds:.0f} s; {per_device}; {len(self.findings)} findings"
        )
