"""DLPack, the standard's way between array libraries: ``x.__dlpack__()``,
``x.__dlpack_device__()`` and ``zyx.from_dlpack``.

Memory is shared where the device can share it (``Device.dlpack_device``, an optional part
of the backend contract): host arrays with numpy and torch, CUDA arrays with torch and
cupy. Elsewhere (OpenCL) an array crosses by a copy through the host, and ``copy=False``
is a ``BufferError`` wherever a copy would be needed.

Export realizes the array and hands out its buffer. zyx never changes a realized buffer,
so the capsule is read-only where DLPack can say so (version 1.0 and later; torch ignores
the flag): a consumer that writes to it changes the zyx array behind zyx's back. An
array on a device that shares no memory reports the CPU as its DLPack device, since it is
exported by a copy to the host, where its consumers can read it.

A zero-copy import is a leaf array over the producer's memory, which it keeps alive.
That memory stays shared, as DLPack means it: zyx reads it when a computation that uses
the array runs (lazily), so a write through the producer before then is seen; realize
what must not see it (``zyx.realize``), or import with ``copy=True``, which copies at
once. zyx never writes to it: in-place operators on the array rebind it to a new value,
leaving the producer as it was.
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zyx.allocator import allocator
from zyx.dtypes import DTypeCapability
from zyx.graph import nodes
from zyx.tensor import Tensor, require, resolve_device

if TYPE_CHECKING:
    from zyx.backend import Device


CPU = (1, 0)
"""DLPack's ``(kDLCPU, 0)``: host memory."""

READ_ONLY = 1 << 0
IS_COPIED = 1 << 1
"""``DLPACK_FLAG_BITMASK_READ_ONLY`` and ``DLPACK_FLAG_BITMASK_IS_COPIED`` (DLPack 1.0)."""


def dlpack_device(x: Tensor) -> tuple[int, int]:
    """Where ``x.__dlpack__()`` puts the data: its device's memory, or the CPU for a
    device that shares none."""
    return x.device.dlpack_device() or CPU


def dlpack(
    x: Tensor,
    *,
    stream: Any = None,
    max_version: tuple[int, int] | None = None,
    dl_device: Any = None,
    copy: bool | None = None,
) -> Any:
    """``x.__dlpack__``: a capsule over ``x``'s buffer, or over a copy of it on the
    DLPack device ``dl_device`` asks for (a copy where ``copy`` is True, or where ``x``'s
    device shares no memory: then to the host)."""
    if max_version is not None:
        max_version = _version(max_version)
    own = x.device.dlpack_device()
    wanted = _dl_device(dl_device) if dl_device is not None else own or CPU
    if wanted == own and not copy:
        return _export(x, stream, max_version)
    if copy is False:
        raise BufferError(
            f"__dlpack__: an array on {x.device.name} reaches DLPack device {wanted} only by "
            "a copy, and copy=False"
        )
    target = _holder(wanted)
    if target is None:
        raise BufferError(f"__dlpack__: zyx has no device of DLPack device {wanted}")
    return _copied(_export(_copy(x, target, "__dlpack__"), stream, max_version))


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """An array of a DLPack producer's data on ``device`` (default: the zyx device that holds
    the producer's memory): the producer's memory itself where zyx can use it in place
    and no copy is asked for, else a copy, made at once."""
    if isinstance(x, Tensor):
        return _from_zyx(x, device, copy)
    if not hasattr(x, "__dlpack_device__"):
        raise TypeError(f"from_dlpack needs a DLPack producer (__dlpack__), got {type(x).__name__}")
    where = _dl_device(x.__dlpack_device__())
    holder = _holder(where)
    target = resolve_device(device) if device is not None else holder
    if target is None:
        raise BufferError(
            f"from_dlpack: no zyx device holds DLPack device {where}; name one with device= "
            "to copy the data there through the host"
        )
    shared = holder is target and not copy
    if copy is False and not shared:
        raise BufferError(
            f"from_dlpack: data on DLPack device {where} reaches {target.name} only by a "
            "copy, and copy=False"
        )
    imported = _adopt(holder, x, required=copy is False) if holder is not None else None
    if imported is None:  # memory zyx cannot use in place
        return _through_host(x, where, target)
    return imported if shared else _copy(imported, target, "from_dlpack")


