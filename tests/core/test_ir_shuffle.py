"""``Shuffle``: a warp's register exchange, in the IR and in the reductions lowered with it.

The interpreter runs it (CI has no GPU): each work-item's value from lane ``lane ^ mask``.
Reduce kernels lowered for a device whose warps exchange registers combine each warp's
values by shuffles; here they run in the interpreter against numpy in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.dtypes import DType
from zyx.errors import BackendError, IRError
from zyx.graph.lower import KernelSpec, Lowerer
from zyx.graph.nodes import Node, Op
from zyx.graph.schedule import Graph, schedule
from zyx.host.codegen import HostDialect
from zyx.ir import Kernel, KernelBuilder, ParamKind, Shuffle, check_limits
from zyx.ir.interpreter import interpret
from zyx.testing.devices import gpu_info
from zyx.testing.numerics import Array, assert_close

GPU = gpu_info(shuffle=True)


def exchange(mask: int, local: int = 64, dtype: DType = DType.F32) -> Kernel:
    """``out[i] = x[i]`` of lane ``lane ^ mask`` (one group of ``local``)."""
    kb = KernelBuilder("exchange")
    x = kb.param(dtype, ParamKind.GLOBAL)
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    i = kb.local(0, local)
    out[i] = kb.shuffle(x[i], mask)
    return kb.build()


@pytest.mark.parametrize("mask", [1, 2, 16, 31])
@pytest.mark.parametrize("dtype", [DType.F32, DType.I64, DType.BOOL], ids=str)
def test_interpreter_takes_each_value_from_lane_xor_mask(mask: int, dtype: DType) -> None:
    x = (np.arange(64) * 7 % 5 == 0) if dtype is DType.BOOL else np.arange(64) * 3 - 50
    x = x.astype(dtype.numpy)
    out = np.zeros_like(x)
    interpret(exchange(mask, dtype=dtype), [x, out])
    np.testing.assert_array_equal(out, x[np.arange(64) ^ mask])


def _refused(build: Callable[[KernelBuilder], None], message: str) -> None:
    kb = KernelBuilder("bad")
    with pytest.raises(IRError, match=message):
        build(kb)
        kb.build()


def test_verifier_refuses_a_shuffle_inside_if() -> None:
    def inside_if(kb: KernelBuilder) -> None:
        out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
        i = kb.local(0, 32)
        with kb.if_(i < 16):
            out[i] = kb.shuffle(kb.cast(i, DType.F32), 1)

    _refused(inside_if, "Shuffle inside an If")


def test_verifier_refuses_partial_warps_and_masks_past_a_warp() -> None:
    def partial(kb: KernelBuilder) -> None:
        out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
        i = kb.local(0, 48)
        out[i] = kb.shuffle(kb.cast(i, DType.F32), 1)

    def past(kb: KernelBuilder) -> None:
        out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
        i = kb.local(0, 64)
        out[i] = kb.shuffle(kb.cast(i, DType.F32), 32)

    _refused(partial, "not whole warps of 32")
    _refused(past, "lane mask 32: an int from 1 to 31")


def test_limits_and_the_c_dialects_refuse_devices_without_register_exchange() -> None:
    kernel = exchange(1)
    check_limits(kernel, GPU)
    with pytest.raises(IRError, match="warps of 32 that exchange registers; gpu has warps "):
        check_limits(kernel, replace(GPU, shuffle=False))
    with pytest.raises(BackendError, match="the host-c dialect renders no Shuffle"):
        HostDialect().render(kernel)


# ---- reductions lowered with shuffles -----------------------------------------------------


def _run(program: Callable[[Any], Any], values: Array, local: int) -> Array:
    """``program`` of ``values`` lowered as for a device whose warps exchange registers,
    each kernel (a reduction's stages too) run in the interpreter."""
    x = zyx.asarray(values, device="host")
    target = program(x).node
    sched = schedule(Graph([target]))
    held: dict[int, Array] = {id(x.node): values.ravel()}
    for spec in sched.steps:
        assert isinstance(spec, KernelSpec)
        out = spec.output

        def is_input(n: Node, out: Node = out) -> bool:
            return n is not out and (n.realized or id(n) in sched.boundaries)

        lowerer = Lowerer(spec, is_input, local)
        lowerer.shuffle = True
        lowered = lowerer.lower()
        assert any(isinstance(op, Shuffle) for op in lowered.kernel.ops) == spec.group
        held[id(out)] = np.zeros(out.size, out.dtype.numpy)
        args = [_arg(a, held) for a in lowered.args]
        interpret(lowered.kernel, args)
    return held[id(target)].reshape(target.shape)


def _arg(arg: Any, held: dict[int, Array]) -> Any:
    if not isinstance(arg, Node):
        return arg
    return arg.arg if arg.op is Op.SCALAR else held[id(arg)]


def _softmax(x: Any) -> Any:
    e = zyx.exp(x - zyx.max(x, axis=1, keepdims=True))
    return e / zyx.sum(e, axis=1, keepdims=True)


def _softmax_ref(x: Array) -> Array:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


PROGRAMS = {
    "softmax": (_softmax, _softmax_ref),
    "row sum": (lambda x: zyx.sum(x, axis=1), lambda x: x.sum(axis=1)),
    "row max": (lambda x: zyx.max(x, axis=1), lambda x: x.max(axis=1)),
    "argmax": (lambda x: zyx.argmax(x, axis=1), lambda x: x.argmax(axis=1)),
    "total": (zyx.sum, np.sum),
}


@pytest.mark.parametrize("local", [32, 64, 256, 1024])
@pytest.mark.parametrize("cols", [5, 256, 300, 5000])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_reductions_by_shuffles_match_numpy(name: str, cols: int, local: int) -> None:
    """Rows resident (masked, and filling their slots), rows looped over, a total in two
    stages; values with ties for the argmax (its first index), and a NaN row for the max."""
    program, reference = PROGRAMS[name]
    rng = np.random.default_rng(cols + local)
    shape = (700, 300) if name == "total" else (3, cols)
    values = rng.integers(-20, 20, shape).astype(np.float32) / 4
    if name == "row max":
        values[1, cols // 2] = np.nan
    got = _run(program, values, local)
    want = reference(values.astype(np.float64))
    if name in ("argmax", "row max"):  # exact, a NaN where numpy has one
        np.testing.assert_array_equal(got, want)
    else:
        assert_close(got, want, DType.F32, f"{name} of {shape} by groups of {local}")
