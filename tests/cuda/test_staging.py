"""The staging lanes cover a copy exactly, in chunks no larger than a slot, share its chunks
out by who is free, and reuse a slot only once its last DMA is done. Runs without a GPU: the
driver calls are replaced by host memcpys, "device" memory is a numpy array; the native
lanes (``native.c``) call the same stand-ins through C function pointers."""

from __future__ import annotations

import ctypes
import itertools
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver")

from native_build import native_module  # noqa: E402

from zyx.backend import byte_view  # noqa: E402
from zyx.errors import BackendError, ErrorStatus  # noqa: E402
from zyx_cuda import errors, staging  # noqa: E402

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
        self.threads: list[int] = []
        """The thread that made each of ``copies``."""
        self.slow: int | None = None
        """A thread held at its first copy until the others copied all the rest
        (``slow_down``)."""
        self.chunks = 0
        """The chunks of the copy that ``slow`` is in."""
        self.log: list[tuple[str, int]] = []
        """In order: ``("htod", source)``, ``("dtoh", destination)``, ``("record", event)``,
        ``("sync", event)``."""
        self.left: dict[str, int] = {}
        """Calls of a name (``cuMemHostAlloc``, ``cuEventCreate``) that succeed before it
        fails (out of memory)."""
        self.freed: list[int] = []
        """Pinned memory and events given back."""
        self._events = itertools.count(1)
        self._lock = threading.Condition()

    def slow_down(self, chunks: int) -> None:
        """In the next copy, of ``chunks`` chunks, the first thread to copy is held at its
        copy until the others copied all the rest: a lane on a core busy for that long.
        (At most 10 s: lanes that cannot take its share leave it to the held one.)"""
        self.slow, self.chunks = 0, chunks

    def _spend(self, call: str) -> bool:
        """Whether ``call`` may succeed (``left``)."""
        left = self.left.get(call)
        if left is not None:
            self.left[call] = left - 1
        return left is None or left > 0

    def cuMemHostAlloc(self, nbytes: int, flags: int) -> tuple[int, int]:
        if not self._spend("cuMemHostAlloc"):
            return 2, 0  # CUDA_ERROR_OUT_OF_MEMORY
        self.pinned.append(np.zeros(nbytes, np.uint8))
        return 0, self.pinned[-1].ctypes.data

    def cuMemFreeHost(self, ptr: int) -> tuple[int]:
        self.freed.append(ptr)
        return (0,)

    def cuEventCreate(self, flags: int) -> tuple[int, int]:
        if not self._spend("cuEventCreate"):
            return 2, 0
        return 0, next(self._events)

    def cuEventDestroy(self, event: int) -> tuple[int]:
        self.freed.append(event)
        return (0,)

    def cuEventRecord(self, event: int, stream: object) -> tuple[int]:
        self._logged("record", int(event))
        return (0,)

    def cuEventSynchronize(self, event: int) -> tuple[int]:
        self._logged("sync", int(event))
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
        self._logged("htod", src)
        self._copied(dst, size)
        ctypes.memmove(dst, src, size)
        return (0,)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, size: int, stream: Any) -> tuple[int]:
        if not self._spend("cuMemcpyDtoHAsync"):
            return (1,)  # CUDA_ERROR_INVALID_VALUE
        self._logged("dtoh", dst)
        self._copied(src, size)
        ctypes.memmove(dst, src, size)
        return (0,)

    def _logged(self, call: str, handle: int) -> None:
        with self._lock:
            self.log.append((call, handle))

    def _copied(self, device: int, size: int) -> None:
        thread = threading.get_ident()
        with self._lock:
            self.copies.append((device, size))
            self.threads.append(thread)
            if self.slow == 0:
                self.slow = thread
            if thread == self.slow:
                self._lock.wait_for(lambda: len(self.copies) >= self.chunks, timeout=10)
            else:
                self._lock.notify_all()


