"""The pool: allocation limits and exact accounting, copies from every kind of pool."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from opencl_support import open_all, read, skip_unless_one_opens

from zyx.backend import Buffer
from zyx.disk import DiskPool
from zyx.errors import BackendError, ErrorStatus
from zyx.host.pool import HostPool
from zyx_opencl.device import OpenCLDevice

pytestmark = pytest.mark.opencl

DATA = np.arange(1024, dtype=np.float32) * 0.5 + 1


def test_one_allocation_over_max_mem_alloc_size_is_refused(device: OpenCLDevice) -> None:
    pool = device.pool
    free = pool.free_bytes()
    with pytest.raises(BackendError) as caught:
        pool.allocate(pool.max_allocation + 1)
    assert caught.value.status is ErrorStatus.MEMORY_ALLOCATION
    assert "CL_DEVICE_MAX_MEM_ALLOC_SIZE" in caught.value.context
    assert pool.free_bytes() == free


def test_under_rlimit_as_a_cpu_device_refuses_what_the_process_cannot_back() -> None:
    """PoCL allocates a buffer at its first use and segfaulted where malloc failed under
    ulimit -v: zyx's capacity for a CPU device now stops short of the process's limit."""
    skip_unless_one_opens()
    code = """
import resource, sys
import numpy as np
resource.setrlimit(resource.RLIMIT_AS, (2500 << 20, 2500 << 20))
import zyx
from zyx.errors import BackendError
device = zyx.device("opencl")
if not device.cl_device.type & 2:  # CL_DEVICE_TYPE_CPU
    sys.exit(3)
pool, buffers = device.pool, []
try:
    for _ in range(8):
        buffers.append(pool.allocate(min(1 << 30, pool.max_allocation)))
        pool.write(buffers[-1], np.ones(16, np.uint8), buffers[-1].nbytes - 16)
        pool.read(buffers[-1], np.empty(16, np.uint8), buffers[-1].nbytes - 16)
except BackendError as error:
    print(error.status.value)
for buf in buffers:
    pool.release(buf)
small = pool.allocate(1024)
pool.write(small, np.ones(1024, np.uint8))
print("usable")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode == 3:
        pytest.skip("the first OpenCL device is not a CPU")
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split() == ["MemoryAllocation", "usable"]


def test_allocations_past_the_capacity_are_refused_and_the_pool_stays_usable(
    device: OpenCLDevice, alloc: Callable[[int], Buffer], monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = device.pool
    device.synchronize()  # frees deferred by earlier tests would land mid-test otherwise
    monkeypatch.setattr(pool, "capacity", pool.capacity - pool.free_bytes() + (1 << 20))
    first = alloc(1 << 19)
    with pytest.raises(BackendError) as caught:
        alloc(1 << 20)
    assert caught.value.status is ErrorStatus.MEMORY_ALLOCATION
    assert pool.free_bytes() == 1 << 19
    pool.write(first, DATA)
    np.testing.assert_array_equal(read(device, first)[: DATA.size], DATA)


def test_an_allocation_waits_for_memory_that_is_being_freed(
    device: OpenCLDevice, alloc: Callable[[int], Buffer], monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = device.pool
    monkeypatch.setattr(pool, "capacity", pool.capacity - pool.free_bytes() + (1 << 20))
    busy = pool.allocate(1 << 20)
    pool.write(busy, np.zeros(1 << 18, np.float32))
    pool.release(busy)  # its write may still run: freed later, not now
    replacement = alloc(1 << 20)  # reclaims the released memory
    assert pool.free_bytes() == 0
    pool.write(replacement, DATA)
    np.testing.assert_array_equal(read(device, replacement)[: DATA.size], DATA)


def test_a_write_stages_the_callers_bytes(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    buf = alloc(DATA.nbytes)
    data = DATA.copy()
    device.pool.write(buf, data)
    data[:] = -1  # before the copy ran, perhaps: it must not matter
    np.testing.assert_array_equal(read(device, buf), DATA)


def test_a_copy_from_the_host_pool_reads_in_place_and_holds_its_memory(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    """The copy holds the source's array, not the buffer: the owner may release it at once,
    and its completion takes no lock of the host pool (``zyx.staging``)."""
    host = HostPool()
    src = host.allocate(DATA.nbytes)
    host.write(src, DATA)
    dst = alloc(DATA.nbytes)
    device.pool.copy_from(host, src, dst)
    (_, upload, _) = device.scheduler._batch[-1]
    assert upload.src is HostPool.array(src), "no staging copy"
    host.release(src)  # the owner lets go while the copy may still read it
    assert src.refcount == 0 and host.free_bytes() == host.capacity
    device.synchronize()
    np.testing.assert_array_equal(read(device, dst), DATA)


def test_a_copy_from_another_context_stages_through_the_host(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    other = open_all()[device.index]
    assert other.pool.context != device.pool.context
    src = other.pool.allocate(DATA.nbytes)
    try:
        other.pool.write(src, DATA)
        dst = alloc(DATA.nbytes)
        device.pool.copy_from(other.pool, src, dst)
        np.testing.assert_array_equal(read(device, dst), DATA)
    finally:
        other.pool.release(src)


def test_a_copy_from_a_file(
    device: OpenCLDevice, alloc: Callable[[int], Buffer], tmp_path: Path
) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"header" + DATA.tobytes())
    disk = DiskPool()
    src = disk.open(path, offset=6, nbytes=DATA.nbytes)
    try:
        dst = alloc(DATA.nbytes)
        device.pool.copy_from(disk, src, dst)
        np.testing.assert_array_equal(read(device, dst), DATA)
    finally:
        disk.release(src)


def test_a_copy_within_the_device(device: OpenCLDevice, alloc: Callable[[int], Buffer]) -> None:
    src, dst = alloc(DATA.nbytes), alloc(DATA.nbytes)
    device.pool.write(src, DATA)
    device.pool.copy_from(device.pool, src, dst)
    device.pool.write(src, np.zeros_like(DATA))  # ordered after the copy read src
    np.testing.assert_array_equal(read(device, dst), DATA)
