"""The front end's buffers: a caching allocator over the pools, and the one lock.

Allocating from a device is slow where the driver is (``cuMemAlloc``; ``cuMemFree`` even
waits for the whole device), and a program that runs the same computation again wants
buffers of the same sizes again. So a buffer that the front end no longer needs goes
back to a cache, by pool and size, and the next allocation of that size takes it: no
driver call. The device's own dependency tracking orders the new work after the old
work on a reused buffer, as for any buffer.

A failed allocation empties the pool's cache and tries once more; the cache holds at
most ``CACHE_FRACTION`` of a device's memory; ``zyx.empty_cache()`` gives it all back
(after which every pool's ``free_bytes`` is what the live arrays leave).

Nodes die anywhere (the garbage collector runs in the middle of other code), but a pool
may be in the middle of a call there. Their buffers queue up and are freed where the
lock is free: at once if it is, else as its holder leaves ``with allocator.held``.
"""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict, deque
from importlib import resources
from typing import TYPE_CHECKING

from zyx.errors import BackendError, ErrorStatus

if TYPE_CHECKING:
    from zyx.backend import Buffer, MemoryPool

CACHE_FRACTION = 0.5
"""The largest share of a pool's memory its cache keeps."""


class Allocator:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Held around every pool call the front end makes (and by the runtime's plans),
        always through ``held``."""
        self._queue: deque[Buffer] = deque()
        self.held = _Held(self)
        """``with allocator.held:`` holds ``lock``, and frees the buffers of the nodes that
        died meanwhile before it lets go."""
        self._free: dict[MemoryPool, dict[int, list[Buffer]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self._cached: dict[MemoryPool, int] = defaultdict(int)
        self._limit: dict[MemoryPool, int] = {}
        self._ours: dict[int, weakref.ref[Buffer]] = {}
        """Buffers this allocator made, by ``id`` (an entry goes when its buffer dies): only
        those go back to its cache. Not a ``WeakSet``, whose ``in``, on every free, is
        Python code."""

    # ---- under the lock -----------------------------------------------------------------

    def allocate(self, pool: MemoryPool, nbytes: int) -> Buffer:
        sizes = self._free.get(pool)
        if sizes:
            spare = sizes.get(nbytes)
            if spare:
                buf = spare.pop()
                self._cached[pool] -= nbytes
                return buf
        try:
            buf = pool.allocate(nbytes)
        except BackendError as error:
            if error.status is not ErrorStatus.MEMORY_ALLOCATION or not self._cached[pool]:
                raise
            self._empty(pool)
            buf = pool.allocate(nbytes)
        self._own(buf)
        return buf

    def _own(self, buf: Buffer) -> None:
        key, ours = id(buf), self._ours

        def forget(ref: weakref.ref[Buffer]) -> None:  # as ``buf`` dies, before its id is free
            if ours.get(key) is ref:
                del ours[key]

        ours[key] = weakref.ref(buf, forget)

    def free(self, buf: Buffer) -> None:
        """The front end's reference to ``buf`` is gone: cache it, or release it."""
        pool = buf.pool
        ours = self._ours.get(id(buf))
        if buf.refcount != 1 or ours is None or ours() is not buf:  # someone else holds it too
            pool.release(buf)
            return
        limit = self._limit.get(pool)
        if limit is None:
            limit = self._limit[pool] = int(CACHE_FRACTION * _capacity(pool))
        if self._cached[pool] + buf.nbytes > limit:
            pool.release(buf)
            return
        self._free[pool][buf.nbytes].append(buf)
        self._cached[pool] += buf.nbytes

    def drain(self) -> None:
        """Free the buffers of nodes that died while the lock was held."""
        queue = self._queue
        while queue:
            self.free(queue.popleft())

    def _empty(self, pool: MemoryPool) -> None:
        for bufs in self._free.pop(pool, {}).values():
            for buf in bufs:
                pool.release(buf)
        self._cached[pool] = 0

    # ---- from anywhere ------------------------------------------------------------------

    def dead(self, buf: Buffer) -> None:
        """A node holding ``buf`` died: freed now where the lock is free, else queued until
        its holder leaves ``held``."""
        lock = self.lock
        if not lock.acquire(False):  # positional: a keyword costs a tenth of this call
            self._queue.append(buf)
            return
        try:
            self.free(buf)
            if self._queue:
                self.drain()
        finally:
            lock.release()

    def empty_cache(self) -> None:
        """Give every cached buffer back to its pool."""
        with self.held:
            self.drain()
            for pool in list(self._free):
                self._empty(pool)

    def cached_bytes(self) -> int:
        with self.held:
            self.drain()
            return sum(self._cached.values())


class _Held:
    """``Allocator.held``: its lock as a context manager whose exit drains the queue of
    buffers that died while the lock was held, so that no holder can forget to. Its own
    class, not ``contextlib.contextmanager``: a realize enters it, and a generator's
    frame costs several times these two calls."""

    __slots__ = ("_acquire", "_release", "_queue", "_drain")

    def __init__(self, allocator: Allocator) -> None:
        self._acquire, self._release = allocator.lock.acquire, allocator.lock.release
        self._queue, self._drain = allocator._queue, allocator.drain

    def __enter__(self) -> None:
        self._acquire()

    def __exit__(self, *exc: object) -> None:
        try:
            if self._queue:
                self._drain()
        finally:
            self._release()


def _capacity(pool: MemoryPool) -> int:
    try:
        return pool.free_bytes()
    except BackendError:
        return 0


def _native(allocator: Allocator) -> None:
    """``allocator.c``'s ``allocate`` and ``free`` in place of ``allocator``'s methods (which
    they call for all but a cache hit), where ``zyx.native`` builds it."""
    from zyx.native import load  # here: zyx.native imports the backend contract

    module = load("_zyx_allocator", resources.files("zyx").joinpath("allocator.c").read_text())
    if module is None:
        return
    python = Allocator.allocate.__get__(allocator), Allocator.free.__get__(allocator)
    module.configure(allocator._free, allocator._cached, allocator._limit, allocator._ours, *python)
    allocator.allocate, allocator.free = module.allocate, module.free  # type: ignore[method-assign]


allocator = Allocator()
_native(allocator)


def empty_cache() -> None:
    """Give the memory of every buffer zyx keeps for reuse back to its device."""
    allocator.empty_cache()