_INT, _PTR, _U64, _SIZE = ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t
_HTOD = ctypes.CFUNCTYPE(_INT, _U64, _PTR, _SIZE, _PTR)
_DTOH = ctypes.CFUNCTYPE(_INT, _PTR, _U64, _SIZE, _PTR)
_RECORD = ctypes.CFUNCTYPE(_INT, _PTR, _PTR)
_SYNC = ctypes.CFUNCTYPE(_INT, _PTR)


class NativeLanes:
    """zyx-cuda's native lanes (a build of their own) with the copy and event calls bound to
    whichever ``FakeDriver`` is ``driver`` (C function pointers into Python)."""

    def __init__(self) -> None:
        self.module = native_module("_zyx_cuda_native_lanes")
        self.driver = FakeDriver()
        calls = (
            _HTOD(lambda *args: self.driver.cuMemcpyHtoDAsync(*args)[0]),
            _DTOH(lambda *args: self.driver.cuMemcpyDtoHAsync(*args)[0]),
            _RECORD(lambda *args: self.driver.cuEventRecord(*args)[0]),
            _SYNC(lambda event: self.driver.cuEventSynchronize(event)[0]),
            _SYNC(lambda stream: self.driver.cuStreamSynchronize(stream)[0]),
        )
        self._calls = calls  # the pointers live as long as these objects
        self.module.bind_copies(*(ctypes.cast(call, ctypes.c_void_p).value for call in calls))


@pytest.fixture(scope="module")
def native_lanes() -> NativeLanes:
    return NativeLanes()


@pytest.fixture(params=["python", "native"])
def lanes_of(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Callable[[int], staging.Staging]:
    """Makes a ``Staging`` of n lanes over a ``FakeDriver``, with its lanes in Python or in
    C (``native.c``, its driver calls pointed at the same ``FakeDriver``)."""
    driver = FakeDriver()
    monkeypatch.setattr(staging, "driver", driver)
    if request.param == "native":
        native = request.getfixturevalue("native_lanes")
        native.driver = driver
        monkeypatch.setattr(staging, "copier", lambda: native.module)
    else:
        monkeypatch.setattr(staging, "copier", lambda: None)
    context = types.SimpleNamespace(activate=lambda: None)

    def lanes(threads: int) -> staging.Staging:
        made = staging.Staging(context, threads=threads, slot_bytes=SLOT)  # type: ignore[arg-type]
        made.driver = driver  # type: ignore[attr-defined]
        return made

    return lanes


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    driver = FakeDriver()
    monkeypatch.setattr(staging, "driver", driver)
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
    lanes_of: Callable[[int], staging.Staging], threads: int, nbytes: int
) -> None:
    lanes = lanes_of(threads)
    fake: FakeDriver = lanes.driver  # type: ignore[attr-defined]
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    device = np.zeros(nbytes, np.uint8)
    lanes.upload(device.ctypes.data, byte_view(data), stream=0)
    np.testing.assert_array_equal(device, data)
    assert covered(fake.copies, device.ctypes.data, nbytes)
    fake.copies.clear()
    back = np.zeros(nbytes, np.uint8)
    lanes.download(byte_view(back, writable=True), device.ctypes.data, stream=0)
    np.testing.assert_array_equal(back, data)
    assert covered(fake.copies, device.ctypes.data, nbytes)
    assert len(fake.pinned) == 2 * threads  # two slots per lane, allocated once


@pytest.mark.parametrize("direction", ["upload", "download"])
def test_a_slow_lane_takes_fewer_chunks(
    lanes_of: Callable[[int], staging.Staging], direction: str
) -> None:
    """The lanes take the next chunk not yet taken, so one held up at its first chunk
    leaves the rest to the others instead of finishing its share last."""
    lanes, chunks = lanes_of(4), 40
    fake: FakeDriver = lanes.driver  # type: ignore[attr-defined]
    data = np.random.default_rng(2).integers(0, 256, chunks * SLOT, dtype=np.uint8)
    device = np.zeros_like(data)
    if direction == "download":
        device[:] = data
        data = np.zeros_like(data)
    fake.slow_down(chunks)
    if direction == "upload":
        lanes.upload(device.ctypes.data, byte_view(data), stream=0)
    else:
        lanes.download(byte_view(data, writable=True), device.ctypes.data, stream=0)
    np.testing.assert_array_equal(device, data)
    assert covered(fake.copies, device.ctypes.data, chunks * SLOT)
    slow = fake.threads.count(fake.slow)
    assert slow == 1, f"the held lane copied {slow} of {chunks} chunks"


