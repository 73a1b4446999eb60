"""``zyx.random``: seeded, counter-based random numbers, computed inside the kernels that use
them, the same on every device and backend.

    rng = zyx.random.default_rng(42)
    x = rng.normal(0.0, 1.0, (1024, 1024), device="opencl")
    i = rng.integers(0, 10, 100)

The generator is Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as
easy as 1, 2, 3", 2011; JAX's generator): a keyed function of a 64-bit counter, made of
32-bit additions, rotations and exclusive ors only. Element ``i`` of a draw is that
function of ``i``, so a random array is a few hundred integer ops on an index, fused into
whatever kernel reads it and never stored; and since integer arithmetic is exact
everywhere, the same seed gives the same bits on the host, on OpenCL and on CUDA (torch's
generators differ between CPU and GPU). ``uniform``, ``integers`` and ``permutation`` are
the same to the bit on every device; ``normal`` goes through ``log``, ``sqrt`` and ``cos``,
whose last bits differ between devices' math libraries by a few ulps.

Why a numpy-style ``Generator`` (``default_rng(seed)``) rather than JAX's explicit keys:
it is what numpy and cupy users write, and what scipy and scikit-learn pass around; and in
a lazy library its hidden state costs nothing of what it costs JAX. The state is a count
of draws, advanced in Python when a draw is recorded, not when it is computed: the numbers
depend only on the seed, the order of the draws and the element, never on when (or
whether, or in which fused kernel) they are computed. Each draw's key reaches the kernel
as an argument, so the next draw of the same shape reuses the compiled kernel and plan.
Independent streams come from separate seeds (or ``Generator.spawn``).
"""

from __future__ import annotations

import itertools
import math
import operator
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from zyx.array.dtypes import DEFAULT_FLOAT, DEFAULT_INT
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import nodes
from zyx.graph.views import View
from zyx.ir.ops import BOp, UOp
from zyx.tensor import Tensor, require, resolve_device

if TYPE_CHECKING:
    from zyx.backend import Device

__all__ = ["Generator", "default_rng"]

MASK = (1 << 32) - 1
ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
"""Threefry-2x32's rotation amounts, one per round, repeating every 8 rounds."""
PARITY = 0x1BD11BDA
"""Threefish's key schedule constant: the third key word is ``k0 ^ k1 ^ PARITY``."""
ROUNDS = 20

W = TypeVar("W")


class Words(Protocol[W]):
    """32-bit word arithmetic, wrapping: on Python ints (keys), or on graph nodes (arrays)."""

    def word(self, value: int) -> W: ...
    def add(self, a: W, b: W) -> W: ...
    def xor(self, a: W, b: W) -> W: ...
    def rotl(self, a: W, r: int) -> W: ...


def threefry2x32(ops: Words[W], key: tuple[W, W], counter: tuple[W, W]) -> tuple[W, W]:
    """Threefry-2x32-20 of ``counter`` under ``key`` (Random123's ``threefry2x32``)."""
    k0, k1 = key
    schedule = (k0, k1, ops.xor(ops.xor(k0, k1), ops.word(PARITY)))
    x0, x1 = ops.add(counter[0], k0), ops.add(counter[1], k1)
    for i in range(ROUNDS):
        x0 = ops.add(x0, x1)
        x1 = ops.xor(ops.rotl(x1, ROTATIONS[i % 8]), x0)
        if i % 4 == 3:  # key injection
            s = i // 4 + 1
            x0 = ops.add(x0, schedule[s % 3])
            x1 = ops.add(x1, ops.add(schedule[(s + 1) % 3], ops.word(s)))
    return x0, x1


class IntWords:
    """``Words`` on Python ints."""

    def word(self, value: int) -> int:
        return value & MASK

    def add(self, a: int, b: int) -> int:
        return (a + b) & MASK

    def xor(self, a: int, b: int) -> int:
        return a ^ b

    def rotl(self, a: int, r: int) -> int:
        return ((a << r) | (a >> (32 - r))) & MASK


