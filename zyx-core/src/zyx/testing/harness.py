"""Run a kernel on a device and on the reference interpreter, with the same numpy arguments.

Arguments are given in param order: 1-D numpy arrays of the param's dtype for buffer
params (an output's initial content too, normally :func:`~zyx.testing.numerics.poisoned`)
and Python scalars for ``Variable`` params. Both runners return the final content of
every buffer param, in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from zyx.backend import Buffer, Device, MemoryPool, Program, Scalar
from zyx.dtypes import DType, round_to
from zyx.ir import Kernel, ParamKind
from zyx.ir.interpreter import interpret
from zyx.testing.kernels import LOCAL, Elementwise, elementwise
from zyx.testing.numerics import (
    OP_BOUNDS,
    Array,
    assert_close,
    assert_ieee,
    assert_poison,
    assert_ulps,
    poisoned,
)

HostArg: TypeAlias = "Array | Scalar"
"""One launch argument on the host side: an array for a buffer param, else a scalar."""
Args: TypeAlias = Sequence[HostArg]


def run(device: Device, kernel: Kernel, args: Args) -> list[Array]:
    """Compile ``kernel`` on ``device``, :func:`launch` it once, and release the program."""
    with compiled(device, kernel) as program:
        return launch(device, program, args)


@contextmanager
def compiled(device: Device, kernel: Kernel) -> Iterator[Program]:
    """``kernel`` compiled on ``device``, released on leaving the block."""
    program = device.compile(kernel)
    try:
        yield program
    finally:
        device.release(program)


def launch(device: Device, program: Program, args: Args) -> list[Array]:
    """Copy each array into a new buffer, launch, and read every buffer back.

    The buffers are released before returning, also when something fails.
    """
    pool = device.pool
    buffers: list[Buffer] = []
    try:
        bound: list[Buffer | Scalar] = []
        for arg in args:
            if isinstance(arg, np.ndarray):
                buf = pool.allocate(arg.nbytes)
                buffers.append(buf)
                pool.write(buf, arg)
                bound.append(buf)
            else:
                bound.append(arg)
        device.launch(program, bound)
        results = [np.empty_like(arg) for arg in args if isinstance(arg, np.ndarray)]
        for buf, out in zip(buffers, results):
            pool.read(buf, out)
        return results
    finally:
        for buf in buffers:
            pool.release(buf)


def reference(kernel: Kernel, args: Args) -> list[Array]:
    """Run ``kernel`` in the IR interpreter with every float op in float64.

    Float arrays are widened to float64 (exactly); the results of float buffers are float64.
    A float ``Variable`` is the value of its dtype that a device holds, in float64: the
    Python float rounded to the dtype. The caller's arrays are not modified.
    """
    wide = [
        _widen(arg) if isinstance(arg, np.ndarray) else _held(arg, param.kind, param.dtype)
        for arg, param in zip(args, kernel.params, strict=True)
    ]
    interpret(kernel, wide, compute=np.float64)
    return [arg for arg in wide if isinstance(arg, np.ndarray)]


def _widen(array: Array) -> Array:
    """A float64 copy of a float array (bf16 included), else a plain copy."""
    return array.astype(np.float64) if DType.from_numpy(array.dtype).is_float else array.copy()


def _held(arg: HostArg, kind: ParamKind, dtype: DType) -> HostArg:
    """A ``Variable``'s value as a device holds it: floats rounded to ``dtype`` as the
    backends round them (``round_to``: f16 straight from the Python float, bf16 through
    float32), integers as they are."""
    if kind is not ParamKind.VARIABLE or not dtype.is_float or isinstance(arg, np.ndarray):
        return arg
    return round_to(float(arg), dtype)


class Buffers:
    """Buffers of one pool made from arrays; all released on leaving the ``with`` block."""

    def __init__(self, pool: MemoryPool) -> None:
        self.pool = pool
        self.held: list[Buffer] = []

    def __enter__(self) -> Buffers:
        return self

    def __exit__(self, *exc: object) -> None:
        for buf in self.held:
            self.pool.release(buf)

    def put(self, array: Array) -> Buffer:
        """A new buffer holding a copy of ``array``."""
        buf = self.pool.allocate(array.nbytes)
        self.held.append(buf)
        self.pool.write(buf, array)
        return buf

    def get(self, buf: Buffer, dtype: DType) -> Array:
        """The content of ``buf`` as an array of ``dtype``."""
        out = np.empty(buf.nbytes // dtype.itemsize, dtype.numpy)
        self.pool.read(buf, out)
        return out


@dataclass(frozen=True)
class Outcome:
    """One elementwise part's result on the device, beside the reference's."""

    part: Elementwise
    inputs: list[Array]
    out: Array
    """The device's first ``n`` output elements."""
    ref: Array
    """The reference's ``n`` output elements."""
    tail: Array
    """The device's output elements past ``n``, which the kernel must not write."""

    def check(self) -> None:
        """Raise ``AssertionError`` unless ``out`` matches ``ref`` (by the norm and, where the
        part has a budget, per element in ulps; a float part with special values by
        :func:`~zyx.testing.numerics.assert_ieee`) and ``tail`` is untouched."""
        part, dtype = self.part, self.part.output
        if part.ieee and part.ulps is not None:  # every float result has a budget
            signed = part.signed_zeros
            assert_ieee(self.out, self.ref, dtype, part.ulps, part.name, self.inputs, signed)
        else:
            assert_close(self.out, self.ref, dtype, part.name, OP_BOUNDS)
            if part.ulps is not None:
                assert_ulps(self.out, self.ref, dtype, part.ulps, part.name, self.inputs)
        assert_poison(self.tail, dtype, what=f"{part.name} past n")


def run_elementwise(
    device: Device,
    name: str,
    parts: Sequence[Elementwise],
    n: int,
    rng: np.random.Generator,
    local: int = LOCAL,
) -> dict[str, Outcome]:
    """Compute ``parts`` as one kernel on ``n`` random elements, on ``device`` and on the
    reference. Outputs have ``local`` poisoned elements past ``n``. Keyed by part name."""
    kernel = elementwise(name, parts, local)
    inputs = [part.sample(rng, n) for part in parts]
    args: list[HostArg] = []
    for part, xs in zip(parts, inputs):
        args += [*xs, poisoned(part.output, n + local)]
    args.append(n)
    got, want = run(device, kernel, args), reference(kernel, args)
    outcomes: dict[str, Outcome] = {}
    position = 0
    for part, xs in zip(parts, inputs):
        position += len(xs)
        out, ref = got[position], want[position]
        outcomes[part.name] = Outcome(part, xs, out[:n], ref[:n], out[n:])
        position += 1
    return outcomes
