"""The host pool honours the MemoryPool contract: exact accounting, checked arguments,
reference counts, and an out-of-memory error that leaves it usable."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from zyx.backend import Buffer
from zyx.errors import BackendError, ErrorStatus
from zyx.host.limits import usable_memory
from zyx.host.pool import ALIGNMENT, HostPool, physical_memory


@contextmanager
def raises(status: ErrorStatus) -> Iterator[pytest.ExceptionInfo[BackendError]]:
    with pytest.raises(BackendError) as caught:
        yield caught
    assert caught.value.status is status, caught.value


def test_capacity_defaults_to_the_physical_memory_the_process_may_use() -> None:
    usable = usable_memory(physical_memory())
    assert HostPool().capacity == usable > 0
    assert HostPool().free_bytes() == usable


def test_ten_thousand_cycles_keep_free_bytes_exact() -> None:
    pool = HostPool(capacity=1 << 24)
    rng = random.Random(7)
    live: list[Buffer] = []
    for _ in range(10_000):
        if live and rng.random() < 0.5:
            pool.release(live.pop(rng.randrange(len(live))))
        else:
            live.append(pool.allocate(rng.randrange(1, 4096)))
        assert pool.free_bytes() == pool.capacity - sum(b.nbytes for b in live)
    for buf in live:
        pool.release(buf)
    assert pool.free_bytes() == pool.capacity


def test_allocation_over_capacity_raises_and_pool_stays_usable() -> None:
    pool = HostPool(capacity=1000)
    kept = pool.allocate(600)
    with raises(ErrorStatus.MEMORY_ALLOCATION):
        pool.allocate(401)
    assert pool.free_bytes() == 400
    rest = pool.allocate(400)
    assert pool.free_bytes() == 0
    pool.write(rest, np.full(400, 7, np.uint8))
    pool.release(kept)
    assert pool.free_bytes() == 600


def test_numpy_memory_error_becomes_memory_allocation() -> None:
    pool = HostPool(capacity=sys.maxsize)
    with raises(ErrorStatus.MEMORY_ALLOCATION) as caught:
        pool.allocate(1 << 62)
    assert isinstance(caught.value.__cause__, MemoryError)
    assert pool.free_bytes() == sys.maxsize
    pool.release(pool.allocate(16))


@pytest.mark.parametrize("nbytes", [0, -1, 2.5, "8", None])
def test_bad_sizes_are_errors(nbytes: object) -> None:
    pool = HostPool(capacity=1 << 10)
    with raises(ErrorStatus.MEMORY_ALLOCATION):
        pool.allocate(nbytes)  # type: ignore[arg-type]
    assert pool.free_bytes() == 1 << 10


@pytest.mark.parametrize("data", [[1, 2, 3], 3.0, "abc"])
def test_host_data_without_the_buffer_protocol_is_an_error(data: object) -> None:
    pool = HostPool(capacity=1 << 10)
    buf = pool.allocate(16)
    with raises(ErrorStatus.INCORRECT_KERNEL_ARG) as caught:
        pool.write(buf, data)  # type: ignore[arg-type]
    assert "buffer protocol" in str(caught.value)


def test_write_read_round_trip_at_offsets() -> None:
    pool = HostPool(capacity=1 << 10)
    buf = pool.allocate(64)
    data = np.arange(8, dtype=np.float32)
    pool.write(buf, data, offset=16)
    out = np.zeros(8, np.float32)
    pool.read(buf, out, offset=16)
    np.testing.assert_array_equal(out, data)
    head = np.ones(16, np.uint8)
    pool.read(buf, head)
    assert not head.any(), "fresh buffers are zero-filled"


@pytest.mark.parametrize(
    ("offset", "nbytes"), [(-1, 4), (61, 4), (64, 1), (0, 65), (1.0, 4), ("0", 4)]
)
def test_out_of_range_copies_are_errors(offset: object, nbytes: int) -> None:
    pool = HostPool(capacity=1 << 10)
    buf = pool.allocate(64)
    with raises(ErrorStatus.MEMORY_COPY_H2P):
        pool.write(buf, np.zeros(nbytes, np.uint8), offset)  # type: ignore[arg-type]
    with raises(ErrorStatus.MEMORY_COPY_P2H):
        pool.read(buf, np.zeros(nbytes, np.uint8), offset)  # type: ignore[arg-type]


def test_copies_between_pools_check_sizes() -> None:
    a, b = HostPool(capacity=1 << 10), HostPool(capacity=1 << 10)
    src, dst, small = a.allocate(32), b.allocate(32), b.allocate(16)
    a.write(src, np.arange(32, dtype=np.uint8))
    b.copy_from(a, src, dst)
    np.testing.assert_array_equal(HostPool.array(dst), np.arange(32))
    with raises(ErrorStatus.MEMORY_COPY_P2P):
        b.copy_from(a, src, small)
    with raises(ErrorStatus.MEMORY_COPY_P2P):
        b.copy_from(b, src, dst)  # src belongs to a, not b


def test_retain_and_release_count_references() -> None:
    pool = HostPool(capacity=100)
    buf = pool.allocate(100)
    pool.retain(buf)
    pool.release(buf)
    assert buf.refcount == 1 and pool.free_bytes() == 0
    pool.release(buf)
    assert buf.refcount == 0 and pool.free_bytes() == 100


def test_release_twice_is_an_error_and_frees_once() -> None:
    pool = HostPool(capacity=100)
    buf = pool.allocate(50)
    pool.release(buf)
    with raises(ErrorStatus.MEMORY_DEALLOCATION):
        pool.release(buf)
    with raises(ErrorStatus.MEMORY_DEALLOCATION):
        pool.retain(buf)
    with raises(ErrorStatus.MEMORY_COPY_H2P):
        pool.write(buf, np.zeros(4, np.uint8))
    assert pool.free_bytes() == 100


def test_buffer_of_another_pool_is_refused() -> None:
    a, b = HostPool(capacity=100), HostPool(capacity=100)
    buf = a.allocate(10)
    with raises(ErrorStatus.MEMORY_DEALLOCATION):
        b.release(buf)
    assert buf.refcount == 1 and a.free_bytes() == 90 and b.free_bytes() == 100


def test_array_is_an_aligned_view_without_copy() -> None:
    pool = HostPool(capacity=1 << 12)
    for nbytes in (1, 3, 100, 1000):
        buf = pool.allocate(nbytes)
        view = HostPool.array(buf)
        assert view.dtype == np.uint8 and view.shape == (nbytes,)
        assert view.ctypes.data % ALIGNMENT == 0
        view[:] = 5
        out = np.zeros(nbytes, np.uint8)
        pool.read(buf, out)
        assert (out == 5).all()
        pool.release(buf)
        with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
            HostPool.array(buf)


def test_address_of_host_memory_writable_read_only_and_empty() -> None:
    """``zyx.staging.address``: what host launches and CUDA copies pass to C, the first
    byte's address, for arrays and memoryviews, read-only ones through numpy."""
    from zyx.staging import address

    data = np.arange(64, dtype=np.uint8)
    frozen = data.copy()
    frozen.flags.writeable = False
    for memory in (data, frozen):
        assert address(memory) == address(memoryview(memory)) == memory.ctypes.data
        assert address(memory[8:]) == memory.ctypes.data + 8
    assert address(np.zeros(0, np.uint8)) == address(memoryview(b"")) == 0
