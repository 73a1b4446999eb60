"""Checks of core's generated matmul (``zyx.graph.matmul``) on any device, shared by the
host's and OpenCL's tests: each variant's kernels against numpy in float64, on random
operands (transposed and batched by strides, sizes that are no multiple of a tile), into
poisoned outputs (an output never written stays NaN and fails).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.graph import matmul
from zyx.graph.claims import Matmul, matmuls
from zyx.graph.schedule import Graph
from zyx.ir import Kernel
from zyx.ir.interpreter import interpret
from zyx.testing.numerics import BOUNDS, assert_close, poisoned, random

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Case:
    """``a (*a_batch, n, k) @ b (*b_batch, k, m)``; a transposed operand is held as its
    transpose's contiguous buffer and read through a view."""

    a_batch: tuple[int, ...]
    b_batch: tuple[int, ...]
    n: int
    m: int
    k: int
    a_transposed: bool = False
    b_transposed: bool = False

    def __str__(self) -> str:
        a = "a.T" if self.a_transposed else "a"
        b = "b.T" if self.b_transposed else "b"
        return f"{a}{(*self.a_batch, self.n, self.k)} @ {b}{(*self.b_batch, self.k, self.m)}"


CASES = (
    Case((), (), 37, 45, 29),
    Case((2,), (2,), 133, 140, 37, a_transposed=True),
    Case((2, 1), (3,), 20, 33, 70, b_transposed=True),
)
"""Smaller than a GPU tile; past one in both dims with a k that no step divides, a
transposed; batches that broadcast, b transposed."""

ALIGNED_CASES = (
    Case((2,), (2,), 136, 264, 72),
    Case((), (), 64, 120, 48, a_transposed=True, b_transposed=True),
    Case((3,), (), 20, 16, 24, b_transposed=True),
    Case((), (), 136, 128, 328, a_transposed=True),
)
"""Operands of 16-byte rows (of 8 f16 or bf16), as the pipelined tensor-core variants
(``Variant.stages``) take them: past a tile's rows and columns with k past a step of 32
(and of 64); both transposed, a second step of 32; a batch of a times one b (its batch
stride 0); 11 steps of 32 along k (each stage filled and read several times), a
transposed."""


def operands(rng: np.random.Generator, dtype: DType, case: Case) -> tuple[Array, Array]:
    """Random operands of ``case`` as ``dtype`` holds them (never zero)."""
    a_shape, b_shape = (*case.a_batch, case.n, case.k), (*case.b_batch, case.k, case.m)
    a = random(rng, dtype, prod(a_shape), -2.0, 2.0).reshape(a_shape)
    b = random(rng, dtype, prod(b_shape), -2.0, 2.0).reshape(b_shape)
    return a, b


def arrays(device: Device, case: Case, a: Array, b: Array) -> tuple[zyx.Tensor, zyx.Tensor]:
    """``a`` and ``b`` on ``device``, each through a transposed view where ``case`` says."""

    def put(x: Array, transposed: bool) -> zyx.Tensor:
        if not transposed:
            return zyx.asarray(x, device=device)
        return zyx.asarray(np.ascontiguousarray(np.swapaxes(x, -1, -2)), device=device).mT

    return put(a, case.a_transposed), put(b, case.b_transposed)


def reference(a: Array, b: Array) -> Array:
    product: Array = np.matmul(a.astype(np.float64), b.astype(np.float64))
    return product


def found(device: Device, case: Case, a: Array, b: Array) -> Matmul:
    """The ``Matmul`` that ``zyx.matmul`` records for ``case``, its operands realized."""
    x, y = arrays(device, case, a, b)
    (m,) = matmuls(Graph([zyx.matmul(x, y).node]))
    return m


def run_variant(device: Device, variant: matmul.Variant, m: Matmul) -> Array:
    """``m`` computed by ``variant``'s kernels into a poisoned buffer, read back."""
    dtype = m.output.dtype
    count = prod(m.batch) * m.n * m.m
    out = device.pool.allocate(count * dtype.itemsize)
    scratch = [device.pool.allocate(n) for n in matmul.scratch(m, variant)]
    try:
        device.pool.write(out, poisoned(dtype, count))
        a, b = m.a.node.buffer, m.b.node.buffer
        assert a is not None and b is not None
        for launch in matmul.build(m, variant):
            assert isinstance(launch.kernel, Kernel)
            args = matmul.arguments(launch, a, b, out, scratch)
            device.launch(device.compile(launch.kernel), args)
        got = np.empty(count, dtype.numpy)
        device.pool.read(out, got)
    finally:
        for buf in (out, *scratch):
            device.pool.release(buf)
    return got.reshape(*m.batch, m.n, m.m)


def interpreted(variant: matmul.Variant, m: Matmul, a: Array, b: Array) -> Array:
    """``m`` computed by ``variant``'s kernels in the IR interpreter into a poisoned array,
    from ``a`` and ``b``, the buffers that hold the operands (``held``): where no device
    runs them (tensor cores, or asynchronous copies as a GPU completes them), or as the
    reference of a device's bit for bit; scratch buffers (packed operands) are its own."""
    out = poisoned(m.output.dtype, prod(m.batch) * m.n * m.m)
    named = {("src", 0): a, ("src", 1): b, ("out", 0): out}
    sizes = matmul.scratch(m, variant)
    for launch in matmul.build(m, variant):
        assert isinstance(launch.kernel, Kernel)
        args = [arg for arg in launch.args if isinstance(arg, tuple)]  # build binds buffers
        for arg, param in zip(args, launch.kernel.params):
            if arg not in named:  # a scratch buffer, of the param's dtype (packed operands)
                named[arg] = poisoned(param.dtype, sizes[arg[1]] // param.dtype.itemsize)
        interpret(launch.kernel, [named[arg] for arg in args])
    return out.reshape(*m.batch, m.n, m.m)


def held(x: Array, transposed: bool) -> Array:
    """The buffer that holds operand ``x`` (``arrays``), flat."""
    flat: Array = (np.ascontiguousarray(np.swapaxes(x, -1, -2)) if transposed else x).ravel()
    return flat


def check_variant(
    device: Device, variant: matmul.Variant, dtype: DType, case: Case, seed: int = 0
) -> None:
    """``variant``'s kernels of ``case`` in ``dtype`` match numpy in float64 (``BOUNDS``),
    every output written."""
    a, b = operands(np.random.default_rng(seed), dtype, case)
    m = found(device, case, a, b)
    assert matmul.fits(variant, m, device), (variant, device.name)
    assert_close(run_variant(device, variant, m), reference(a, b), dtype, f"{variant} {case}")


def check_front_end(device: Device, dtype: DType, case: Case, seed: int = 0) -> Any:
    """``zyx.matmul`` of ``case`` matches numpy in float64; the stats of its realize."""
    a, b = operands(np.random.default_rng(seed), dtype, case)
    x, y = arrays(device, case, a, b)
    before = zyx.stats()
    got = zyx.matmul(x, y).numpy()
    spent = zyx.stats() - before
    assert_close(got, reference(a, b), dtype, f"zyx.matmul {case} on {device.name}")
    return spent


__all__ = [
    "ALIGNED_CASES",
    "BOUNDS",
    "CASES",
    "Case",
    "check_front_end",
    "check_variant",
    "run_variant",
]
