"""What the host CPU is: model, cores, clock and SIMD width, read once from the OS.

Only Linux's ``/proc/cpuinfo`` says all of it; elsewhere the model comes from ``platform``
and the vector width falls back to 16 bytes (SSE2 / NEON, which every 64-bit CPU has).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class CpuInfo:
    model: str
    cores: int
    """Logical CPUs this process may run on."""
    mhz: float
    """Current clock as the OS reports it (0 where unknown)."""
    flags: frozenset[str]

    @property
    def vector_bytes(self) -> int:
        """The widest SIMD register: 64 with AVX-512, 32 with AVX2, else 16."""
        if "avx512f" in self.flags:
            return 64
        if "avx2" in self.flags:
            return 32
        return 16

    @property
    def peak_flops(self) -> float:
        """Estimated float32 FLOP/s: two FMA pipes per core, each a full vector per cycle."""
        lanes = self.vector_bytes // 4
        return self.cores * (self.mhz or 2000.0) * 1e6 * lanes * 2 * 2


@cache
def cpu_info() -> CpuInfo:
    """The host CPU (read once per process)."""
    fields = _cpuinfo_fields(Path("/proc/cpuinfo"))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return CpuInfo(
        model=fields.get("model name") or platform.processor() or platform.machine(),
        cores=cores,
        mhz=float(fields.get("cpu MHz", 0.0)),
        flags=frozenset(fields.get("flags", "").split()),
    )


def _cpuinfo_fields(path: Path) -> dict[str, str]:
    """The ``key: value`` lines of the first processor in ``/proc/cpuinfo``."""
    fields: dict[str, str] = {}
    try:
        text = path.read_text()
    except OSError:
        return fields
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields
