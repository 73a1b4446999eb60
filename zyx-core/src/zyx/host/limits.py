"""What this process may use of the host, from the OS: memory, and the stack a thread runs
kernels on.

Past either, a CPU device does not fail, it kills the process. Memory: the host pool's
``calloc`` succeeds under a cgroup limit and the kernel kills the process when the pages
are touched; PoCL allocates a buffer at its first use and segfaults where ``malloc``
fails under ``RLIMIT_AS``. So their pools count against ``usable_memory``. The stack
holds every work-item's register arrays of a work-group at once: CPU devices declare
``private_budget`` in ``DeviceInfo.private_mem_size``, which ``zyx.ir.check_limits``
checks at compile.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

UNLIMITED_STACK = 2 << 20
"""The stack of a new thread where ``RLIMIT_STACK`` is unlimited: glibc's default then
(``ARCH_STACK_DEFAULT_SIZE``, 2 MiB on x86-64), which OpenMP's and PoCL's threads get."""

_CGROUP_V1_UNLIMITED = 1 << 62
"""cgroup v1 says "no limit" with a number near 2**63 (its page counter's largest)."""


def thread_stack_bytes() -> int:
    """The stack of each thread this process starts: ``RLIMIT_STACK``'s soft limit, which
    glibc takes as the default size of new threads (OpenMP's, PoCL's)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    return UNLIMITED_STACK if soft == resource.RLIM_INFINITY else soft


def private_budget() -> int:
    """Bytes of register arrays a CPU device lets one work-group hold: half its thread's
    stack, the other half left to the kernel's other values (local memory, values kept
    across barriers) and to the frames below it."""
    return thread_stack_bytes() // 2


def usable_memory(total: int) -> int:
    """``total`` bytes (the host's RAM, a CPU device's memory), or less where this
    process's limits leave less: its headroom (``memory_headroom``) less an eighth, kept
    for the process's own growth (compilers, Python objects)."""
    headroom = memory_headroom()
    return total if headroom is None else min(total, headroom - headroom // 8)


def memory_headroom(
    proc: Path = Path("/proc/self"), cgroups: Path = Path("/sys/fs/cgroup")
) -> int | None:
    """Bytes this process may still add before its address-space limit (``RLIMIT_AS``) or
    its cgroup's memory limit (v1 or v2, the tightest of its ancestors) stops it; ``None``
    where neither limits it."""
    found = [_address_space_headroom(proc), *_cgroup_headrooms(proc, cgroups)]
    limits = [headroom for headroom in found if headroom is not None]
    return max(0, min(limits)) if limits else None


def _address_space_headroom(proc: Path) -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        pages = int((proc / "statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return soft  # no /proc: as if nothing were mapped yet
    return soft - pages * os.sysconf("SC_PAGE_SIZE")


def _cgroup_headrooms(proc: Path, cgroups: Path) -> list[int]:
    """``limit - usage`` of each memory cgroup this process is in, and of their ancestors,
    that sets a limit."""
    try:
        lines = (proc / "cgroup").read_text().splitlines()
    except OSError:
        return []
    headrooms = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2, the unified hierarchy
            base, files = cgroups, ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base, files = cgroups / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        folder = base / path.lstrip("/")
        for place in (folder, *folder.parents):
            headroom = _headroom(place, *files)
            if headroom is not None:
                headrooms.append(headroom)
            if place == base:
                break
    return headrooms


def _headroom(folder: Path, limit_file: str, usage_file: str) -> int | None:
    try:
        limit = (folder / limit_file).read_text().strip()
        usage = int((folder / usage_file).read_text())
    except (OSError, ValueError):
        return None
    if limit == "max" or not limit.isdigit() or int(limit) >= _CGROUP_V1_UNLIMITED:
        return None
    return int(limit) - usage