class NodeWords:
    """``Words`` on u32 graph nodes of one shape and device (the generator in the IR), and
    the other ops on such nodes that the draws need."""

    def __init__(self, shape: tuple[int, ...], device: Device) -> None:
        self.shape = shape
        self.device = device

    def _broadcast(self, node: nodes.Node) -> nodes.Node:
        return nodes.view(node, View(self.shape, (), ()))

    def const(self, value: bool | int | float, dtype: DType) -> nodes.Node:
        """A constant, baked into the kernel."""
        return self._broadcast(nodes.const(value, dtype, self.device))

    def scalar(self, value: bool | int | float, dtype: DType) -> nodes.Node:
        """A kernel argument: a kernel reused with other values."""
        return self._broadcast(nodes.scalar(value, dtype, self.device))

    def binary(self, op: BOp, a: nodes.Node, b: nodes.Node) -> nodes.Node:
        return nodes.binary(op, a, b, DType.BOOL if op.is_comparison else a.dtype)

    def shr(self, a: nodes.Node, bits: int) -> nodes.Node:
        return self.binary(BOp.SHR, a, self.const(bits, a.dtype))

    def float(self, a: nodes.Node, dtype: DType, scale: float = 1.0) -> nodes.Node:
        """The integer ``a`` as ``dtype``, times ``scale`` (a power of two: exact)."""
        value = nodes.cast(a, dtype)
        return value if scale == 1.0 else self.binary(BOp.MUL, value, self.const(scale, dtype))

    # ---- Words ----------------------------------------------------------------------------

    def word(self, value: int) -> nodes.Node:
        return self.const(value & MASK, DType.U32)

    def add(self, a: nodes.Node, b: nodes.Node) -> nodes.Node:
        return self.binary(BOp.ADD, a, b)

    def xor(self, a: nodes.Node, b: nodes.Node) -> nodes.Node:
        return self.binary(BOp.BITXOR, a, b)

    def rotl(self, a: nodes.Node, r: int) -> nodes.Node:
        left = self.binary(BOp.SHL, a, self.const(r, DType.U32))
        return self.binary(BOp.BITOR, left, self.shr(a, 32 - r))


FLOAT_BITS = {DType.F16: 11, DType.BF16: 8, DType.F32: 24, DType.F64: 53}
"""Random bits per value in [0, 1): the dtype's precision, so every value is exact."""

INT_DTYPES = (DType.U8, DType.U16, DType.U32, DType.U64, DType.I8, DType.I16, DType.I32,
              DType.I64)  # fmt: skip

REJECTION = 2.0**-64
"""The chance that ``integers`` finds no candidate in range, after which it takes the last
one: its only bias."""


def default_rng(seed: int | None = None) -> Generator:
    """A new ``Generator``, as numpy's ``default_rng``: from ``seed`` (an int in
    ``[0, 2**64)``), or from the operating system's entropy where ``seed`` is None."""
    return Generator(seed)


