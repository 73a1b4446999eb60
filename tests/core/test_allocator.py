"""The allocator's cache hits in C (``zyx/allocator.c``): on random sequences of
allocations and frees (sizes repeated, buffers shared or not the allocator's, a cache that
fills up, pools out of memory), an allocator with the C ``allocate`` and ``free`` makes the
same pool calls, hands out the same buffers and ends with the same cache as one with the
Python methods alone. Without native code (``ZYX_NATIVE=0``, test_native.py) the methods
are Python's.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from zyx import allocator as allocator_module
from zyx.allocator import Allocator, allocator
from zyx.backend import Buffer
from zyx.errors import BackendError, ErrorStatus


@pytest.fixture
def native() -> Iterator[None]:
    if type(allocator.allocate).__name__ != "builtin_function_or_method":
        pytest.skip("no native allocator here (no C compiler, no Python.h, or ZYX_NATIVE=0)")
    yield
    allocator_module._native(allocator)  # the C calls serve the process's allocator again


class Pool:
    """A pool that records its calls, of ``capacity`` bytes, failing allocations beyond."""

    def __init__(self, name: str, capacity: int, trace: list[Any]) -> None:
        self.name, self.capacity, self.used, self.trace = name, capacity, 0, trace
        self.made = 0

    def allocate(self, nbytes: int) -> Buffer:
        if self.used + nbytes > self.capacity:
            self.trace.append(("out of memory", self.name, nbytes))
            raise BackendError(ErrorStatus.MEMORY_ALLOCATION, "out of memory")
        self.used += nbytes
        self.made += 1
        self.trace.append(("allocate", self.name, nbytes, self.made))
        return Buffer(self, nbytes, (self.name, self.made))  # type: ignore[arg-type]

    def release(self, buf: Buffer) -> None:
        buf.refcount -= 1
        if buf.refcount == 0 and buf.handle[0] == self.name:  # not a foreign one
            self.used -= buf.nbytes
        self.trace.append(("release", buf.handle, buf.refcount))

    def free_bytes(self) -> int:
        return self.capacity - self.used


def _replay(seed: int, fast: bool) -> tuple[list[Any], Any]:
    """A random workload on a new allocator (its C calls where ``fast``): the pool calls, and
    each allocation's buffer, the cache and its byte counts at the end."""
    rng = random.Random(seed)
    trace: list[Any] = []
    pools = [Pool("a", 256, trace), Pool("b", 96, trace)]
    cache = Allocator()
    if fast:
        allocator_module._native(cache)
    live: list[Buffer] = []
    for _ in range(300):
        roll = rng.random()
        pool = rng.choice(pools)
        if roll < 0.45 or not live:
            try:
                buf = cache.allocate(pool, rng.choice((8, 16, 32)))  # type: ignore[arg-type]
            except BackendError as error:
                trace.append(("raised", str(error)))
                continue
            trace.append(("got", buf.handle))
            live.append(buf)
        elif roll < 0.85:
            buf = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.15:
                buf.refcount += 1  # shared with someone else: released, not cached
            cache.free(buf)
        elif roll < 0.95:
            foreign = Buffer(pool, 16, ("foreign", len(trace)))  # type: ignore[arg-type]
            cache.free(foreign)  # not the allocator's: released
        else:
            cache.drain()
            cache._empty(pool)  # type: ignore[arg-type]
            trace.append(("emptied", pool.name))
    state = {
        p.name: sorted((n, [b.handle for b in bufs]) for n, bufs in cache._free[p].items())  # type: ignore[index]
        for p in pools
    }
    return trace, (state, {p.name: cache._cached[p] for p in pools})  # type: ignore[index]


@pytest.mark.parametrize("seed", range(12))
def test_the_c_calls_do_what_the_python_methods_do(native: None, seed: int) -> None:
    fast, python = _replay(seed, True), _replay(seed, False)
    assert fast == python
    trace = fast[0]
    assert any(c[0] == "got" for c in trace) and any(c[0] == "release" for c in trace)