@pytest.mark.parametrize("threads", [1, 3])
def test_a_slot_is_filled_only_once_its_last_dma_is_done(
    lanes_of: Callable[[int], staging.Staging], threads: int
) -> None:
    """An upload returns while its last DMAs may still read the slots, and the next copy
    (here a download, then an upload, each on a stream of its own) may come at once: a
    lane fills a slot, by memcpy or DMA, only after waiting for the event recorded after
    the slot's last DMA."""
    lanes = lanes_of(threads)
    fake: FakeDriver = lanes.driver  # type: ignore[attr-defined]
    rng = np.random.default_rng(threads)
    nbytes = 7 * SLOT + 5
    data, device = rng.integers(0, 256, (2, nbytes), dtype=np.uint8), np.zeros(nbytes, np.uint8)
    back = np.zeros(nbytes, np.uint8)
    lanes.upload(device.ctypes.data, byte_view(data[0]), stream=1)
    lanes.download(byte_view(back, writable=True), device.ctypes.data, stream=2)
    lanes.upload(device.ctypes.data, byte_view(data[1]), stream=3)
    np.testing.assert_array_equal(back, data[0])
    events = {slot.ptr: int(slot.event) for pair in lanes._lanes for slot in pair}
    pending: set[int] = set()  # events recorded, not waited for since
    for call, handle in fake.log:
        if call == "record":
            pending.add(handle)
        elif call == "sync":
            pending.discard(handle)
        else:  # a DMA from or into a slot: the slot was filled or is now
            assert events[handle] not in pending, f"{call} of slot {handle:#x} in {fake.log}"


