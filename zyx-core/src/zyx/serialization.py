"""Arrays in files: ``zyx.load(path)`` and ``zyx.save(path, arrays)``, in the safetensors
format (https://huggingface.co/docs/safetensors), which the ``safetensors`` package, torch,
JAX and most model hubs read and write.

A file is an 8-byte little-endian header size, a JSON header (per name: dtype, shape and
the byte range of its data after the header; optionally ``__metadata__``), then the data.

``load`` reads the header only. Each array is a lazy copy from a region of the file, which
the disk pool (``zyx.disk``) maps: nothing is read until a computation that uses the
array runs, and then only its own bytes, straight into the device's buffer (host) or
through one staging buffer (other devices). Until an array is realized, each computation
that uses it reads it again, from the page cache; ``zyx.realize(*arrays.values())`` reads
them all once, into device memory. The map closes when the last array over the file dies.

``save`` writes a new file beside ``path`` and renames it over ``path``: a file that an
earlier ``load`` mapped is never changed under its arrays (a map of a file rewritten in
place reads the new bytes, or dies of SIGBUS where it got shorter).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from collections.abc import Mapping
from math import prod
from typing import TYPE_CHECKING, Any

from zyx.allocator import allocator
from zyx.dtypes import DType
from zyx.files import open_regular
from zyx.graph import nodes
from zyx.tensor import Tensor, resolve_device

if TYPE_CHECKING:
    from zyx.disk import DiskPool

SAFETENSORS_DTYPES = {
    DType.BOOL: "BOOL", DType.U8: "U8", DType.I8: "I8", DType.U16: "U16", DType.I16: "I16",
    DType.U32: "U32", DType.I32: "I32", DType.U64: "U64", DType.I64: "I64", DType.F16: "F16",
    DType.BF16: "BF16", DType.F32: "F32", DType.F64: "F64",
}  # fmt: skip
"""zyx's dtypes by their safetensors names."""
_FROM_SAFETENSORS = {name: dtype for dtype, name in SAFETENSORS_DTYPES.items()}

MAX_HEADER = 100_000_000
"""The largest JSON header accepted, in bytes (the safetensors package's own limit)."""

ALIGNMENT = 8
"""The header is padded with spaces to this many bytes, so that the data starts aligned
for every dtype (as the safetensors package writes it)."""

_disk: DiskPool | None = None


def _pool() -> DiskPool:
    """The process's disk pool (one: it shares each file's map among all its arrays)."""
    global _disk
    if _disk is None:
        from zyx.disk import DiskPool

        _disk = DiskPool()
    return _disk


# ---- load -------------------------------------------------------------------------------------


def load(path: str | os.PathLike[str], *, device: Any = None) -> dict[str, Tensor]:
    """The arrays of the safetensors file at ``path``, by name, on ``device`` (default: the
    default device), lazily: only the header is read now."""
    target = resolve_device(device)
    name = os.fspath(path)
    with open_regular(name) as file:  # a FIFO or a device is refused, not waited on
        size, header = _read_header(file, name)
        data_size = os.fstat(file.fileno()).st_size - 8 - size
    out: dict[str, Tensor] = {}
    with allocator.held:  # the disk pool, like every pool, is used under the front end's lock
        for key, entry in header.items():
            if key != "__metadata__":
                dtype, shape, begin, end = _entry(name, key, entry, data_size)
                out[key] = _array(name, dtype, shape, 8 + size + begin, end - begin, target)
    return out


def _read_header(file: Any, name: str) -> tuple[int, dict[str, Any]]:
    """The header's size in bytes and its JSON object; ``ValueError`` naming the file for
    anything that is not a safetensors header."""
    raw = file.read(8)
    if len(raw) != 8:
        raise ValueError(f"{name!r} is not a safetensors file: it has {len(raw)} bytes")
    (size,) = struct.unpack("<Q", raw)
    file_size = os.fstat(file.fileno()).st_size
    if size > min(MAX_HEADER, file_size - 8):
        raise ValueError(
            f"{name!r} is not a safetensors file: its header would be {size} bytes of {file_size}"
        )
    try:
        header = json.loads(file.read(size))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{name!r}: the safetensors header is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{name!r}: the safetensors header is not a JSON object")
    return size, header


