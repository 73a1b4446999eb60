"""Manipulation functions against numpy, on strided inputs with size-0 and size-1 dims and
negative axes; views cost no copy (a chain of every kind of view is read by its
consumer's kernel alone); errors at the call name the shapes and axes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_support import ALL, ARITHMETIC, Expect, claimed, data, on, strided

import zyx
from zyx.array.manipulation import padded
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.tensor import Tensor
from zyx.testing.devices import checked_host

SHAPE = (3, 1, 4)


def _values(shape: tuple[int, ...] = SHAPE, dtype: DType = DType.F32, seed: int = 0) -> Any:
    return data(np.random.default_rng(seed), shape, dtype)


# Each case: what it calls, with the zyx array (``t``) or numpy's (``x``) as argument.
VIEWS: dict[str, tuple[Any, Any]] = {
    "reshape": (lambda t: zyx.reshape(t, (2, -1)), lambda x: x.reshape(2, -1)),
    "reshape to 0-D": (lambda t: zyx.reshape(t[0, 0, :1], ()), lambda x: x[0, 0, :1].reshape(())),
    "permute_dims": (lambda t: zyx.permute_dims(t, (2, 0, 1)), lambda x: x.transpose(2, 0, 1)),
    "permute negative": (lambda t: zyx.permute_dims(t, (-1, 1, 0)), lambda x: x.transpose(2, 1, 0)),
    "matrix_transpose": (zyx.matrix_transpose, lambda x: np.swapaxes(x, -1, -2)),
    "expand_dims": (lambda t: zyx.expand_dims(t, axis=(0, -1)), lambda x: x[None, ..., None]),
    "squeeze": (lambda t: zyx.squeeze(t, 1), lambda x: x.squeeze(1)),
    "squeeze negative": (lambda t: zyx.squeeze(t, axis=-2), lambda x: x.squeeze(-2)),
    "broadcast_to": (
        lambda t: zyx.broadcast_to(t, (2, 3, 5, 4)),
        lambda x: np.broadcast_to(x, (2, 3, 5, 4)),
    ),
    "flip all": (zyx.flip, np.flip),
    "flip axes": (lambda t: zyx.flip(t, axis=(0, -1)), lambda x: np.flip(x, (0, -1))),
    "moveaxis": (lambda t: zyx.moveaxis(t, 0, -1), lambda x: np.moveaxis(x, 0, -1)),
    "moveaxis many": (
        lambda t: zyx.moveaxis(t, (0, 2), (1, 0)),
        lambda x: np.moveaxis(x, (0, 2), (1, 0)),
    ),
    "roll": (lambda t: zyx.roll(t, 1, axis=-1), lambda x: np.roll(x, 1, -1)),
    "roll many": (
        lambda t: zyx.roll(t, (-2, 5), axis=(2, 0)),
        lambda x: np.roll(x, (-2, 5), (2, 0)),
    ),
    "roll flat": (lambda t: zyx.roll(t, 5), lambda x: np.roll(x, 5)),
    "tile": (lambda t: zyx.tile(t, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3))),
    "tile more dims": (lambda t: zyx.tile(t, (2, 1, 1, 2)), lambda x: np.tile(x, (2, 1, 1, 2))),
    "repeat": (lambda t: zyx.repeat(t, 2, axis=-1), lambda x: np.repeat(x, 2, -1)),
    "repeat flat": (lambda t: zyx.repeat(t, 3), lambda x: np.repeat(x, 3)),
    "steps": (lambda t: t[::-2, :, 1::2], lambda x: x[::-2, :, 1::2]),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_match_numpy_on_every_dtype(array_device: Device, name: str) -> None:
    ours, numpys = VIEWS[name]
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, ALL, ARITHMETIC):
            x = _values(dtype=dtype)
            expect(ours(strided(array_device, x)), numpys(x), dtype, f"{name} {dtype.value}")


def test_reshape_of_a_strided_array_mixes_dims_in_row_major_order(array_device: Device) -> None:
    x = _values((4, 6), seed=1)
    with Expect(array_device) as expect:
        for shape in ((24,), (3, 8), (2, 2, 6), (6, 1, 4), (-1, 3)):
            expect(
                zyx.reshape(strided(array_device, x), shape),
                x.reshape(shape),
                DType.F32,
                f"{shape}",
            )
        transposed = zyx.reshape(zyx.matrix_transpose(on(array_device, x)), (3, 8))
        expect(transposed, x.T.reshape(3, 8), DType.F32, "reshape of a transpose")
        twice = zyx.reshape(zyx.reshape(on(array_device, x)[:, ::2], (12,))[::-1], (2, 6))
        expect(
            twice, x[:, ::2].reshape(12)[::-1].reshape(2, 6), DType.F32, "reshape, flip, reshape"
        )


def test_size_zero_dims_survive_every_view(array_device: Device) -> None:
    t = on(array_device, np.zeros((0, 1, 3), np.float32))
    assert zyx.reshape(t, (3, 0)).shape == (3, 0)
    assert zyx.reshape(t, (-1, 3)).shape == (0, 3)
    assert zyx.permute_dims(t, (2, 0, 1)).shape == (3, 0, 1)
    assert zyx.broadcast_to(t, (2, 0, 4, 3)).shape == (2, 0, 4, 3)
    assert zyx.flip(t).numpy().shape == (0, 1, 3)
    assert zyx.roll(t, 2, axis=0).shape == (0, 1, 3)
    assert zyx.tile(t, (2, 2, 2)).numpy().shape == (0, 2, 6)
    assert zyx.concat([t, t], axis=2).numpy().shape == (0, 1, 6)
    assert zyx.squeeze(t, 1).shape == (0, 3)


@pytest.mark.parametrize("axis", [0, -1, 1, None])
def test_concat_matches_numpy_and_promotes(array_device: Device, axis: int | None) -> None:
    rng = np.random.default_rng(2)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, ALL, ARITHMETIC):
            sizes = [2, 1, 3]
            parts = [data(rng, _with(SHAPE, axis, n), dtype) for n in sizes]
            got = zyx.concat([strided(array_device, p) for p in parts], axis=axis)
            expect(got, np.concatenate(parts, axis=axis), dtype, f"concat {dtype.value}")
        a, b = data(rng, (2, 3), DType.I8), data(rng, (2, 3), DType.I32)
        got = zyx.concat([on(array_device, a), on(array_device, b)], axis=axis)
        expect(got, np.concatenate([a, b], axis=axis), DType.I32, "int8 and int32 promote")


def _with(shape: tuple[int, ...], axis: int | None, n: int) -> tuple[int, ...]:
    """``shape`` with ``n`` along ``axis`` (flattened concat: ``n`` rows)."""
    if axis is None:
        return (n, 2)
    out = list(shape)
    out[axis] = n
    return tuple(out)


def test_concat_of_one_array_and_with_empty_parts(array_device: Device) -> None:
    x = _values((2, 3), seed=3)
    empty = np.zeros((0, 3), np.float32)
    with Expect(array_device) as expect:
        expect(zyx.concat([on(array_device, x)]), x, DType.F32, "one part")
        parts = [on(array_device, empty), on(array_device, x), on(array_device, empty)]
        expect(zyx.concat(parts), x, DType.F32, "empty parts")


def test_empty_parts_are_never_read_outside_their_memory() -> None:
    """On the bounds-checked host: a concat's empty part is padding around nothing, and a
    take along an empty axis has no element to clamp to (both loaded element 0 of a buffer
    of none)."""
    device = checked_host()
    x = _values((2, 3), seed=10)
    empty = on(device, np.zeros((2, 0), np.float32))
    with Expect(device, per_kernel=1) as expect:
        got = zyx.concat([on(device, x), empty, zyx.flip(on(device, x), axis=1)], axis=1)
        expect(got, np.concatenate([x, x[:, ::-1]], axis=1), DType.F32, "concat with an empty part")
        nothing = on(device, np.zeros((0, 2), np.float32))
        taken = zyx.take(nothing, on(device, np.array([0, 1])), axis=0)
        assert taken.shape == (2, 2)
        expect(zyx.sum(taken) * 0, 0.0, DType.F32, "take along an empty axis")


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_stack_and_unstack_match_numpy(array_device: Device, axis: int) -> None:
    rng = np.random.default_rng(4)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, (DType.F32, DType.I16, DType.BOOL), ARITHMETIC):
            parts = [data(rng, (2, 3), dtype) for _ in range(3)]
            stacked = zyx.stack([strided(array_device, p) for p in parts], axis=axis)
            want = np.stack(parts, axis=axis)
            expect(stacked, want, dtype, f"stack {dtype.value}")
            pieces = zyx.unstack(stacked, axis=axis)
            assert isinstance(pieces, tuple) and len(pieces) == 3
            for i, piece in enumerate(pieces):
                expect(piece, parts[i], dtype, f"unstack {dtype.value} [{i}]")


def test_broadcast_arrays_match_numpy(array_device: Device) -> None:
    a, b, c = _values((3, 1), seed=5), _values((1, 4), seed=6), _values((), seed=7)
    got = zyx.broadcast_arrays(*(on(array_device, v) for v in (a, b, c)))
    want = np.broadcast_arrays(a, b, c)
    assert len(got) == 3
    with Expect(array_device) as expect:
        for i, (g, w) in enumerate(zip(got, want)):
            expect(g, w, DType.F32, f"broadcast_arrays [{i}]")


def test_repeat_by_an_array_of_counts(array_device: Device) -> None:
    x = _values((3, 4), seed=8)
    counts = np.array([2, 0, 3], np.int64)
    with Expect(array_device) as expect:
        got = zyx.repeat(strided(array_device, x), on(array_device, counts), axis=0)
        expect(got, np.repeat(x, counts, axis=0), DType.F32, "repeat rows")
        flat = zyx.repeat(on(array_device, x[0]), on(array_device, np.array([1, 2, 0, 1])))
        expect(flat, np.repeat(x[0], [1, 2, 0, 1]), DType.F32, "repeat 1-D")


# ---- errors ---------------------------------------------------------------------------------


def _array(device: Device, shape: tuple[int, ...] = (2, 3)) -> Tensor:
    return on(device, np.ones(shape, np.float32))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda t: zyx.reshape(t, (4, 2)), ValueError, r"cannot reshape \(2, 3\).*into \(4, 2\)"),
        (lambda t: zyx.reshape(t, (-1, -1)), ValueError, "invalid shape"),
        (lambda t: zyx.reshape(t, (4, -1)), ValueError, r"cannot reshape \(2, 3\) into \(4, -1\)"),
        (lambda t: zyx.permute_dims(t, (0, 0)), ValueError, "not a permutation of 2 dims"),
        (lambda t: zyx.permute_dims(t, (0, 2)), IndexError, "axis 2 is out of range for a 2-D"),
        (lambda t: zyx.squeeze(t, 0), ValueError, r"axis 0 of shape \(2, 3\) has size 2"),
        (
            lambda t: zyx.broadcast_to(t, (3, 3)),
            ValueError,
            r"\(2, 3\) and \(3, 3\) do not broadcast",
        ),
        (lambda t: zyx.broadcast_to(t, (3,)), ValueError, r"\(2, 3\) does not broadcast to \(3,\)"),
        (lambda t: zyx.flip(t, axis=-3), IndexError, "axis -3 is out of range"),
        (lambda t: zyx.expand_dims(t, axis=3), IndexError, "axis 3 is out of range for a 3-D"),
        (lambda t: zyx.concat([t, zyx.ones((2, 4))], axis=0), ValueError, "differ off axis 0"),
        (lambda t: zyx.concat([t, zyx.ones(2)]), ValueError, "differ in rank"),
        (lambda t: zyx.concat([]), ValueError, "at least one array"),
        (lambda t: zyx.stack([t, zyx.ones((3, 2))]), ValueError, "differ"),
        (lambda t: zyx.roll(t, (1, 2), axis=0), ValueError, "2 shifts for 1 axes"),
        (lambda t: zyx.tile(t, (-1,)), ValueError, "negative repetitions"),
        (lambda t: zyx.repeat(t, -1), ValueError, "negative repeats"),
        (lambda t: zyx.moveaxis(t, (0, 1), 0), ValueError, "do not pair up"),
        (lambda t: zyx.matrix_transpose(t[0]), ValueError, "at least 2 dims"),
        (lambda t: zyx.concat([t, zyx.ones((2, 3), dtype=zyx.int32)]), TypeError, "do not promote"),
    ],
)
def test_bad_arguments_are_errors_that_name_shapes_and_axes(
    call: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call(_array(zyx.device()))


HUGE = 1 << 40
"""A dim of which an array of two is more than its kernels can index (2**63 - 1 elements)."""


@pytest.mark.parametrize(
    "call",
    [
        lambda x: zyx.broadcast_to(x, (HUGE, HUGE)),
        lambda x: zyx.reshape(x, (HUGE, 1)) + zyx.reshape(x, (1, HUGE)),
        lambda x: zyx.meshgrid(x, x)[0],
        lambda x: zyx.tile(x, (HUGE,)),
        lambda x: zyx.repeat(x, HUGE),
        lambda x: zyx.concat([zyx.broadcast_to(x[:1], (1 << 62,))] * 3),
        lambda x: zyx.matmul(zyx.reshape(x, (HUGE, 1)), zyx.reshape(x, (1, HUGE))),
        lambda x: zyx.tensordot(x, x, axes=0),
        lambda x: zyx.take(
            zyx.broadcast_to(x[:1], (HUGE, 2)), zyx.zeros(HUGE, dtype=zyx.int64), axis=1
        ),
    ],
)
def test_a_shape_past_what_kernels_index_is_an_error_at_the_op(call: Any) -> None:
    """Shapes that outgrow their sources (broadcasts, tiles, concats, outer products,
    gathers) are checked as creation's are: at the op, not as a kernel's argument."""
    x = zyx.broadcast_to(zyx.ones(1), (HUGE,))
    with pytest.raises(ValueError, match="more than an array can hold"):
        call(x)


# ---- views cost no copy ------------------------------------------------------------------


def test_a_chain_of_every_kind_of_view_costs_no_copy_kernel(array_device: Device) -> None:
    """reshape, permute, broadcast, slices with steps, flip and pad, one after another, are
    index arithmetic: the kernel of their consumer reads the source through them, and it is
    the only kernel that runs."""
    x = _values((4, 6), seed=9)
    t = on(array_device, x)
    chain = zyx.reshape(t, (2, 12))  # a reshape of a contiguous array
    chain = zyx.permute_dims(chain, (1, 0))  # (12, 2)
    chain = zyx.broadcast_to(zyx.expand_dims(chain, axis=0), (3, 12, 2))
    chain = chain[:, 1::3, ::-1]  # steps, a negative one
    chain = zyx.flip(chain, axis=0)
    chain = Tensor(padded(chain.node, 1, 2, 1))  # (3, 7, 2): zeros around dim 1
    chain = zyx.concat([chain, chain[:1]], axis=0)  # a concat is views and one select
    want = np.broadcast_to(x.reshape(2, 12).T[None], (3, 12, 2))[:, 1::3, ::-1][::-1]
    want = np.pad(want, ((0, 0), (2, 1), (0, 0)))
    want = np.concatenate([want, want[:1]], axis=0)
    before = zyx.stats()
    result = zyx.exp(chain)
    out = result.numpy()
    ran = zyx.stats() - before
    assert (ran.realizes, ran.launches, ran.copies) == (1, 1, 0), ran
    np.testing.assert_allclose(out, np.exp(want), rtol=1e-5)
