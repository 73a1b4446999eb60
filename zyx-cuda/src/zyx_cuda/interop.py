"""Zero-copy exchange of CUDA buffers with torch, cupy and anything else that speaks DLPack
or ``__cuda_array_interface__`` (version 3).

Export: ``as_array(buf, dtype, shape)`` is a typed, shaped view of a zyx buffer with both
protocols; it holds a reference to the buffer as long as it, or a consumer's tensor made
from it, lives. Before the consumer touches the memory, its stream is made to wait for
zyx's pending work on the buffer. (What the consumer enqueues afterwards is invisible to
zyx: synchronize it before zyx writes the buffer again, as with any DLPack exchange.)

Import: ``from_dlpack(tensor, device)`` and ``from_cuda_array(tensor, device)`` wrap a
tensor's memory in a zyx ``Buffer`` without copying. The producer is kept alive until the
buffer is released and zyx's work on it finished; the producer's pending work is ordered
before zyx's first use.

DLPack capsules are built and read with ctypes (unversioned ``DLManagedTensor``, which
every consumer accepts).
"""

from __future__ import annotations

import ctypes
import math
import sys
from typing import Any

import numpy as np
from cuda.bindings import driver

from zyx.backend import Buffer
from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx_cuda.device import CudaDevice
from zyx_cuda.pool import CudaPool

KDL_CUDA = 2

_DL_CODES = {
    DType.BOOL: (6, 8), DType.U8: (1, 8), DType.U16: (1, 16), DType.U32: (1, 32),
    DType.U64: (1, 64), DType.I8: (0, 8), DType.I16: (0, 16), DType.I32: (0, 32),
    DType.I64: (0, 64), DType.F16: (2, 16), DType.BF16: (4, 16), DType.F32: (2, 32),
    DType.F64: (2, 64),
}  # fmt: skip
_FROM_DL = {code: dtype for dtype, code in _DL_CODES.items()}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


# A private handle on the C API, so the argtypes set here stay out of ctypes.pythonapi.
_api = ctypes.PyDLL(None)
_capsule_new = _api.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_valid = _api.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_pointer = _api.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
# Indexing makes a second function object (attribute access would return the one above),
# so the same C function can take a raw address here and a Python object there.
_capsule_raw_pointer = _api["PyCapsule_GetPointer"]
_capsule_raw_pointer.restype = ctypes.c_void_p
_capsule_raw_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_rename = _api.PyCapsule_SetName
_capsule_rename.restype = ctypes.c_int
_capsule_rename.argtypes = [ctypes.py_object, ctypes.c_char_p]

_exports: dict[int, tuple[DLManagedTensor, Any, CudaArray]] = {}
"""Managed tensors handed out and not yet deleted, by address: what keeps them alive."""


@_Deleter
def _delete_export(address: int) -> None:
    entry = _exports.pop(address, None)
    if entry is not None:
        entry[2].close()


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    # Called with the capsule's refcount at zero: touch it only through raw pointers.
    if _capsule_valid(capsule, b"dltensor"):
        _delete_export(_capsule_raw_pointer(capsule, b"dltensor"))


