"""The disk pool (zyx's ``Pool::Disk``): read-only buffers over regions of files.

``DiskPool.open(path, offset, nbytes)`` memory-maps the file, once per file and shared by
all its buffers, and reads nothing: pages come in from the file only when a buffer is
copied out. A copy into a host buffer reads from the map straight into that buffer's
memory (``HostPool`` asks its source pool to ``read`` into it); other pools stage through
one host buffer of the region's size (``MemoryPool``'s default copy). The map is closed
when the last buffer over the file is released.

The pool is read-only: ``allocate``, ``write`` and copies into it raise. Only regular
files are mapped: a FIFO, a device or a socket is refused without reading from it (or
waiting for a writer). A file that is truncated while mapped makes reads of the lost pages
fail with SIGBUS, as with any map.
"""

from __future__ import annotations

import mmap
import os
import reprlib
from dataclasses import dataclass
from typing import BinaryIO

from zyx.backend import Buffer, MemoryPool
from zyx.errors import BackendError, ErrorStatus
from zyx.files import open_regular

_FileKey = tuple[int, int, int, int]
"""Device, inode, size and modification time: a file rewritten since gets a new map."""


@dataclass
class _Mapping:
    """One file's map and how many live buffers use it."""

    key: _FileKey
    map: mmap.mmap
    view: memoryview
    users: int = 0


@dataclass(frozen=True)
class _Region:
    """A disk buffer's handle: its file, and where its bytes start in that file's map."""

    path: str
    mapping: _Mapping
    offset: int


class DiskPool(MemoryPool):
    """Read-only buffers backed by file regions. Create them with ``open``."""

    name = "disk"

    def __init__(self) -> None:
        self._maps: dict[_FileKey, _Mapping] = {}

    def open(
        self, path: str | os.PathLike[str], offset: int = 0, nbytes: int | None = None
    ) -> Buffer:
        """A buffer over ``nbytes`` bytes of the file at ``path`` from byte ``offset``
        (``None``: to the end of the file). Maps the file; reads none of it."""
        name = _path_name(path)
        try:
            with open_regular(name) as file:
                status = os.fstat(file.fileno())
                size = status.st_size - offset if nbytes is None else nbytes
                _check_region(name, status.st_size, offset, size)
                key = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
                mapping = self._maps.get(key) or self._map(file, key)
        except OSError as error:
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION, f"disk: cannot map {name!r}: {error}"
            ) from error
        mapping.users += 1
        return Buffer(self, size, _Region(name, mapping, offset))

    def _map(self, file: BinaryIO, key: _FileKey) -> _Mapping:
        whole = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        mapping = _Mapping(key, whole, memoryview(whole))
        self._maps[key] = mapping
        return mapping

    def free_bytes(self) -> int:
        """Nothing can be allocated here."""
        return 0

    def _allocate(self, nbytes: int) -> Buffer:
        raise BackendError(
            ErrorStatus.MEMORY_ALLOCATION,
            "disk: the disk pool is read-only and allocates nothing; map a file region with "
            "DiskPool.open(path, offset, nbytes), or allocate in a host or device pool",
        )

    def _free(self, buf: Buffer) -> None:
        mapping = buf.handle.mapping
        mapping.users -= 1
        if mapping.users == 0:
            del self._maps[mapping.key]
            mapping.view.release()
            mapping.map.close()

    def _write(self, buf: Buffer, view: memoryview, offset: int) -> None:
        raise BackendError(
            ErrorStatus.MEMORY_COPY_H2P,
            f"disk: {buf.handle.path!r} is mapped read-only; copy it into a host or device "
            "pool first and write there",
        )

    def _read(self, buf: Buffer, view: memoryview, offset: int) -> None:
        region: _Region = buf.handle
        start = region.offset + offset
        view[:] = region.mapping.view[start : start + view.nbytes]

    def _copy_from(self, src_pool: MemoryPool, src_buf: Buffer, dst_buf: Buffer) -> None:
        raise BackendError(
            ErrorStatus.MEMORY_COPY_P2P,
            f"disk: cannot copy into {dst_buf.handle.path!r}: the disk pool is read-only",
        )


def _path_name(path: str | os.PathLike[str]) -> str:
    """``path`` as the file name to open; what is neither a ``str`` nor an ``os.PathLike``
    of one (``None``, bytes, an int, which ``open`` takes for a file descriptor), or a name
    with a NUL byte, is MemoryAllocation."""
    try:
        name: object = os.fspath(path)
    except TypeError:
        name = None
    if not isinstance(name, str) or "\0" in name:
        raise BackendError(
            ErrorStatus.MEMORY_ALLOCATION,
            f"disk: a file path (str or os.PathLike) without NUL bytes is needed, got "
            f"{reprlib.repr(path)}",
        )
    return name


def _check_region(path: str, file_size: int, offset: int, nbytes: int) -> None:
    """Raise MemoryAllocation unless ``[offset, offset + nbytes)`` is a non-empty region of
    the file."""
    valid = (
        isinstance(offset, int)
        and isinstance(nbytes, int)
        and not isinstance(offset, bool)
        and not isinstance(nbytes, bool)
        and offset >= 0
        and nbytes > 0
        and offset + nbytes <= file_size
    )
    if not valid:
        raise BackendError(
            ErrorStatus.MEMORY_ALLOCATION,
            f"disk: {nbytes!r} bytes at offset {offset!r} are not a non-empty region of "
            f"{path!r}, which has {file_size} bytes",
        )