@pytest.mark.parametrize("failing", ["cuMemHostAlloc", "cuEventCreate"])
def test_slots_made_before_one_failed_are_freed(
    fake: FakeDriver, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """Pinned memory is scarce: slots allocated before one could not be are given back,
    and a later copy tries again."""
    monkeypatch.setattr(errors.driver, "cuGetErrorString", lambda result: (0, b"stubbed"))
    context = types.SimpleNamespace(activate=lambda: None)
    lanes = staging.Staging(context, threads=3, slot_bytes=SLOT)  # type: ignore[arg-type]
    data = np.random.default_rng(3).integers(0, 256, 5 * SLOT, dtype=np.uint8)
    device = np.zeros_like(data)
    fake.left[failing] = 4
    with pytest.raises(BackendError) as caught:
        lanes.upload(device.ctypes.data, byte_view(data), stream=0)
    statuses = {
        "cuMemHostAlloc": ErrorStatus.MEMORY_ALLOCATION,
        "cuEventCreate": ErrorStatus.INITIALIZATION,
    }
    assert caught.value.status is statuses[failing]
    events = [1, 2, 3, 4]  # the fake's, counted from 1: four made before the failure
    assert sorted(fake.freed) == sorted([p.ctypes.data for p in fake.pinned] + events)
    del fake.left[failing]
    lanes.upload(device.ctypes.data, byte_view(data), stream=0)
    np.testing.assert_array_equal(device, data)


def test_small_copies_skip_staging(fake: FakeDriver) -> None:
    context = types.SimpleNamespace(activate=lambda: None)
    lanes = staging.Staging(context, threads=2, slot_bytes=SLOT)  # type: ignore[arg-type]
    data = np.arange(100, dtype=np.uint8)
    device = np.zeros(100, np.uint8)
    lanes.upload(device.ctypes.data, byte_view(data), stream=0)
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
    lanes.upload(device.ctypes.data, byte_view(data), stream=0)
    np.testing.assert_array_equal(device, data)
    assert fake.copies == [(device.ctypes.data, nbytes)] and fake.pinned == []
    assert fake.synchronized == 1
    back = np.zeros(nbytes, np.uint8)
    fake.locked.append(back)
    lanes.download(byte_view(back, writable=True), device.ctypes.data, stream=0)
    np.testing.assert_array_equal(back, data)
    assert fake.pinned == [] and fake.synchronized == 2
    fake.locked[:] = [data[: nbytes // 2]]  # locked at the start only: staged
    lanes.upload(device.ctypes.data, byte_view(data), stream=0)
    assert len(fake.pinned) == 4


@pytest.mark.parametrize("nbytes", [100, staging.BOUNCE_BYTES, staging.BOUNCE_BYTES + 1])
def test_small_reads_are_one_dma_and_a_wait(
    lanes_of: Callable[[int], staging.Staging], request: pytest.FixtureRequest, nbytes: int
) -> None:
    """Up to ``DIRECT_BYTES``, a read is one DMA and the stream's wait, no staging lanes.
    Natively, up to ``BOUNCE_BYTES`` the DMA lands in one page-locked buffer (allocated on
    the first read, reused by the next) and is copied out; above, it goes into the
    destination itself."""
    lanes = lanes_of(2)
    fake: FakeDriver = lanes.driver  # type: ignore[attr-defined]
    native = request.node.callspec.params["lanes_of"] == "native"
    device = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    backs = [np.zeros(nbytes, np.uint8) for _ in range(2)]
    for round, back in enumerate(backs, 1):
        lanes.download(byte_view(back, writable=True), device.ctypes.data, stream=0)
        np.testing.assert_array_equal(back, device)
        assert fake.synchronized == round
    into = [handle for call, handle in fake.log if call == "dtoh"]
    if native and nbytes <= staging.BOUNCE_BYTES:
        (bounce,) = fake.pinned
        assert bounce.nbytes == staging.BOUNCE_BYTES and into == [bounce.ctypes.data] * 2
    else:
        assert fake.pinned == [] and into == [back.ctypes.data for back in backs]


def test_a_native_read_takes_only_writable_contiguous_memory(native_lanes: NativeLanes) -> None:
    """The native read takes the destination's address from its buffer, refusing one it
    could not write in place before any DMA."""
    fake = native_lanes.driver = FakeDriver()
    device = np.arange(64, dtype=np.uint8)
    back = np.zeros(128, np.uint8)
    for host in (memoryview(bytes(64)), memoryview(back)[::2]):
        with pytest.raises(BufferError):
            native_lanes.module.read(host, device.ctypes.data, 0, 0)
    assert fake.log == [] and fake.synchronized == 0
    result, call = native_lanes.module.read(memoryview(back)[:64], device.ctypes.data, 0, 0)
    assert (result, call) == (0, "") and fake.synchronized == 1
    np.testing.assert_array_equal(back[:64], device)


def test_a_failed_small_read_names_the_call(
    lanes_of: Callable[[int], staging.Staging], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(errors.driver, "cuGetErrorString", lambda result: (0, b"stubbed"))
    lanes = lanes_of(2)
    fake: FakeDriver = lanes.driver  # type: ignore[attr-defined]
    device = np.arange(64, dtype=np.uint8)
    fake.left["cuMemcpyDtoHAsync"] = 0
    back = np.zeros(64, np.uint8)
    with pytest.raises(BackendError, match="cuMemcpyDtoHAsync") as caught:
        lanes.download(byte_view(back, writable=True), device.ctypes.data, stream=0)
    assert caught.value.status is ErrorStatus.MEMORY_COPY_P2H
    assert fake.synchronized == 0 and not back.any()
    del fake.left["cuMemcpyDtoHAsync"]
    lanes.download(byte_view(back, writable=True), device.ctypes.data, stream=0)
    np.testing.assert_array_equal(back, device)
