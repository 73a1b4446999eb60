"""What this process may use of the host, from the OS: the stack a thread runs kernels on.

CPU devices (the host's, and OpenCL's on a CPU, PoCL) run a work-group on one thread,
whose stack holds every work-item's register arrays at once: a kernel past it does not
fail, it kills the process (SIGSEGV). They declare what they may use in
``DeviceInfo.private_mem_size``, which ``zyx.ir.check_limits`` checks at compile.
"""

from __future__ import annotations

import resource

UNLIMITED_STACK = 2 << 20
"""The stack of a new thread where ``RLIMIT_STACK`` is unlimited: glibc's default then
(``ARCH_STACK_DEFAULT_SIZE``, 2 MiB on x86-64), which OpenMP's and PoCL's threads get."""


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