def test_a_cache_hit_is_c_alone(native: None) -> None:
    """After the first allocation and free (a miss; a pool without a limit yet), each hit
    calls neither the pool nor the Python methods."""
    trace: list[Any] = []
    pool = Pool("a", 1 << 20, trace)
    cache = Allocator()
    python: list[str] = []

    def allocate(pool: Any, nbytes: int) -> Buffer:
        python.append("allocate")
        return Allocator.allocate(cache, pool, nbytes)

    def free(buf: Buffer) -> None:
        python.append("free")
        Allocator.free(cache, buf)

    module = allocator.allocate.__self__  # type: ignore[attr-defined]
    module.configure(cache._free, cache._cached, cache._limit, cache._ours, allocate, free)
    cache.allocate, cache.free = module.allocate, module.free  # type: ignore[method-assign]
    first = cache.allocate(pool, 64)  # type: ignore[arg-type]
    cache.free(first)
    calls = len(trace)
    assert python == ["allocate", "free"]
    for _ in range(100):
        again = cache.allocate(pool, 64)  # type: ignore[arg-type]
        assert again is first
        cache.free(again)
    assert len(trace) == calls and python == ["allocate", "free"]
    assert cache._cached[pool] == 64  # type: ignore[index]


@pytest.mark.parametrize("fast", [True, False])
def test_the_cache_fills_to_its_limit_and_no_further(native: None, fast: bool) -> None:
    trace: list[Any] = []
    pool = Pool("a", 1 << 20, trace)
    cache = Allocator()
    if fast:
        allocator_module._native(cache)
    cache._limit[pool] = 64  # type: ignore[index]
    bufs = [cache.allocate(pool, 16) for _ in range(5)]  # type: ignore[arg-type]
    for buf in bufs:
        cache.free(buf)
    assert cache._cached[pool] == 64  # type: ignore[index]
    assert trace[-1] == ("release", bufs[-1].handle, 0)  # the fifth did not fit
    assert [b.refcount for b in bufs] == [1, 1, 1, 1, 0]


def test_bad_arguments_raise(native: None) -> None:
    with pytest.raises(TypeError):
        allocator.allocate(object())  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        allocator.free(object())  # type: ignore[arg-type]


def test_leaving_held_frees_what_died_while_it_was_held() -> None:
    """A buffer whose node dies while the lock is held waits in the queue; the holder's
    exit from ``held`` frees it (into the cache), and lets the lock go even where a free
    fails."""
    trace: list[Any] = []
    pool = Pool("a", 1 << 20, trace)
    cache = Allocator()
    with cache.held:
        buf = cache.allocate(pool, 64)  # type: ignore[arg-type]
        cache.dead(buf)
        assert list(cache._queue) == [buf]
    assert not cache._queue and cache._free[pool][64] == [buf]  # type: ignore[index]

    def failing(buf: Buffer) -> None:
        raise BackendError(ErrorStatus.MEMORY_DEALLOCATION, "the pool refused")

    cache.free = failing  # type: ignore[method-assign]
    with pytest.raises(BackendError, match="refused"), cache.held:
        cache.dead(cache.allocate(pool, 32))  # type: ignore[arg-type]
    assert not cache.lock.locked()


def test_every_holder_of_the_lock_takes_it_through_held() -> None:
    """Nothing in zyx takes ``allocator.lock`` but through ``held``, whose exit drains
    (``allocator.py`` itself aside: ``dead`` tries the lock without waiting)."""
    import pathlib

    import zyx

    root = pathlib.Path(zyx.__file__).parent
    takers = [
        f"{path.relative_to(root)}:{n}"
        for path in root.rglob("*.py")
        if path.name != "allocator.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "allocator.lock" in line or "runtime.lock" in line
    ]
    assert takers == []
