"""The memory pool contract: allocation, reference counts, copies in and out and between
pools, free-byte accounting. Rejected arguments are in ``test_errors``."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from zyx.backend import Buffer, MemoryPool
from zyx.host.pool import HostPool
from zyx.testing._suite import Allocations

pytestmark = pytest.mark.zyx_area("pool")

NBYTES = 4099
"""A buffer size that is no power of two and no multiple of any vector width."""


def random_bytes(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 256, n, dtype=np.uint8)


def read_all(pool: MemoryPool, buf: Buffer) -> np.ndarray:
    out = np.empty(buf.nbytes, np.uint8)
    pool.read(buf, out)
    return out


def test_the_pool_has_a_name(pool: MemoryPool) -> None:
    """``MemoryPool`` has none of its own, and every error it raises names the pool."""
    assert isinstance(pool.name, str) and pool.name


def test_allocate_gives_one_reference(alloc: Allocations, pool: MemoryPool) -> None:
    buf = alloc(NBYTES)
    assert (buf.pool, buf.nbytes, buf.refcount) == (pool, NBYTES, 1)


def test_write_then_read_round_trips(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator
) -> None:
    data = random_bytes(rng, NBYTES)
    buf = alloc(NBYTES)
    pool.write(buf, data)
    np.testing.assert_array_equal(read_all(pool, buf), data)


@pytest.mark.parametrize(
    "offset, size", [(0, 1), (1, 7), (13, 1000), (2048, NBYTES - 2048), (NBYTES - 1, 1)]
)
def test_write_at_offset_changes_only_that_range(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator, offset: int, size: int
) -> None:
    expected = random_bytes(rng, NBYTES)
    buf = alloc(NBYTES)
    pool.write(buf, expected)
    chunk = random_bytes(rng, size)
    pool.write(buf, chunk, offset)
    expected[offset : offset + size] = chunk
    np.testing.assert_array_equal(read_all(pool, buf), expected)


@pytest.mark.parametrize(
    "offset, size", [(0, 1), (0, NBYTES - 1), (5, 17), (1000, 3000), (NBYTES - 3, 3)]
)
def test_partial_read_returns_that_range(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator, offset: int, size: int
) -> None:
    data = random_bytes(rng, NBYTES)
    buf = alloc(NBYTES)
    pool.write(buf, data)
    out = np.zeros(size, np.uint8)
    pool.read(buf, out, offset)
    np.testing.assert_array_equal(out, data[offset : offset + size])


def test_typed_arrays_round_trip(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator
) -> None:
    data = rng.standard_normal(1001).astype(np.float32)
    buf = alloc(data.nbytes)
    pool.write(buf, data)
    out = np.empty_like(data)
    pool.read(buf, out)
    np.testing.assert_array_equal(out, data)


def test_retained_buffer_lives_until_its_last_release(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator
) -> None:
    data = random_bytes(rng, NBYTES)
    buf = alloc(NBYTES)
    pool.write(buf, data)
    pool.retain(buf)
    assert buf.refcount == 2
    pool.release(buf)
    assert buf.refcount == 1
    np.testing.assert_array_equal(read_all(pool, buf), data)
    pool.release(buf)
    assert buf.refcount == 0


def test_many_buffers_hold_their_own_data(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator
) -> None:
    datas = [random_bytes(rng, 64 + 37 * i) for i in range(64)]
    buffers = [alloc(len(data)) for data in datas]
    for buf, data in zip(buffers, datas):
        pool.write(buf, data)
    for buf, data in zip(buffers, datas):
        np.testing.assert_array_equal(read_all(pool, buf), data)


def test_write_keeps_its_data_alive(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator
) -> None:
    """``write`` may return before the copy is done; the pool keeps the source alive."""
    data = random_bytes(rng, 1 << 20)
    buf = alloc(len(data))
    pool.write(buf, data.copy())  # the pool holds the only reference to the copy
    gc.collect()
    scribble = np.full(len(data), 0x5A, np.uint8)  # may land where a freed copy was
    np.testing.assert_array_equal(read_all(pool, buf), data)
    del scribble


def test_the_caller_may_change_its_data_once_write_returns(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator
) -> None:
    """``write`` takes the data when called (copied or staged), as numpy code that refills
    one array in a loop expects: the next write sees the new contents, each buffer its own."""
    data = random_bytes(rng, 1 << 20)
    first, second = alloc(len(data)), alloc(len(data))
    pool.write(first, data)
    want = data.copy()
    data[:] = random_bytes(rng, len(data))
    pool.write(second, data)
    changed = data.copy()
    data[:] = 0x5A
    np.testing.assert_array_equal(read_all(pool, first), want)
    np.testing.assert_array_equal(read_all(pool, second), changed)


def test_copy_within_the_pool(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator
) -> None:
    data = random_bytes(rng, NBYTES)
    src, dst = alloc(NBYTES), alloc(NBYTES)
    pool.write(src, data)
    pool.copy_from(pool, src, dst)
    np.testing.assert_array_equal(read_all(pool, dst), data)
    np.testing.assert_array_equal(read_all(pool, src), data)


def test_copy_source_may_be_released_at_once(
    alloc: Allocations, pool: MemoryPool, rng: np.random.Generator
) -> None:
    """The source of a copy stays alive until the copy is done, even once released."""
    data = random_bytes(rng, 1 << 20)
    src, dst = alloc(len(data)), alloc(len(data))
    pool.write(src, data)
    pool.copy_from(pool, src, dst)
    pool.release(src)
    reuse = alloc(len(data))  # may get the released memory: overwrite it at once
    pool.write(reuse, np.full(len(data), 0x5A, np.uint8))
    np.testing.assert_array_equal(read_all(pool, dst), data)


def test_copy_from_the_host_pool(
    alloc: Allocations, pool: MemoryPool, host_pool: HostPool, rng: np.random.Generator
) -> None:
    data = random_bytes(rng, NBYTES)
    src = host_pool.allocate(NBYTES)
    try:
        host_pool.write(src, data)
        dst = alloc(NBYTES)
        pool.copy_from(host_pool, src, dst)
        np.testing.assert_array_equal(read_all(pool, dst), data)
    finally:
        host_pool.release(src)


def test_copy_to_the_host_pool(
    alloc: Allocations, pool: MemoryPool, host_pool: HostPool, rng: np.random.Generator
) -> None:
    data = random_bytes(rng, NBYTES)
    src = alloc(NBYTES)
    pool.write(src, data)
    dst = host_pool.allocate(NBYTES)
    try:
        host_pool.copy_from(pool, src, dst)
        np.testing.assert_array_equal(read_all(host_pool, dst), data)
    finally:
        host_pool.release(dst)


def test_free_bytes_follow_allocations(pool: MemoryPool) -> None:
    if not pool.exact_free_bytes:
        pytest.skip(f"{pool.name} reports free bytes approximately (exact_free_bytes is False)")
    size = 3 << 20
    pool.synchronize()  # buffers released earlier may still be waiting for their work
    before = pool.free_bytes()
    buf = pool.allocate(size)
    try:
        assert pool.free_bytes() == before - size
        pool.retain(buf)
        pool.release(buf)
        assert pool.free_bytes() == before - size, "freed before the last release"
    finally:
        pool.release(buf)
    pool.synchronize()
    assert pool.free_bytes() == before