class CudaArray:
    """A typed, shaped view of a zyx CUDA buffer, exported by DLPack and CAI v3."""

    def __init__(self, buf: Buffer, dtype: DType, shape: tuple[int, ...]) -> None:
        if not isinstance(buf.pool, CudaPool):
            raise BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, f"{buf!r} is not a CUDA buffer")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > buf.nbytes:
            raise BackendError(
                ErrorStatus.INCORRECT_KERNEL_ARG,
                f"shape {shape} of {dtype} needs {nbytes} bytes; {buf!r} has {buf.nbytes}",
            )
        buf.pool.retain(buf)
        self.pool: CudaPool = buf.pool
        self.buffer: Buffer | None = buf
        self.dtype = dtype
        self.shape = shape

    @property
    def ptr(self) -> int:
        return int(self._live().handle)

    def _live(self) -> Buffer:
        if self.buffer is None:
            raise BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, "this CudaArray was closed")
        return self.buffer

    def close(self) -> None:
        """Drop this view's reference to the buffer."""
        if self.buffer is not None:
            self.pool.release(self.buffer)
            self.buffer = None

    def __del__(self) -> None:
        if not sys.is_finalizing():
            self.close()

    def _ready_for(self, stream: Any) -> None:
        """Make ``stream`` wait for zyx's pending work on the buffer."""
        pool = self.pool
        with pool.lock:
            pool.context.activate()
            uses = pool.streams.tracker.last_uses(self._live())
            pool.streams.order_before(stream, uses.values())

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self.dtype is DType.BF16:
            raise TypeError("bf16 has no __cuda_array_interface__ type string; use DLPack")
        # One of zyx's streams, made to wait for every pending use: the consumer waits on it.
        pool, buf = self.pool, self._live()
        with pool.lock:
            pool.context.activate()
            queue = pool.streams.select((), (buf,))
            pool.streams.commit(queue, (), (buf,))
        return {
            "shape": self.shape,
            "typestr": self.dtype.numpy.str,
            "data": (self.ptr, False),
            "strides": None,
            "stream": int(pool.streams.handles[queue]),
            "version": 3,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDL_CUDA, self.pool.context.ordinal)

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        if copy:
            raise BufferError("zyx exports CUDA buffers without copying only")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cannot export to device {dl_device}")
        if self.buffer is None:
            raise BufferError("this CudaArray was closed")
        if stream != -1:
            # DLPack: None means the legacy default stream; 1 and 2 are the special streams.
            self._ready_for(driver.CUstream(1 if stream is None else stream))
        export = CudaArray(self.buffer, self.dtype, self.shape)
        shape = (ctypes.c_int64 * max(1, len(self.shape)))(*self.shape)
        managed = DLManagedTensor()
        tensor = managed.dl_tensor
        tensor.data = export.ptr
        tensor.device = DLDevice(*self.__dlpack_device__())
        tensor.ndim = len(self.shape)
        tensor.dtype = DLDataType(*_DL_CODES[self.dtype], 1)
        tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        managed.deleter = _delete_export
        address = ctypes.addressof(managed)
        _exports[address] = (managed, shape, export)
        return _capsule_new(address, b"dltensor", ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def as_array(buf: Buffer, dtype: DType, shape: tuple[int, ...]) -> CudaArray:
    """``buf`` viewed as a C-contiguous ``dtype`` array of ``shape``, for torch/cupy."""
    return CudaArray(buf, dtype, tuple(shape))


def from_dlpack(tensor: Any, device: CudaDevice) -> Buffer:
    """A zyx buffer over a C-contiguous DLPack tensor on ``device`` (no copy)."""
    return import_dlpack(tensor, device)[0]


def import_dlpack(tensor: Any, device: CudaDevice) -> tuple[Buffer, DType, tuple[int, ...]]:
    """``from_dlpack``, with the dtype and shape the buffer holds (the array front end's
    ``Device.dlpack_import``)."""
    kind, ordinal = tensor.__dlpack_device__()
    if (int(kind), int(ordinal)) != (KDL_CUDA, device.index):
        raise BackendError(
            ErrorStatus.INCORRECT_KERNEL_ARG,
            f"tensor is on DLPack device {(kind, ordinal)}, not {device.name}",
        )
    with device.lock:
        return _adopt_dlpack(tensor, device)


def _adopt_dlpack(tensor: Any, device: CudaDevice) -> tuple[Buffer, DType, tuple[int, ...]]:
    device.context.activate()
    streams = device.streams
    queue = streams.tracker.choose(())
    # The producer makes this stream wait for its pending work on the tensor.
    capsule = tensor.__dlpack__(stream=int(streams.handles[queue]))
    address = _capsule_pointer(capsule, b"dltensor")
    managed = DLManagedTensor.from_address(address)
    view = managed.dl_tensor
    dtype = _FROM_DL.get((view.dtype.code, view.dtype.bits)) if view.dtype.lanes == 1 else None
    if dtype is None:
        raise BackendError(
            ErrorStatus.INCORRECT_KERNEL_ARG,
            f"unsupported DLPack dtype {view.dtype.code}/{view.dtype.bits}",
        )
    shape = [view.shape[i] for i in range(view.ndim)]
    strides = [view.strides[i] for i in range(view.ndim)] if view.strides else None
    _check_contiguous(shape, strides, dtype.itemsize, "DLPack")
    pointer = _aligned(int(view.data or 0) + view.byte_offset, "DLPack")
    # From here on the buffer owns the tensor: the consumer calls its deleter.
    _capsule_rename(capsule, b"used_dltensor")
    deleter = managed.deleter

    def owner() -> None:
        if deleter:
            deleter(address)

    buf = device.pool.adopt(pointer, _nbytes(shape, dtype), owner)
    streams.commit(queue, (), (buf,))
    return buf, dtype, tuple(shape)


def from_cuda_array(tensor: Any, device: CudaDevice) -> Buffer:
    """A zyx buffer over a C-contiguous ``__cuda_array_interface__`` array (no copy)."""
    cai = tensor.__cuda_array_interface__
    dtype = DType.from_numpy(np.dtype(cai["typestr"]))
    shape = list(cai["shape"])
    _check_contiguous(shape, cai.get("strides"), dtype.itemsize, "__cuda_array_interface__")
    pointer = _aligned(int(cai["data"][0]), "__cuda_array_interface__")
    with device.lock:
        device.context.activate()
        buf = device.pool.adopt(pointer, _nbytes(shape, dtype), lambda: _keep(tensor))
        producer = cai.get("stream")
        if producer is not None:
            device.streams.order_after(driver.CUstream(producer), writes=(buf,))
    return buf


def _keep(tensor: Any) -> None:
    """Nothing to do: the closure that calls this holds ``tensor`` until the buffer is freed."""


def _nbytes(shape: list[int], dtype: DType) -> int:
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes <= 0:
        raise BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, "cannot import an empty tensor")
    return nbytes