class Generator:
    """Draws random arrays (numpy's ``Generator`` methods, with the array API's ``shape``,
    ``dtype`` and ``device``: ``shape`` is numpy's ``size``, in the same position).

    Each draw takes the next key: ``threefry2x32(seed, (draw, block))``. Safe to share
    between threads (each draw takes its own number), but the order of draws from
    several threads is theirs."""

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            seed = secrets.randbits(64)
        seed = operator.index(seed)
        if not 0 <= seed < 1 << 64:
            raise ValueError(f"a seed is an int in [0, 2**64), got {seed}")
        self.seed = seed
        self._key = (seed & MASK, seed >> 32)
        self._draws = itertools.count()

    def __repr__(self) -> str:
        return f"zyx.random.Generator(seed={self.seed})"

    def spawn(self, n: int) -> list[Generator]:
        """``n`` new generators whose streams are independent of this one's and of each
        other's (numpy's ``spawn``): seeded from this generator's next keys."""
        return [Generator(self._next_seed()) for _ in range(n)]

    # ---- draws ----------------------------------------------------------------------------

    def random(
        self, shape: int | Sequence[int] = (), *, dtype: DType | None = None, device: Any = None
    ) -> Tensor:
        """Floats in ``[0, 1)``, uniform."""
        return self.uniform(0.0, 1.0, shape, dtype=dtype, device=device)

    def uniform(
        self,
        low: float = 0.0,
        high: float = 1.0,
        shape: int | Sequence[int] = (),
        *,
        dtype: DType | None = None,
        device: Any = None,
    ) -> Tensor:
        """Floats in ``[low, high)``, uniform: ``low + (high - low) * u``, ``u`` of the
        dtype's precision (which rounding may carry to ``high``, as numpy's may)."""
        start, stop = _number(low, "low"), _number(high, "high")
        draw = self._draw("uniform", shape, _float_dtype(dtype, "uniform"), device)
        unit = draw.unit(draw.blocks(2 if draw.dtype is DType.F64 else 1))
        return draw.finish(draw.affine(unit, start, stop - start))

    def normal(
        self,
        loc: float = 0.0,
        scale: float = 1.0,
        shape: int | Sequence[int] = (),
        *,
        dtype: DType | None = None,
        device: Any = None,
    ) -> Tensor:
        """Floats of the normal distribution of mean ``loc`` and standard deviation
        ``scale``, by the Box-Muller transform of two uniform values (so no value lies
        past 5.8 standard deviations in float32, 8.6 in float64)."""
        draw = self._draw("normal", shape, _float_dtype(dtype, "normal"), device)
        require(draw.device, draw.compute, DTypeCapability.MATH, "normal")
        wide = draw.dtype is DType.F64
        bits = draw.blocks(4 if wide else 2)
        half = len(bits) // 2
        radius = draw.unit(bits[:half], open_below=True)  # in (0, 1]: its log is finite
        angle = draw.unit(bits[half:])
        ops, compute = draw.ops, draw.compute
        log = nodes.unary(UOp.LN, radius)
        length = nodes.unary(UOp.SQRT, ops.binary(BOp.MUL, log, ops.const(-2.0, compute)))
        turn = ops.binary(BOp.MUL, angle, ops.const(2 * math.pi, compute))
        z = ops.binary(BOp.MUL, length, nodes.unary(UOp.COS, turn))
        return draw.finish(draw.affine(z, _number(loc, "loc"), _number(scale, "scale")))

    def integers(
        self,
        low: int,
        high: int | None = None,
        shape: int | Sequence[int] = (),
        *,
        dtype: DType = DEFAULT_INT,
        endpoint: bool = False,
        device: Any = None,
    ) -> Tensor:
        """Integers in ``[low, high)`` (``[low, high]`` with ``endpoint``; ``[0, low)``
        without ``high``), each value equally likely: a 64-bit candidate past the largest
        multiple of the range is rejected, with enough candidates per element that all
        are rejected with a chance of at most 2**-64."""
        if dtype not in INT_DTYPES:
            raise TypeError(f"integers makes integer arrays, not {dtype}")
        low, high = (0, operator.index(low)) if high is None else (operator.index(low), high)
        top = operator.index(high) + (1 if endpoint else 0)
        span = top - low
        least, most = dtype.int_range
        if span < 1 or low < least or top - 1 > most:
            raise ValueError(
                f"integers: no {dtype} in [{low}, {top}) (the range must be non-empty and "
                f"within [{least}, {most}])"
            )
        draw = self._draw("integers", shape, dtype, device)
        value = draw.below(span)
        offset = draw.ops.scalar(low % (1 << 64), DType.U64)
        total = draw.ops.binary(BOp.ADD, value, offset)  # low + value, as 64-bit two's complement
        wide = DType.I64 if dtype in (DType.I8, DType.I16, DType.I32, DType.I64) else DType.U64
        return Tensor(nodes.cast(nodes.cast(total, wide), dtype))

    def permutation(self, x: int | Tensor, *, device: Any = None) -> Tensor:
        """``x`` (an array) with its first axis in a random order, or ``arange(x)`` (an int)
        in a random order: an ``argsort`` of random 64-bit keys."""
        from zyx.array.creation import arange
        from zyx.array.indexing import take
        from zyx.array.sorting import argsort

        if isinstance(x, Tensor):
            if x.ndim == 0:
                raise ValueError("permutation of a 0-D array: it has no axis to shuffle")
            n, where = x.shape[0], x.device if device is None else device
        else:
            n, where = operator.index(x), device
        draw = self._draw("permutation", (n,), DType.I64, where)
        keys = Tensor(draw.u64(draw.blocks(2)))
        order = argsort(keys, stable=True)  # ties (chance n**2 / 2**65) keep index order
        if isinstance(x, Tensor):
            return take(x.to_device(draw.device), order, axis=0)
        return take(arange(n, device=draw.device), order)

    # ---- plumbing -------------------------------------------------------------------------

    def _next_seed(self) -> int:
        k0, k1 = self._subkey(next(self._draws), 0)
        return k0 | k1 << 32

    def _subkey(self, draw: int, block: int) -> tuple[int, int]:
        """The key of a draw's block: the seed's Threefry of ``(draw, block)``."""
        if draw > MASK:
            raise OverflowError("this generator has made 2**32 draws; seed a new one")
        return threefry2x32(IntWords(), self._key, (draw, block))

    def _draw(self, what: str, shape: int | Sequence[int], dtype: DType, device: Any) -> _Draw:
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        dims = tuple(operator.index(n) for n in dims)
        if any(n < 0 for n in dims):
            raise ValueError(f"{what}: negative dimensions are not allowed: {dims}")
        target = resolve_device(device)
        require(target, dtype, DTypeCapability.STORAGE, what)
        require(target, DType.U32, DTypeCapability.ARITHMETIC, what)
        return _Draw(self, next(self._draws), dims, dtype, target)


