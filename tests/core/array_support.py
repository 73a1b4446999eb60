"""Helpers of the array namespace tests (``tests/core/test_array_*.py``): the devices and
the dtypes they claim, random data, non-contiguous views of it, and comparing results with
numpy's in float64.

(Not in conftest.py: test modules import these by a name no other test folder uses.)

Every new kernel costs a compile, about 0.1 s on the host and 0.5 s on PoCL, so the tests
check many results per kernel: ``Expect`` collects results with their references and
realizes them packed into few kernels (each result cast to a wide dtype that holds its
values exactly, flattened, and concatenated with others), then compares each one by its
own dtype's rules.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.backend import Device, MemoryPool
from zyx.dtypes import DType, DTypeCapability
from zyx.tensor import Tensor
from zyx.testing.numerics import BOUNDS, Array, assert_close, assert_ieee, assert_ulps
from zyx.testing.numerics import random as random_values

FLOATS = (DType.F16, DType.BF16, DType.F32, DType.F64)
SIGNED = (DType.I8, DType.I16, DType.I32, DType.I64)
UNSIGNED = (DType.U8, DType.U16, DType.U32, DType.U64)
INTEGERS = SIGNED + UNSIGNED
NUMERIC = INTEGERS + FLOATS
ALL = (DType.BOOL, *NUMERIC)

ARITHMETIC = DTypeCapability.STORAGE | DTypeCapability.ARITHMETIC
MATH = ARITHMETIC | DTypeCapability.MATH

PACK = 12
"""Results per packed kernel: the C compilers' time grows faster than a kernel's length
(measured on the host: 12 results 1.5 s, 24 results 7 s; PoCL 0.9 and 2.3 s)."""

MATH_PACK = 6
"""Results per packed kernel where they compute transcendental math: one read by a
concatenation more than 8 times its size gets a kernel of its own (the scheduler's rule 3),
so up to seven results of similar size stay in one."""


def settled(device: Device) -> int:
    """``device``'s free bytes once every dead array's buffer went back to the pool."""
    gc.collect()
    zyx.empty_cache()
    device.synchronize()
    return device.pool.free_bytes()


def exact_pool(device: Device) -> MemoryPool:
    """``device``'s pool, where it counts its free bytes exactly (else the test skips)."""
    if not device.pool.exact_free_bytes:
        pytest.skip(f"{device.name}'s pool reports the driver's approximate free memory")
    return device.pool


def claimed(device: Device, dtypes: Sequence[DType], capability: DTypeCapability) -> list[DType]:
    """The ``dtypes`` that ``device`` claims ``capability`` for."""
    return [d for d in dtypes if device.info.supports(d, capability)]


def require(device: Device, dtype: DType, capability: DTypeCapability = ARITHMETIC) -> None:
    """Skip, with the reason, unless ``device`` claims ``capability`` for ``dtype``."""
    if not device.info.supports(dtype, capability):
        pytest.skip(f"{device.name} claims no {capability} for {dtype.value}")


def require_special_values(device: Device) -> None:
    """Skip where NaN, infinities and signed zeros are undefined (a finite-math build)."""
    if device.info.finite_math:
        pytest.skip(f"{device.name} is built for finite math: NaN, inf and -0 are undefined")


def data(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    dtype: DType,
    low: float | None = None,
    high: float | None = None,
) -> Array:
    """Random values of ``dtype`` in ``[low, high]`` (floats default to [-4, 4], integers to
    their whole range), never zero (bools: both values)."""
    return random_values(rng, dtype, prod(shape), low, high).reshape(shape)


def on(device: Device, values: Any) -> Tensor:
    return zyx.asarray(np.asarray(values), device=device)


def strided(device: Device, values: Array) -> Tensor:
    """An array holding ``values`` through a view with every kind of stride: its first dim
    read every other element, its last every third element backwards, and (2 dims or more)
    its last two dims transposed."""
    x = np.asarray(values)
    if x.ndim == 0:
        return on(device, x)
    if x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    steps = (slice(1, None, 2), Ellipsis, slice(None, None, -3))
    if x.ndim == 1:
        steps = (slice(None, None, -6),)
    base = np.ones((2 * x.shape[0], *x.shape[1:-1], 3 * x.shape[-1]), dtype=x.dtype)
    if x.ndim == 1:
        base = np.ones(6 * x.size, dtype=x.dtype)
    base[steps] = x
    view = on(device, base)[steps]
    return zyx.matrix_transpose(view) if x.ndim >= 2 else view


def layouts(device: Device, values: Array) -> Iterator[tuple[str, Tensor]]:
    """``values`` as a contiguous array and through ``strided``'s view."""
    yield "contiguous", on(device, values)
    yield "strided", strided(device, values)


def reference(values: Array) -> Array:
    """``values`` as numpy computes references: floats in float64, integers and bools as
    they are (their results are exact)."""
    x = np.asarray(values)
    return x.astype(np.float64) if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else x


@dataclass
class _Result:
    got: Tensor
    want: Array
    dtype: DType
    what: str
    ulps: float | None
    ieee: bool
    signed_zeros: bool
    or_else: Array | None
    out: Array | None = None


class Expect:
    """Results and their references, checked together on leaving the ``with`` block:

        with Expect(device) as expect:
            expect(zyx.sin(x), np.sin(ref), zyx.float32, "sin", ulps=4.5)

    Floats: relative norm error within ``BOUNDS`` of their dtype, and each element within
    ``ulps`` where given; with ``ieee``, NaN exactly where the reference has it, the same
    infinities and (where ``signed_zeros``) zero signs; ``or_else`` holds, element by
    element, a second value the standard allows. Integers and bools: equal. The
    result's dtype and shape must be the expected ones. Every failure is reported at once.
    """

    def __init__(self, device: Device, per_kernel: int = PACK) -> None:
        self.device = device
        self.per_kernel = per_kernel
        self.results: list[_Result] = []

    def __enter__(self) -> Expect:
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if kind is None:
            self.check()

    def __call__(
        self,
        got: Tensor,
        want: Any,
        dtype: DType,
        what: str,
        *,
        ulps: float | None = None,
        ieee: bool = False,
        signed_zeros: bool = True,
        or_else: Any = None,
    ) -> None:
        assert isinstance(got, Tensor), f"{what}: got a {type(got).__name__}, not an array"
        other = None if or_else is None else np.asarray(or_else)
        self.results.append(
            _Result(got, np.asarray(want), dtype, what, ulps, ieee, signed_zeros, other)
        )

    def check(self) -> None:
        failures = [f"{r.what}: {e}" for r, e in self._compare() if e]
        self.results = []
        assert not failures, f"{len(failures)} results wrong:\n" + "\n".join(failures)

    def _compare(self) -> Iterator[tuple[_Result, str]]:
        sound = []
        for r in self.results:
            if r.got.dtype is not r.dtype or r.got.shape != r.want.shape:
                yield (
                    r,
                    (
                        f"dtype {r.got.dtype.value} shape {r.got.shape}, expected "
                        f"{r.dtype.value} {r.want.shape}"
                    ),
                )
            else:
                sound.append(r)
        try:
            self._realize(sound)
        except Exception as error:  # a failed compile or launch fails every result in it
            yield from ((r, f"raised {error!r:.500}") for r in sound if r.out is None)
        for r in sound:
            if r.out is not None:
                yield r, _mismatch(r)

    def _realize(self, results: list[_Result]) -> None:
        groups: dict[DType | None, list[_Result]] = {}
        for r in results:
            carrier = self._carrier(r.dtype) if self.per_kernel > 1 and r.got.size else None
            groups.setdefault(carrier, []).append(r)
        for r in groups.pop(None, []):
            r.out = r.got.numpy()
        for carrier, members in groups.items():
            assert carrier is not None
            for start in range(0, len(members), self.per_kernel):
                _unpack(carrier, members[start : start + self.per_kernel])

    def _carrier(self, dtype: DType) -> DType | None:
        """The dtype that holds every value of ``dtype`` exactly, on this device."""
        if not dtype.is_float:
            return DType.I64 if self.device.info.supports(DType.I64, ARITHMETIC) else None
        for wide in (DType.F64, DType.F32):
            if wide.itemsize >= dtype.itemsize and self.device.info.supports(wide, ARITHMETIC):
                return wide
        return None


def _unpack(carrier: DType, results: list[_Result]) -> None:
    """Realize ``results`` in one kernel (cast to ``carrier``, flattened, concatenated)."""
    flat = [zyx.reshape(r.got.astype(carrier), (-1,)) for r in results]
    packed = zyx.concat(flat).numpy() if len(flat) > 1 else flat[0].numpy()
    start = 0
    for r in results:
        part = packed[start : start + r.got.size].reshape(r.got.shape)
        start += r.got.size
        if r.dtype is DType.BOOL and not np.isin(part, (0, 1)).all():
            r.out = part  # not a bool: compared as it is, it fails
        else:
            r.out = part.astype(r.dtype.numpy)


def _mismatch(r: _Result) -> str:
    """What is wrong with ``r``'s realized values, or ``""``."""
    assert r.out is not None
    if r.out.dtype != r.dtype.numpy:
        return f"holds values no {r.dtype.value} has: {r.out.ravel()[:8]}"
    want = r.want if r.or_else is None else np.where(_same(r.out, r.or_else), r.or_else, r.want)
    # Flat: the numerics helpers report a flat index.
    out, want = r.out.ravel(), np.broadcast_to(want, r.out.shape).ravel()
    try:
        if not r.dtype.is_float:
            assert_close(out, want.astype(r.dtype.numpy), r.dtype)
        elif r.ieee:
            assert_ieee(
                out, want, r.dtype, r.ulps if r.ulps is not None else np.inf,
                signed_zeros=r.signed_zeros,
            )  # fmt: skip
        else:
            with np.errstate(all="ignore"):
                assert_close(out, want, r.dtype, bounds=BOUNDS)
            if r.ulps is not None:
                assert_ulps(out, want, r.dtype, r.ulps)
    except AssertionError as error:
        return str(error)
    return ""


def _same(a: Array, b: Array) -> Array:
    """Per element: the same number (NaN with NaN, zeros of the same sign)."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    return ((x == y) & (np.signbit(x) == np.signbit(y))) | (np.isnan(x) & np.isnan(y))