ALIGNMENT = 16
"""Bytes to which every buffer's address is aligned: generated kernels copy 16 bytes at a
time (``cp.async``, vector loads), planned once for every buffer of a structure, and a
misaligned address faults (``CUDA_ERROR_MISALIGNED_ADDRESS``, which ends the context). The
pool's own (``cuMemAlloc``'s) are aligned to 256."""


def _aligned(pointer: int, protocol: str) -> int:
    """``pointer``, unless it is not a multiple of ``ALIGNMENT`` (a view at an odd offset):
    then an error, which ``from_dlpack`` answers with a copy (or, with ``copy=False``, a
    ``BufferError``)."""
    if pointer % ALIGNMENT:
        raise BackendError(
            ErrorStatus.INCORRECT_KERNEL_ARG,
            f"{protocol} tensor at {pointer:#x} is not aligned to {ALIGNMENT} bytes, which "
            "zyx's kernels need; copy it (or pass a tensor that starts on such a boundary)",
        )
    return pointer


def _check_contiguous(shape: list[int], strides: Any, itemsize: int, protocol: str) -> None:
    """Raise unless ``strides`` (elements for DLPack, bytes for CAI; None = compact) are
    row-major compact. Strides of size-1 dimensions do not matter."""
    if strides is None:
        return
    scale = 1 if protocol == "DLPack" else itemsize
    expected = scale
    for size, stride in zip(reversed(shape), reversed(list(strides))):
        if size != 1 and stride != expected:
            raise BackendError(
                ErrorStatus.INCORRECT_KERNEL_ARG,
                f"{protocol} tensor of shape {shape} with strides {list(strides)} is not "
                "C-contiguous; make it contiguous first",
            )
        expected *= size