class _Draw:
    """One draw: its arrays' shape, dtype and device, and its blocks of random bits."""

    def __init__(
        self, rng: Generator, number: int, shape: tuple[int, ...], dtype: DType, device: Device
    ) -> None:
        self.rng, self.number = rng, number
        self.shape, self.dtype, self.device = shape, dtype, device
        self.ops = NodeWords(shape, device)
        self.compute = DType.F64 if dtype is DType.F64 else DType.F32
        """Floats are computed in float32 (float64 for float64), half floats cast at last."""
        if dtype.is_float:
            require(device, self.compute, DTypeCapability.ARITHMETIC, "random floats")
        flat = nodes.reshape(nodes.iota((math.prod(shape),), 0, device), shape)
        high = nodes.binary(BOp.SHR, flat, self.ops.const(32, DType.I64), DType.I64)
        self.counter = (nodes.cast(flat, DType.U32), nodes.cast(high, DType.U32))
        """Element ``i``'s counter: ``i``'s low and high 32 bits (a cast wraps)."""

    def blocks(self, words: int) -> list[nodes.Node]:
        """``words`` random u32 words per element (two per Threefry block, each block
        under its own key, the key a kernel argument)."""
        out: list[nodes.Node] = []
        for block in range((words + 1) // 2):
            k0, k1 = self.rng._subkey(self.number, block)
            key = (self.ops.scalar(k0, DType.U32), self.ops.scalar(k1, DType.U32))
            out.extend(threefry2x32(self.ops, key, self.counter))
        return out[:words]

    def unit(self, bits: list[nodes.Node], open_below: bool = False) -> nodes.Node:
        """Floats in ``[0, 1)`` of the dtype's precision from one word (two for float64),
        exactly computed; ``(0, 1]`` with ``open_below``."""
        ops, precision = self.ops, FLOAT_BITS[self.dtype]
        if self.dtype is DType.F64:  # 27 + 26 bits, numpy's way
            high = ops.float(ops.shr(bits[0], 5), DType.F64, 2.0**26)
            whole = ops.binary(BOp.ADD, high, ops.float(ops.shr(bits[1], 6), DType.F64))
        else:
            whole = ops.float(ops.shr(bits[0], 32 - precision), DType.F32)
        if open_below:
            whole = ops.binary(BOp.ADD, whole, ops.const(1.0, self.compute))
        return ops.binary(BOp.MUL, whole, ops.const(2.0**-precision, self.compute))

    def affine(self, x: nodes.Node, offset: float, factor: float) -> nodes.Node:
        """``offset + factor * x``, both kernel arguments."""
        ops, compute = self.ops, self.compute
        scaled = ops.binary(BOp.MUL, x, ops.scalar(factor, compute))
        return ops.binary(BOp.ADD, scaled, ops.scalar(offset, compute))

    def finish(self, x: nodes.Node) -> Tensor:
        return Tensor(nodes.cast(x, self.dtype))

    def u64(self, bits: list[nodes.Node]) -> nodes.Node:
        """Two words as one u64: ``bits[0] << 32 | bits[1]``."""
        require(self.device, DType.U64, DTypeCapability.ARITHMETIC, "random 64-bit integers")
        ops = self.ops
        high = ops.binary(BOp.SHL, nodes.cast(bits[0], DType.U64), ops.const(32, DType.U64))
        return ops.binary(BOp.BITOR, high, nodes.cast(bits[1], DType.U64))

    def below(self, span: int) -> nodes.Node:
        """u64 values uniform in ``[0, span)`` (``1 <= span <= 2**64``)."""
        ops = self.ops
        if span & (span - 1) == 0:  # a power of two: the low bits, no rejection
            candidate = self.u64(self.blocks(2))
            if span == 1 << 64:
                return candidate
            return ops.binary(BOp.BITAND, candidate, ops.scalar(span - 1, DType.U64))
        excess = (1 << 64) % span  # the candidates past the last multiple of span
        tries = math.ceil(math.log(REJECTION) / math.log(excess / 2.0**64))
        bits = self.blocks(2 * tries)
        limit, divisor = ops.scalar((1 << 64) - excess, DType.U64), ops.scalar(span, DType.U64)
        value: nodes.Node | None = None
        for k in reversed(range(tries)):  # the first accepted candidate wins
            candidate = self.u64(bits[2 * k : 2 * k + 2])
            reduced = ops.binary(BOp.MOD, candidate, divisor)
            if value is None:
                value = reduced  # all rejected (chance <= REJECTION): the last one
            else:
                value = nodes.where(ops.binary(BOp.CMPLT, candidate, limit), reduced, value)
        assert value is not None
        return value


def _float_dtype(dtype: DType | None, what: str) -> DType:
    dtype = DEFAULT_FLOAT if dtype is None else dtype
    if dtype not in FLOAT_BITS:
        raise TypeError(f"{what} makes floating arrays, not {dtype}")
    return dtype


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a Python int or float, got {type(value).__name__}")
    return float(value)
