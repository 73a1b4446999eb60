"""Config section ``opencl``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, PositiveInt

from zyx.config import BackendSection

PlatformId = Annotated[int, Field(ge=0, strict=True)]
"""An index into ``clGetPlatformIDs``. Strict: ``1.0``, ``"1"`` and ``true`` are errors."""


class OpenCLSection(BackendSection):
    """Which OpenCL platforms zyx uses and how it schedules work on them."""

    platform_ids: list[PlatformId] | None = None
    """Platforms to open; ``None``: every platform; ``[]``: none (the backend is off)."""
    queues: PositiveInt = 8
    """In-order command queues per device."""
    window: PositiveInt = 100
    """Commands per micro-batch: the scheduler flushes at this size or at a sync point."""
    gate: bool | None = None
    """Hold each window's commands behind a user event until the whole window is enqueued;
    ``None``: on CPU devices only. Measured (BENCHMARKS.md): on PoCL, ``Device.launch``
    takes 30-50% less host time with it; on NVIDIA's OpenCL half, but 8-15% fewer small
    kernels per second go through, and the process's other enqueues slow down."""
