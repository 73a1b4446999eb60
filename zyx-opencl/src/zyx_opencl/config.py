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
    ``None``: on CPU devices only. Measured: PoCL's enqueue costs 2-3x less behind it; on
    NVIDIA's OpenCL, ``Device.launch`` takes half the host time, but the driver hands the
    held commands to the GPU more slowly (about 5-13% fewer small kernels per second)."""