def _from_zyx(x: Tensor, device: Any, copy: bool | None) -> Tensor:
    """``from_dlpack`` of a zyx array: no capsule; a new array object, as the standard
    makes one (an in-place operator on it leaves ``x`` as it was)."""
    target = x.device if device is None else resolve_device(device)
    if target is x.device and not copy:
        return Tensor(x.node)
    if copy is False:
        raise BufferError(
            f"from_dlpack: an array on {x.device.name} reaches {target.name} only by a copy, "
            "and copy=False"
        )
    return _copy(x, target, "from_dlpack")


def _dl_device(value: Sequence[Any]) -> tuple[int, int]:
    """A DLPack device as two ints (it may come as enum members)."""
    try:
        kind, index = value
        return int(kind), int(index)
    except (TypeError, ValueError):
        raise ValueError(
            f"a DLPack device is a (device_type, device_id) pair, got {value!r:.60}"
        ) from None


def _version(value: Any) -> tuple[int, int]:
    """A DLPack version as two ints: (major, minor)."""
    try:
        major, minor = value
        return operator.index(major), operator.index(minor)
    except (TypeError, ValueError):
        raise ValueError(
            f"__dlpack__: max_version is a (major, minor) pair of ints, got {value!r:.60}"
        ) from None


def _holder(where: tuple[int, int]) -> Device | None:
    """The zyx device whose memory DLPack calls ``where``, if any."""
    from zyx.plugins import devices

    return next((d for d in devices() if d.dlpack_device() == where), None)


def _export(x: Tensor, stream: Any, max_version: tuple[int, int] | None) -> Any:
    from zyx.runtime import runtime

    node = x.node  # an in-place operator in another thread may rebind x meanwhile
    runtime.realize([node])
    assert node.buffer is not None
    with allocator.held:
        return node.device.dlpack_export(
            node.buffer, node.dtype, node.shape, stream=stream, max_version=max_version
        )


def _adopt(device: Device, producer: Any, required: bool) -> Tensor | None:
    """A leaf array over ``producer``'s memory on ``device``; ``None`` where the device
    cannot use it in place, unless ``required``: then its ``BufferError``."""
    try:
        with allocator.held:
            buf, dtype, shape = device.dlpack_import(producer)
    except BufferError:
        if required:
            raise
        return None
    array = Tensor(nodes.leaf(buf, dtype, shape, device))  # it owns buf from here on
    require(device, dtype, DTypeCapability.STORAGE, "from_dlpack")
    return array


def _through_host(x: Any, where: tuple[int, int], target: Device) -> Tensor:
    """The producer's data copied to ``target`` through numpy: memory elsewhere than the
    host is asked for on the CPU (numpy 2.1's ``device="cpu"``, DLPack's ``dl_device``)."""
    import numpy as np

    from zyx.array.creation import asarray

    data = np.from_dlpack(x) if where == CPU else np.from_dlpack(x, device="cpu")
    return asarray(data, device=target)


def _copy(x: Tensor, target: Device, what: str) -> Tensor:
    """``x`` copied to ``target`` now: a copy holds the values of the moment it is asked
    for, whatever happens to the source's memory later."""
    require(target, x.dtype, DTypeCapability.STORAGE, what)
    return Tensor(nodes.copy(x.node, target)).realize()


class _VersionedHead(ctypes.Structure):
    """The start of DLPack 1.0's ``DLManagedTensorVersioned``, up to its flags."""

    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
    ]


# A private handle on the C API, so that the argtypes set here stay out of ctypes.pythonapi.
_api = ctypes.PyDLL(ctypes.pythonapi._name, handle=ctypes.pythonapi._handle)
_capsule_valid = _api.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer = _api.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _copied(capsule: Any) -> Any:
    """``capsule``, over a copy that is its consumer's alone, flagged so (the standard:
    ``IS_COPIED`` where a copy happened) and writable; an unversioned capsule has no flags."""
    name = b"dltensor_versioned"
    if _capsule_valid(capsule, name):
        head = _VersionedHead.from_address(_capsule_pointer(capsule, name))
        head.flags = (head.flags | IS_COPIED) & ~READ_ONLY
    return capsule
