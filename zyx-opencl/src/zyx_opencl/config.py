"""Config section ``opencl``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from zyx.config import BackendSection

PlatformId = Annotated[int, Field(ge=0, strict=True)]
"""An index into ``clGetPlatformIDs``. Strict: ``1.0``, ``"1"`` and ``true`` are errors."""

MAX_QUEUES = 64
"""A command waits for at most the latest marker of each other queue and the window's
gate: ``queues`` events, and the native enqueue takes at most 64 (``MAX_WAITS`` in
native.c). Every queue is created at open: without a bound, a typo exhausts memory."""


class OpenCLSection(BackendSection):
    """Which OpenCL platforms zyx uses and how it schedules work on them."""

    platform_ids: list[PlatformId] | None = None
    """Platforms to open; ``None``: every platform; ``[]``: none (the backend is off)."""
    queues: Annotated[int, Field(gt=0, le=MAX_QUEUES, strict=True)] = 8
    """In-order command queues per device, 1 to ``MAX_QUEUES``. Strict, as ``platform_ids``."""
    window: Annotated[int, Field(gt=0, strict=True)] = 100
    """Commands per micro-batch: the scheduler flushes at this size or at a sync point."""
    gate: bool | None = None
    """Hold each window's commands behind a user event until the whole window is enqueued;
    ``None``: on CPU devices only. With it ``Device.launch`` takes less host time; on
    NVIDIA's OpenCL, though, fewer small kernels per second go through and the process's
    other enqueues slow down (benchmarks/opencl_bench.py ``--gate on|off``: its empty-kernel
    and throughput rows)."""