def _array(
    name: str, dtype: DType, shape: tuple[int, ...], offset: int, nbytes: int, device: Any
) -> Tensor:
    """The array at byte ``offset`` of the file: a lazy copy to ``device`` of its region in
    the map."""
    from zyx.array.creation import zeros

    if nbytes == 0:  # nothing to map
        return zeros(shape, dtype=dtype, device=device)
    buf = _pool().open(name, offset, nbytes)
    # The disk leaf's device labels it only: the copy reads its buffer's own pool.
    source = nodes.leaf(buf, dtype, shape, device)
    return Tensor(nodes.copy(source, device))


def _entry(
    name: str, key: str, entry: Any, data_size: int
) -> tuple[DType, tuple[int, ...], int, int]:
    """The dtype, shape and data range of a header entry, checked against each other and
    the ``data_size`` bytes after the header."""
    try:
        kind = entry["dtype"]
        shape = tuple(int(n) for n in entry["shape"])
        begin, end = (int(n) for n in entry["data_offsets"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(
            f"{name!r}: tensor {key!r} has a malformed entry {entry!r:.120} (it needs dtype, "
            "shape and data_offsets)"
        ) from None
    dtype = _FROM_SAFETENSORS.get(kind)
    if dtype is None:
        raise ValueError(
            f"{name!r}: tensor {key!r} is of dtype {kind!r}, which zyx lacks; it reads "
            f"{', '.join(_FROM_SAFETENSORS)}"
        )
    nbytes = prod(shape) * dtype.itemsize
    if min(shape, default=0) < 0 or begin < 0 or end - begin != nbytes:
        raise ValueError(
            f"{name!r}: tensor {key!r} of {kind}{list(shape)} needs {nbytes} bytes, "
            f"its data_offsets {[begin, end]} say {end - begin}"
        )
    if end > data_size:
        raise ValueError(
            f"{name!r}: tensor {key!r} ends at byte {end} of the data, which has {data_size}: "
            "the file is truncated"
        )
    return dtype, shape, begin, end


# ---- save -------------------------------------------------------------------------------------


def save(path: str | os.PathLike[str], arrays: Mapping[str, Tensor]) -> None:
    """Write ``arrays`` (name to zyx array) to a safetensors file at ``path``, replacing
    any file there only once the new one is complete."""
    from zyx.runtime import runtime

    for key, array in arrays.items():
        if not isinstance(key, str) or not isinstance(array, Tensor):
            raise TypeError(
                f"save takes names (str) to zyx arrays, got {key!r:.40}: "
                f"{type(array).__name__}; convert data with zyx.asarray"
            )
        if key == "__metadata__":
            raise ValueError("save: '__metadata__' is the safetensors header's own key")
    runtime.realize(a.node for a in arrays.values())  # one plan: shared work runs once
    # Widest dtypes first, as the safetensors package lays data out: each array aligned.
    order = sorted(arrays, key=lambda k: (-arrays[k].dtype.itemsize, k))
    header: dict[str, Any] = {}
    offset = 0
    for key in order:
        array = arrays[key]
        nbytes = array.size * array.dtype.itemsize
        header[key] = {
            "dtype": SAFETENSORS_DTYPES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-(8 + len(encoded)) % ALIGNMENT)
    name = os.fspath(path)
    _replace(name, struct.pack("<Q", len(encoded)) + encoded, [arrays[k] for k in order])


def _replace(name: str, head: bytes, arrays: list[Tensor]) -> None:
    """Write ``head`` and each array's bytes to a new file beside ``name``, then rename it
    over ``name``."""
    folder = os.path.dirname(os.path.abspath(name))
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".zyx-save-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(head)
            for array in arrays:  # one array in host memory at a time
                file.write(array.numpy().reshape(-1).view("uint8").data)
        os.replace(temporary, name)
    except BaseException:
        os.unlink(temporary)
        raise
