"""``zyx.Tensor``: the array object of the array API standard, lazy.

An op records a node of the graph (``zyx.graph.nodes``) and returns a new ``Tensor`` at
once; errors the standard defines (shapes, axes, dtypes) are raised there, eagerly. The
value exists after a realization point: ``bool()``, ``int()``, ``float()``, ``numpy()``,
``np.asarray(x)``, ``__dlpack__``, ``repr``, or ``zyx.realize``.

Operators and methods are the namespace's functions (``zyx.array``) underneath.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from functools import cache, lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from zyx.dtypes import DType, DTypeCapability
from zyx.errors import DTypeError
from zyx.graph import nodes
from zyx.graph.nodes import Node

if TYPE_CHECKING:
    import numpy as np

    from zyx import array as xp
    from zyx.backend import Device
    from zyx.runtime import Runtime
else:
    import zyx as xp  # the namespace's names resolve on first use: `import zyx` stays cheap

PyScalar = bool | int | float
Operator = Callable[["Tensor", Any], "Tensor"]


def _binary(name: str, reflected: bool = False) -> Operator:
    """The operator of the namespace's function ``name`` (``x1 op x2``, or reflected)."""

    def method(self: Tensor, other: Any) -> Any:
        if not isinstance(other, Tensor) and not is_scalar(other):
            if type(other).__module__ == "numpy":  # an ndarray: numpy does not take over
                raise TypeError(
                    f"{name}: a zyx array does not mix with a numpy array; convert it with "
                    "zyx.asarray first"
                )
            return NotImplemented
        function = getattr(xp, name)
        return function(other, self) if reflected else function(self, other)

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _arithmetic(name: str) -> tuple[Operator, Operator, Operator]:
    """``x op y``, ``y op x`` and ``x op= y`` of the namespace's function ``name``."""
    return _binary(name), _binary(name, reflected=True), _inplace(name)


def _inplace(name: str) -> Operator:
    def method(self: Tensor, other: Any) -> Tensor:
        result: Tensor = getattr(xp, name)(self, other)
        if result.dtype is not self.dtype or result.shape != self.shape:
            raise TypeError(
                f"in-place {name} would change {_name(self.dtype)}{list(self.shape)} into "
                f"{_name(result.dtype)}{list(result.shape)}; the standard keeps an array's "
                "dtype and shape in place"
            )
        self.node = result.node
        return self

    return method


def _unary(name: str) -> Callable[[Tensor], Tensor]:
    def method(self: Tensor) -> Tensor:
        return getattr(xp, name)(self)  # type: ignore[no-any-return]

    return method


