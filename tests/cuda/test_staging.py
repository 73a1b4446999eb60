"""The staging lanes cover a copy exactly, in chunks no larger than a slot. Runs without a
GPU: the driver calls are replaced by host memcpys, "device" memory is a numpy array."""

from __future__ import annotations

import ctypes
import types
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

from zyx.backend import byte_view  # noqa: E402
from zyx_cuda import staging  # noqa: E402

pytestmark = pytest.mark.cuda

SLOT = 1 << 16


class FakeDriver:
    """The driver calls ``Staging`` makes, done at once on host memory."""

    CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)

    def __init__(self) -> None:
        self.locked: list[np.ndarray] = []
        """Host memory the driver reports page-locked."""
        self.synchronized = 0
        self.pinned: list[np.ndarray] = []
        self.copies: list[tuple[int, int]] = []
        """(offset into the pinned-or-device side, size) of every staged DMA."""

    def cuMemHostAlloc(self, nbytes: int, flags: int) -> tuple[int, int]:
        self.pinned.append(np.zeros(nbytes, np.uint8))
        return 0, self.pinned[-1].ctypes.data

    def cuEventCreate(self, flags: int) -> tuple[int, object]:
        return 0, object()

    def cuEventRecord(self, event: object, stream: object) -> tuple[int]:
        return (0,)

    def cuEventSynchronize(self, event: object) -> tuple[int]:
        return (0,)

    def cuStreamSynchronize(self, stream: object) -> tuple[int]:
        self.synchronized += 1
        return (0,)

    def cuPointerGetAttribute(self, attribute: object, address: int) -> tuple[int, int]:
        for memory in self.locked:
            if memory.ctypes.data <= address < memory.ctypes.data + memory.nbytes:
                return 0, staging._HOST
        return 1, 0  # CUDA_ERROR_INVALID_VALUE: memory the driver does not know

    def cuMemcpyHtoDAsync(self, dst: int, src: int, size: int, stream: Any) -> tuple[int]:
        self.copies.append((dst, size))
        ctypes.memmove(dst, src, size)
        return (0,)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, size: int, stream: Any) -> tuple[int]:
        self.copies.append((src, size))
        ctypes.memmove(dst, src, size)
        return (0,)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    driver = FakeDriver()
    monkeypatch.setattr(staging, "driver", driver)
    # The Python lanes: the native ones call the real driver (tests/cuda's GPU tests).
    monkeypatch.setattr(staging, "copier", lambda: None)
    return driver


def covered(copies: list[tuple[int, int]], base: int, nbytes: int) -> bool:
    """Whether the staged copies tile ``[base, base + nbytes)`` exactly once."""
    spans = sorted((start - base, size) for start, size in copies)
    position = 0
    for start, size in spans:
        if start != position or size > SLOT:
            return False
        position += size
    return position == nbytes


@pytest.mark.parametrize("threads", [1, 3, 8])
@pytest.mark.parametrize("nbytes", [staging.DIRECT_BYTES + 1, 37 * SLOT + 123])
def test_staged_copies_tile_the_range_and_round_trip(
    fake: FakeDriver, threads: int, nbytes: int
) -> None:
    context = types.SimpleNamespace(activate=lambda: None)
    lanes = staging.Staging(context, threads=threads, slot_bytes=SLOT)  # type: ignore[arg-type]
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    device = np.zeros(nbytes, np.uint8)
    lanes.upload(device.ctypes.data, byte_view(data), stream=None)
    np.testing.assert_array_equal(device, data)
    assert covered(fake.copies, device.ctypes.data, nbytes)
    fake.copies.clear()
    back = np.zeros(nbytes, np.uint8)
    lanes.download(byte_view(back, writable=True), device.ctypes.data, stream=None)
    np.testing.assert_array_equal(back, data)
    assert covered(fake.copies, device.ctypes.data, nbytes)
    assert len(fake.pinned) == 2 * threads  # two slots per lane, allocated once


def test_small_copies_skip_staging(fake: FakeDriver) -> None:
    context = types.SimpleNamespace(activate=lambda: None)
    lanes = staging.Staging(context, threads=2, slot_bytes=SLOT)  # type: ignore[arg-type]
    data = np.arange(100, dtype=np.uint8)
    device = np.zeros(100, np.uint8)
    lanes.upload(device.ctypes.data, byte_view(data), stream=None)
    np.testing.assert_array_equal(device, data)
    assert fake.pinned == []


def test_page_locked_memory_is_copied_in_place(fake: FakeDriver) -> None:
    """One DMA for the whole range, no staging slots, and the call returns once it is
    done (the host memory may be reused); pageable memory next to it is staged."""
    context = types.SimpleNamespace(activate=lambda: None)
    lanes = staging.Staging(context, threads=2, slot_bytes=SLOT)  # type: ignore[arg-type]
    nbytes = 5 * SLOT
    data = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8)
    fake.locked.append(data)
    device = np.zeros(nbytes, np.uint8)
    lanes.upload(device.ctypes.data, byte_view(data), stream=None)
    np.testing.assert_array_equal(device, data)
    assert fake.copies == [(device.ctypes.data, nbytes)] and fake.pinned == []
    assert fake.synchronized == 1
    back = np.zeros(nbytes, np.uint8)
    fake.locked.append(back)
    lanes.download(byte_view(back, writable=True), device.ctypes.data, stream=None)
    np.testing.assert_array_equal(back, data)
    assert fake.pinned == [] and fake.synchronized == 2
    fake.locked[:] = [data[: nbytes // 2]]  # locked at the start only: staged
    lanes.upload(device.ctypes.data, byte_view(data), stream=None)
    assert len(fake.pinned) == 4
