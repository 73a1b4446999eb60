"""The CUDA pool on a GPU: copies through pinned staging, accounting, deferred frees, OOM."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

import zyx
from zyx.disk import DiskPool
from zyx.errors import BackendError, ErrorStatus, PluginError
from zyx.host.pool import HostPool
from zyx_cuda.staging import DIRECT_BYTES, SLOT_BYTES

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = [pytest.mark.cuda, pytest.mark.gpu]


@pytest.mark.parametrize(
    "nbytes", [1, 4096 + 3, DIRECT_BYTES + 1, 5 * SLOT_BYTES + 12345], ids=lambda n: f"{n}B"
)
def test_write_then_read_round_trips_every_size(
    device: CudaDevice, rng: np.random.Generator, nbytes: int
) -> None:
    pool = device.pool
    data = rng.integers(0, 256, nbytes, dtype=np.uint8)
    buf = pool.allocate(nbytes)
    try:
        pool.write(buf, data)
        out = np.zeros(nbytes, np.uint8)
        pool.read(buf, out)
        np.testing.assert_array_equal(out, data)
    finally:
        pool.release(buf)


def test_partial_writes_and_reads_at_offsets(device: CudaDevice, rng: np.random.Generator) -> None:
    pool = device.pool
    whole = rng.standard_normal(1 << 20).astype(np.float32)
    buf = pool.allocate(whole.nbytes)
    try:
        pool.write(buf, whole)
        patch = rng.standard_normal(1000).astype(np.float32)
        pool.write(buf, patch, offset=4 * 5000)
        whole[5000:6000] = patch
        out = np.empty(3000, np.float32)
        pool.read(buf, out, offset=4 * 4000)
        np.testing.assert_array_equal(out, whole[4000:7000])
        with pytest.raises(BackendError) as caught:
            pool.read(buf, out, offset=whole.nbytes - 4)
        assert caught.value.status is ErrorStatus.MEMORY_COPY_P2H
    finally:
        pool.release(buf)


def test_free_bytes_counts_exactly_what_the_pool_holds(device: CudaDevice) -> None:
    pool = device.pool
    device.synchronize()
    before = pool.free_bytes()
    buf = pool.allocate(123_456_789)
    assert pool.free_bytes() == before - 123_456_789
    pool.release(buf)
    device.synchronize()
    assert pool.free_bytes() == before


def test_release_waits_for_the_work_that_uses_the_buffer(
    device: CudaDevice, rng: np.random.Generator
) -> None:
    """A buffer released while a copy reads it is freed later; its memory cannot be reused
    under the copy."""
    pool = device.pool
    data = rng.integers(0, 1 << 30, 64 << 20, dtype=np.int32)
    src, dst = pool.allocate(data.nbytes), pool.allocate(data.nbytes)
    pool.write(src, data)
    pool.copy_from(pool, src, dst)
    pool.release(src)  # the copy may still be reading it
    reuse = pool.allocate(data.nbytes)
    pool.write(reuse, np.zeros_like(data))
    out = np.empty_like(data)
    pool.read(dst, out)
    np.testing.assert_array_equal(out, data)
    pool.release(dst)
    pool.release(reuse)


def test_copy_from_the_host_pool_and_from_another_cuda_pool(
    device: CudaDevice, rng: np.random.Generator
) -> None:
    from zyx_cuda.device import CudaDevice

    host = HostPool()
    data = rng.integers(0, 256, 3 * SLOT_BYTES + 7, dtype=np.uint8)
    hbuf = host.allocate(data.nbytes)
    host.write(hbuf, data)
    pool = device.pool
    gbuf = pool.allocate(data.nbytes)
    pool.copy_from(host, hbuf, gbuf)
    other = CudaDevice(0, queues=2)  # a second pool: the peer-copy path, same GPU
    obuf = other.pool.allocate(data.nbytes)
    other.pool.copy_from(pool, gbuf, obuf)
    pool.release(gbuf)  # freed only after the peer copy read it
    back = host.allocate(data.nbytes)
    host.copy_from(other.pool, obuf, back)
    np.testing.assert_array_equal(HostPool.array(back), data)
    other.pool.release(obuf)
    other.synchronize()


def test_copy_from_a_file_and_to_and_from_opencl(
    device: CudaDevice, rng: np.random.Generator, tmp_path: Path
) -> None:
    """Pools with no direct path between them stage through host memory: a file into the
    GPU, the GPU into an OpenCL device (the first zyx opens: NVIDIA's or PoCL) and back."""
    data = rng.integers(0, 256, 2 * SLOT_BYTES + 5, dtype=np.uint8)
    path = tmp_path / "weights.bin"
    path.write_bytes(b"head" + data.tobytes())
    disk = DiskPool()
    src = disk.open(path, offset=4, nbytes=data.nbytes)
    pool = device.pool
    gbuf = pool.allocate(data.nbytes)
    pool.copy_from(disk, src, gbuf)
    disk.release(src)
    out = np.empty_like(data)
    pool.read(gbuf, out)
    np.testing.assert_array_equal(out, data)
    try:
        opencl = zyx.device("opencl")
    except PluginError as error:
        pytest.skip(f"no OpenCL device: {error}")
    cbuf = opencl.pool.allocate(data.nbytes)
    opencl.pool.copy_from(pool, gbuf, cbuf)
    pool.write(gbuf, np.zeros_like(data))
    pool.copy_from(opencl.pool, cbuf, gbuf)
    opencl.pool.release(cbuf)
    out[:] = 0
    pool.read(gbuf, out)
    np.testing.assert_array_equal(out, data)
    pool.release(gbuf)


def test_out_of_memory_is_an_error_and_the_pool_stays_usable(device: CudaDevice) -> None:
    pool = device.pool
    with pytest.raises(BackendError) as caught:
        pool.allocate(pool.free_bytes() + (64 << 30))
    assert caught.value.status is ErrorStatus.MEMORY_ALLOCATION
    assert "CUDA_ERROR_OUT_OF_MEMORY" in str(caught.value)
    buf = pool.allocate(1024)
    pool.write(buf, np.arange(256, dtype=np.int32))
    out = np.empty(256, np.int32)
    pool.read(buf, out)
    np.testing.assert_array_equal(out, np.arange(256))
    pool.release(buf)


def test_a_read_right_after_a_write_leaves_the_write_intact(
    gpu: None, rng: np.random.Generator
) -> None:
    """A staged write returns while its last DMAs may still read the pinned slots; a read
    of another buffer on another stream, started at once, must not refill a slot before
    that DMA read it (else the read's bytes land in the written buffer). Every lane's two
    slots are in use in each copy."""
    from zyx_cuda.device import CudaDevice

    device = CudaDevice(0, queues=2)  # fresh streams: a and b get one each
    pool = device.pool
    nbytes = 2 * pool.staging.threads * SLOT_BYTES
    a, b = pool.allocate(nbytes), pool.allocate(nbytes)
    other, pattern = (rng.integers(0, 256, nbytes, dtype=np.uint8) for _ in range(2))
    pool.write(b, other)
    pool.write(a, pattern)
    assert a.tracking is not None and b.tracking is not None
    assert a.tracking.writer_queue != b.tracking.writer_queue
    out, back = np.empty(nbytes, np.uint8), np.empty(nbytes, np.uint8)
    for step in range(8):
        data = pattern + np.uint8(step)  # new bytes in every chunk
        pool.write(a, data)
        pool.read(b, out)
        pool.read(a, back)
        np.testing.assert_array_equal(back, data, err_msg=f"step {step}")
        np.testing.assert_array_equal(out, other, err_msg=f"step {step}")
    pool.release(a)
    pool.release(b)
    device.synchronize()


def test_page_locked_host_memory_is_copied_in_place(
    device: CudaDevice, rng: np.random.Generator
) -> None:
    """Host memory from ``cuMemHostAlloc`` round-trips without staging: ``write`` returns
    once the DMA has read it (overwriting it right after changes nothing), ``read`` once it
    has written it."""
    from cuda.bindings import driver

    from zyx_cuda.staging import page_locked

    nbytes = 64 << 20
    device.context.activate()
    err, ptr = driver.cuMemHostAlloc(nbytes, 0)
    assert int(err) == 0, err
    try:
        host = np.frombuffer((ctypes.c_uint8 * nbytes).from_address(ptr), np.uint8)
        host[:] = rng.integers(0, 256, nbytes, dtype=np.uint8)
        want = host.copy()
        assert page_locked(ptr, nbytes) and not page_locked(want.ctypes.data, nbytes)
        buf = device.pool.allocate(nbytes)
        device.pool.write(buf, host)
        host[:] = 0
        back = np.empty(nbytes, np.uint8)
        device.pool.read(buf, back)
        np.testing.assert_array_equal(back, want)
        device.pool.read(buf, host)
        np.testing.assert_array_equal(host, want)
        device.pool.release(buf)
    finally:
        driver.cuMemFreeHost(ptr)


def test_copies_between_two_gpus_round_trip(gpu: None, rng: np.random.Generator) -> None:
    """GPU 0 to GPU 1 and back, over the direct link where the hardware has one; the
    source is released right after the copy is enqueued (freed only once it was read)."""
    from cuda.bindings import driver

    from zyx_cuda.device import CudaDevice

    if driver.cuDeviceGetCount()[1] < 2:
        pytest.skip("needs two CUDA GPUs")
    first, second = CudaDevice(0), CudaDevice(1)
    data = rng.standard_normal((64 << 20) // 8 + 3)  # not a whole number of any chunk
    a = first.pool.allocate(data.nbytes)
    first.pool.write(a, data)
    b = second.pool.allocate(data.nbytes)
    second.pool.copy_from(first.pool, a, b)
    first.pool.release(a)
    c = first.pool.allocate(data.nbytes)
    first.pool.copy_from(second.pool, b, c)
    out = np.full_like(data, np.nan)
    first.pool.read(c, out)
    np.testing.assert_array_equal(out, data)
    link = first.context.reach(second.context)
    can = driver.cuDeviceCanAccessPeer(first.context.device, second.context.device)[1]
    assert link == bool(can)
    second.pool.release(b)
    first.pool.release(c)
    first.synchronize()
    second.synchronize()