class Tensor:
    """An n-dimensional array on one device. Create one with the namespace's functions
    (``zyx.asarray``, ``zyx.zeros``, ...), not with this constructor."""

    __slots__ = ("node", "__weakref__")

    def __init__(self, node: Node) -> None:
        if not isinstance(node, Node):
            raise TypeError(
                f"zyx.Tensor is made by zyx's functions (zyx.asarray, zyx.zeros, ...), not "
                f"from a {type(node).__name__}"
            )
        self.node = node

    # ---- attributes -----------------------------------------------------------------------

    @property
    def dtype(self) -> DType:
        return self.node.dtype

    @property
    def device(self) -> Device:
        return self.node.device

    @property
    def shape(self) -> tuple[int, ...]:
        return self.node.shape

    @property
    def ndim(self) -> int:
        return len(self.node.shape)

    @property
    def size(self) -> int:
        return self.node.size

    @property
    def T(self) -> Tensor:  # noqa: N802 - the standard's name
        if self.ndim != 2:
            raise ValueError(f"x.T needs a 2-D array, got {self.ndim}-D; use x.mT or permute_dims")
        return xp.permute_dims(self, (1, 0))

    @property
    def mT(self) -> Tensor:  # noqa: N802 - the standard's name
        return xp.matrix_transpose(self)

    def __array_namespace__(self, *, api_version: str | None = None) -> ModuleType:
        if api_version not in (None, "2023.12", "2024.12"):
            raise ValueError(f"zyx implements the array API standard 2024.12, not {api_version!r}")
        import zyx

        return zyx

    def to_device(self, device: Any, /, *, stream: Any = None) -> Tensor:
        if stream is not None:
            raise ValueError("zyx orders work between devices itself; stream must be None")
        target = resolve_device(device)
        if target is self.device:
            return self
        require(target, self.dtype, DTypeCapability.STORAGE, "to_device")
        return Tensor(nodes.copy(self.node, target))

    # ---- realization ----------------------------------------------------------------------

    def numpy(self) -> np.ndarray[Any, Any]:
        """The values, copied to a new numpy array on the host."""
        return _runtime().read(self.node)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        if copy is False:
            raise ValueError("zyx arrays reach numpy by a copy; copy=False cannot be honoured")
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def _scalar(self, kind: type) -> Any:
        if self.size != 1:
            raise TypeError(f"only an array of one element converts to {kind.__name__}, "
                            f"got shape {self.shape}")  # fmt: skip
        return self.numpy().reshape(()).item()

    def __bool__(self) -> bool:
        return bool(self._scalar(bool))

    def __int__(self) -> int:
        # Python's int() of the float: OverflowError for an infinity, ValueError for NaN
        # (the standard's errors).
        return int(self._scalar(int))

    def __float__(self) -> float:
        return float(self._scalar(float))

    def __complex__(self) -> complex:
        return complex(self._scalar(complex))

    def __index__(self) -> int:
        if self.dtype.is_float or self.dtype is DType.BOOL:
            raise TypeError(f"only integer arrays can be used as an index, got {self.dtype}")
        return int(self._scalar(int))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-D array")
        return self.shape[0]

    def __iter__(self) -> Any:
        if not self.shape:
            raise TypeError("iteration over a 0-D array")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        import numpy as np

        values = self.numpy()
        if values.size:  # rows aligned under the first, as numpy's
            body = np.array2string(values, separator=", ", prefix="Tensor(")
        else:
            body = "[]" if self.shape == (0,) else f"[], shape={self.shape}"
        return f"Tensor({body}, dtype=zyx.{_name(self.dtype)}, device={self.device.name!r})"

    def __str__(self) -> str:
        return str(self.numpy())

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        from zyx.array.interop import dlpack

        return dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        from zyx.array.interop import dlpack_device

        return dlpack_device(self)

    # ---- indexing ---------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Tensor:
        result: Tensor = _indexing().getitem(self, key)
        return result

    def __setitem__(self, key: Any, value: Any) -> None:
        self.node = _indexing().setitem(self, key, value).node

    # ---- methods numpy, cupy and JAX arrays carry --------------------------------------------

    def astype(self, dtype: DType, /, *, copy: bool = True, device: Any = None) -> Tensor:
        return xp.astype(self, dtype, copy=copy, device=device)

    def reshape(self, *shape: Any, copy: bool | None = None) -> Tensor:
        target = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return xp.reshape(self, tuple(target), copy=copy)

    def transpose(self, *axes: int) -> Tensor:
        order = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return xp.permute_dims(self, tuple(order) or tuple(reversed(range(self.ndim))))

    def flatten(self) -> Tensor:
        return xp.reshape(self, (-1,))

    def squeeze(self, axis: int | tuple[int, ...] | None = None) -> Tensor:
        if axis is None:
            axis = tuple(d for d, n in enumerate(self.shape) if n == 1)
        return xp.squeeze(self, axis)

    def sum(
        self, axis: Any = None, *, dtype: DType | None = None, keepdims: bool = False
    ) -> Tensor:
        return xp.sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(
        self, axis: Any = None, *, dtype: DType | None = None, keepdims: bool = False
    ) -> Tensor:
        return xp.prod(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis: Any = None, *, keepdims: bool = False) -> Tensor:
        return xp.mean(self, axis=axis, keepdims=keepdims)

    def var(self, axis: Any = None, *, correction: float = 0.0, keepdims: bool = False) -> Tensor:
        return xp.var(self, axis=axis, correction=correction, keepdims=keepdims)

    def std(self, axis: Any = None, *, correction: float = 0.0, keepdims: bool = False) -> Tensor:
        return xp.std(self, axis=axis, correction=correction, keepdims=keepdims)

    def max(self, axis: Any = None, *, keepdims: bool = False) -> Tensor:
        return xp.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, *, keepdims: bool = False) -> Tensor:
        return xp.min(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis: int | None = None, *, keepdims: bool = False) -> Tensor:
        return xp.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis: int | None = None, *, keepdims: bool = False) -> Tensor:
        return xp.argmin(self, axis=axis, keepdims=keepdims)

    def all(self, axis: Any = None, *, keepdims: bool = False) -> Tensor:
        return xp.all(self, axis=axis, keepdims=keepdims)

    def any(self, axis: Any = None, *, keepdims: bool = False) -> Tensor:
        return xp.any(self, axis=axis, keepdims=keepdims)

    def clip(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - numpy's names
        return xp.clip(self, min, max)

    # ---- operators: the namespace's functions --------------------------------------------

    __add__, __radd__, __iadd__ = _arithmetic("add")
    __sub__, __rsub__, __isub__ = _arithmetic("subtract")
    __mul__, __rmul__, __imul__ = _arithmetic("multiply")
    __truediv__, __rtruediv__, __itruediv__ = _arithmetic("divide")
    __floordiv__, __rfloordiv__, __ifloordiv__ = _arithmetic("floor_divide")
    __mod__, __rmod__, __imod__ = _arithmetic("remainder")
    __pow__, __rpow__, __ipow__ = _arithmetic("pow")
    __matmul__, __rmatmul__, __imatmul__ = _arithmetic("matmul")
    __and__, __rand__, __iand__ = _arithmetic("bitwise_and")
    __or__, __ror__, __ior__ = _arithmetic("bitwise_or")
    __xor__, __rxor__, __ixor__ = _arithmetic("bitwise_xor")
    __lshift__, __rlshift__, __ilshift__ = _arithmetic("bitwise_left_shift")
    __rshift__, __rrshift__, __irshift__ = _arithmetic("bitwise_right_shift")
    __lt__ = _binary("less")
    __le__ = _binary("less_equal")
    __gt__ = _binary("greater")
    __ge__ = _binary("greater_equal")
    __eq__ = _binary("equal")  # type: ignore[assignment]  # elementwise, as the standard says
    __ne__ = _binary("not_equal")  # type: ignore[assignment]
    __neg__ = _unary("negative")
    __pos__ = _unary("positive")
    __abs__ = _unary("abs")
    __invert__ = _unary("bitwise_invert")
    __hash__ = None  # type: ignore[assignment]  # == is elementwise
    __array_ufunc__ = None
    """numpy's operators and ufuncs leave zyx arrays alone: ``ndarray + x`` is a TypeError
    (convert with ``zyx.asarray``), not numpy computing on a copy."""

    def realize(self) -> Tensor:
        """Compute the value now (it stays on the device); returns ``self``."""
        _runtime().realize([self.node])
        return self


@cache
def _indexing() -> ModuleType:
    """``zyx.array.indexing``, imported on first use (it imports this module); see
    ``_runtime``."""
    from zyx.array import indexing

    return indexing


@cache
def _runtime() -> Runtime:
    """``zyx.runtime.runtime``, imported on first use (``zyx.tensor`` loads before it): an
    import statement costs 0.7 µs each time it runs, a realize of a small op 10."""
    from zyx.runtime import runtime

    return runtime


def _name(dtype: DType) -> str:
    from zyx.array.dtypes import dtype_name

    return dtype_name(dtype)


# ---- plumbing shared by the namespace ---------------------------------------------------------


def resolve_device(device: Any) -> Device:
    """A device object from what ``device=`` accepts: a device, a name (``"cuda:1"``), or
    ``None`` (the default device)."""
    from zyx.backend import Device
    from zyx.plugins import device as find

    if isinstance(device, Device):
        return device
    if device is None or isinstance(device, str):
        return find(device)
    raise TypeError(f"device must be a zyx device, a device name or None, got {device!r:.60}")


def require(device: Device, dtype: DType, capability: DTypeCapability, what: str) -> None:
    """Raise ``DTypeError`` unless ``device`` can do ``capability`` with ``dtype``."""
    if not _supports(device, dtype, capability):
        have = [_name(d) for d in DType if device.info.supports(d, capability)]
        need = {DTypeCapability.STORAGE: "arrays of", DTypeCapability.ARITHMETIC: "arithmetic on",
                DTypeCapability.MATH: "math functions on"}.get(capability, "")  # fmt: skip
        raise DTypeError(
            f"{what}: {device.name} ({device.info.name}) has no {need} {_name(dtype)}; "
            f"it supports {', '.join(have) or 'none'}"
        )


@lru_cache(maxsize=256)
def _supports(device: Device, dtype: DType, capability: DTypeCapability) -> bool:
    """``device.info.supports``, remembered: every op asks, and a ``Flag``'s ``in`` runs
    Python code that cost a third of recording ``a + b``."""
    return device.info.supports(dtype, capability)


def array_argument(x: Any, what: str) -> Tensor:
    """``x``, where it is an array; else the TypeError that names ``what``."""
    if isinstance(x, Tensor):
        return x
    raise TypeError(f"{what} takes an array, got {type(x).__name__}")


def same_device(what: str, *tensors: Tensor) -> Device:
    """The one device of ``tensors``; mixing devices is an error naming both."""
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device is not device:
            raise ValueError(
                f"{what}: arrays on different devices ({device.name} and {t.device.name}); "
                "move one with x.to_device()"
            )
    return device


def is_scalar(value: Any) -> bool:
    """A Python number, or a numpy scalar (taken as the Python number it holds)."""
    return isinstance(value, (bool, int, float)) or _is_numpy_scalar(value)


def _is_numpy_scalar(value: Any) -> bool:
    numpy = sys.modules.get("numpy")  # no numpy scalar exists before numpy is imported
    return numpy is not None and isinstance(value, (numpy.bool_, numpy.integer, numpy.floating))


def check_scalar(value: Any, dtype: DType, what: str) -> PyScalar:
    """``value`` as the Python number a ``dtype`` array takes in an op, by the standard's
    rule: bool with bool, int with integer or floating, float with floating arrays (a
    numpy scalar counts as the Python number it holds)."""
    kind = type(value)
    if kind is float and dtype.is_float:  # the common case, first: nothing more to check
        return value  # type: ignore[no-any-return]
    if kind is not int and kind is not bool and _is_numpy_scalar(value):
        value = value.item()
    kind_ok = (
        isinstance(value, bool) if dtype is DType.BOOL
        else isinstance(value, int) and not isinstance(value, bool) if not dtype.is_float
        else not isinstance(value, bool)
    )  # fmt: skip
    if not kind_ok:
        raise TypeError(
            f"{what}: a Python {type(value).__name__} does not mix with a {_name(dtype)} array "
            "(the standard: bool with bool, int with integer or floating, float with floating "
            "arrays); convert one with astype"
        )
    if dtype.is_int:
        low, high = dtype.int_range
        if not low <= value <= high:
            raise OverflowError(f"{what}: {value} is out of {_name(dtype)}'s range [{low}, {high}]")
    return value  # type: ignore[no-any-return]


def scalar_tensor(value: Any, dtype: DType, device: Device, what: str) -> Tensor:
    """``value`` as a 0-D array of ``dtype``: a kernel argument (a ``SCALAR`` node), so
    that other values reuse the kernel; but a positive zero is a ``CONST``, part of the
    graph's structure, because the ops it meets mean something else with it: ``maximum(x,
    0)`` is relu, which claims and kernels may compute as such (and zero is never NaN)."""
    return Tensor(scalar_node(value, dtype, device, what))


def scalar_node(value: Any, dtype: DType, device: Device, what: str) -> Node:
    """The node of ``scalar_tensor``."""
    number = check_scalar(value, dtype, what)
    if dtype.is_float:
        number = float(number)
    if number == 0 and type(number) is not bool and not _negative_zero(number):
        return nodes.const(number, dtype, device)
    return nodes.scalar(number, dtype, device)


def _negative_zero(number: int | float) -> bool:
    # -0.0 == 0.0 and they hash alike: as a CONST, x + -0.0 and x + 0.0 (which turns -0.0
    # into 0.0) would share a plan.
    return type(number) is float and math.copysign(1.0, number) < 0
