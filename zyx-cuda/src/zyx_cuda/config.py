"""Config section ``cuda``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, PositiveInt

from zyx.config import BackendSection

DeviceId = Annotated[int, Field(ge=0, strict=True)]
"""A CUDA device ordinal. Strict: ``1.0``, ``"1"`` and ``true`` are errors, not ids."""


class CudaSection(BackendSection):
    """Which GPUs zyx uses and how it drives them."""

    device_ids: list[DeviceId] | None = None
    """Device ordinals to open; ``None``: every device; ``[]``: none (the backend is off)."""
    cudnn: bool = True
    """Let zyx-cudnn claim matmuls, where it is installed."""
    queues: PositiveInt = 8
    """In-order streams per device."""
