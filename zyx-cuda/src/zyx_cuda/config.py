"""Config section ``cuda``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from zyx.config import BackendSection

DeviceId = Annotated[int, Field(ge=0, strict=True)]
"""A CUDA device ordinal. Strict: ``1.0``, ``"1"`` and ``true`` are errors, not ids."""

MAX_QUEUES = 32
"""The most hardware work queues a GPU gives one process (``CUDA_DEVICE_MAX_CONNECTIONS``
is at most 32): more streams share them and add only cross-stream events, and an unbounded
count would create streams until the driver runs out of memory."""


class CudaSection(BackendSection):
    """Which GPUs zyx uses and how it drives them."""

    device_ids: list[DeviceId] | None = None
    """Device ordinals to open; ``None``: every device; ``[]``: none (the backend is off)."""
    cudnn: bool = True
    """Let zyx-cudnn claim matmuls, where it is installed."""
    queues: Annotated[int, Field(gt=0, le=MAX_QUEUES, strict=True)] = 8
    """In-order streams per device, 1 to ``MAX_QUEUES``. Strict, as ``device_ids``."""
