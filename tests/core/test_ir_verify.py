"""The verifier rejects malformed kernels with a message saying what and where."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zyx.backend import DeviceInfo
from zyx.dtypes import DType
from zyx.errors import IRError
from zyx.ir import (
    Binary,
    BOp,
    Const,
    Define,
    EndIf,
    EndLoop,
    Kernel,
    KernelBuilder,
    Loop,
    Param,
    ParamKind,
    Range,
    Scope,
    Storage,
    SymDim,
    UOp,
    Where,
    ceil_div,
    check_limits,
    verify,
)


def _add_kernel() -> Kernel:
    kb = KernelBuilder("add")
    a, b = kb.param(DType.F32), kb.param(DType.F32)
    c = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable()
    i = kb.group(0, ceil_div(n, 64)) * 64 + kb.local(0, 64)
    with kb.if_(i < n):
        c[i] = a[i] + b[i]
    return kb.build()


def test_builder_example_verifies_and_derives_sizes() -> None:
    kernel = _add_kernel()
    assert kernel.global_size == (SymDim(3, 64), 1, 1)
    assert kernel.local_size == (64, 1, 1)
    assert [p.kind for p in kernel.params] == [
        ParamKind.GLOBAL, ParamKind.GLOBAL, ParamKind.GLOBAL_MUT, ParamKind.VARIABLE,
    ]  # fmt: skip


def test_symdim_evaluates_ceiling() -> None:
    assert SymDim(0, 64).evaluate([1000]) == 16
    assert SymDim(0, 64).evaluate([1024]) == 16
    assert SymDim(0, 64).evaluate([1025]) == 17


def _fails(build: Callable[[KernelBuilder], None], *fragments: str) -> None:
    kb = KernelBuilder("bad")
    build(kb)
    with pytest.raises(IRError) as info:
        kb.build()
    for fragment in fragments:
        assert fragment in str(info.value)


def test_type_mismatch_names_both_dtypes() -> None:
    def build(kb: KernelBuilder) -> None:
        a = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
        i = kb.group(0, 4)
        kb.binary(BOp.ADD, a[i], kb.const(1, DType.I32))

    _fails(build, "operand dtypes differ: f32 vs i32", "op %")


@pytest.mark.parametrize(
    "dtypes, message",
    [
        ((DType.F32, DType.F32, DType.F64), "Fma operand dtypes differ: f32, f32, f64"),
        ((DType.F16,) * 3, "Fma of f16: f32 and f64 only"),
        ((DType.I32,) * 3, "Fma of i32: f32 and f64 only"),
    ],
)
def test_fma_needs_one_dtype_of_f32_or_f64(dtypes: tuple[DType, ...], message: str) -> None:
    def build(kb: KernelBuilder) -> None:
        i = kb.group(0, 4)
        a, b, c = (kb.param(d)[i] for d in dtypes)
        kb.fma(a, b, c)

    _fails(build, message, "op %")


def test_store_to_read_only_param() -> None:
    def build(kb: KernelBuilder) -> None:
        a = kb.param(DType.F32)
        i = kb.group(0, 4)
        a[i] = 1.0

    _fails(build, "read-only Global param %0", "GlobalMut")


def test_use_before_definition() -> None:
    kernel = Kernel(
        "bad", (Param(DType.I64, ParamKind.VARIABLE), Binary(BOp.ADD, 0, 2), Const(DType.I64, 1))
    )
    with pytest.raises(IRError, match=r"op %1 .*%2 is used before it is defined"):
        verify(kernel)


def test_value_used_outside_its_loop() -> None:
    def build(kb: KernelBuilder) -> None:
        out = kb.param(DType.I64, ParamKind.GLOBAL_MUT)
        with kb.loop(4) as j:
            pass
        out[0] = j

    _fails(build, "used outside the loop or if that defines it")


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ((Const(DType.I64, 4), Loop(0)), "Loop at %1 is never closed"),
        ((Const(DType.I64, 4), EndLoop()), "EndLoop without a matching Loop"),
        ((Const(DType.BOOL, True), EndIf()), "EndIf without a matching If"),
    ],
)
def test_unbalanced_scopes(ops: tuple[object, ...], message: str) -> None:
    with pytest.raises(IRError, match=message):
        verify(Kernel("bad", ops))  # type: ignore[arg-type]


def test_barrier_inside_if() -> None:
    def build(kb: KernelBuilder) -> None:
        lid = kb.local(0, 32)
        with kb.if_(lid < 16):
            kb.barrier()

    _fails(build, "barrier inside an If")


def test_math_on_integers_is_rejected() -> None:
    def build(kb: KernelBuilder) -> None:
        kb.unary(UOp.EXP, kb.group(0, 2))

    _fails(build, "exp needs a float operand, got i64")

    def build_binary(kb: KernelBuilder) -> None:
        g = kb.group(0, 2)
        kb.binary(BOp.NEXTAFTER, g, g)

    _fails(build_binary, "nextafter needs float operands, got i64")


@pytest.mark.parametrize("op", [op for op in UOp if op.is_float_only], ids=lambda op: op.value)
def test_every_float_function_rejects_integers(op: UOp) -> None:
    def build(kb: KernelBuilder) -> None:
        kb.unary(op, kb.group(0, 2))

    _fails(build, f"{op.value} needs a float operand")


def test_min_is_defined_on_every_dtype() -> None:
    kb = KernelBuilder("min")
    kb.minimum(kb.group(0, 2), 1)
    kb.minimum(kb.const(True, DType.BOOL), False)
    kb.build()


def test_where_needs_a_bool_condition_and_choices_of_one_dtype() -> None:
    def wrong_condition(kb: KernelBuilder) -> None:
        g = kb.group(0, 2)
        kb.where(g, g, g)

    _fails(wrong_condition, "condition %0 has dtype i64, expected bool")
    with pytest.raises(IRError, match="choice dtypes differ: i64 vs f32; insert a Cast"):
        ops = (Const(DType.BOOL, True), Const(DType.I64, 1), Const(DType.F32, 1.0))
        verify(Kernel("bad", (*ops, Where(0, 1, 2))))


def test_where_takes_python_numbers_in_the_other_choices_dtype() -> None:
    kb = KernelBuilder("where")
    x = kb.param(DType.F16)
    v = x[kb.local(0, 2)]
    chosen = kb.where(v < 0, 0, v)
    assert chosen.dtype is DType.F16
    assert "Where(%" in str(kb.build())


def test_duplicate_range_and_bad_local_size() -> None:
    with pytest.raises(IRError, match="a second Group range on axis 0"):
        verify(Kernel("bad", (Range(0, Scope.GROUP, 2), Range(0, Scope.GROUP, 2))))
    with pytest.raises(IRError, match="local size must be a constant"):
        ops = (Param(DType.I64, ParamKind.VARIABLE), Range(0, Scope.LOCAL, SymDim(0)))
        verify(Kernel("bad", ops))


def test_symdim_must_name_an_integer_variable() -> None:
    ops = (Param(DType.F32, ParamKind.GLOBAL), Range(0, Scope.GROUP, SymDim(0, 4)))
    with pytest.raises(IRError, match="not a Variable"):
        verify(Kernel("bad", ops))


@pytest.mark.parametrize(
    "ops",
    [
        (Range(0, Scope.GROUP, 2.5),),
        (Range(0, Scope.GROUP, float("nan")),),
        (Range(0, Scope.GROUP, float("inf")),),
        (Range(0, Scope.LOCAL, 2.0),),
        (Range(0, Scope.GROUP, True),),
        (Range(True, Scope.GROUP, 2),),
        (Param(DType.I64, ParamKind.VARIABLE), Range(0, Scope.GROUP, SymDim(0, 2.5))),
        (Param(DType.I64, ParamKind.VARIABLE), Range(0, Scope.GROUP, SymDim(0.0))),
        (Define(DType.F32, Storage.REGISTER, 2.5),),
    ],
    ids=repr,
)
def test_sizes_lengths_and_axes_must_be_ints(ops: tuple[object, ...]) -> None:
    """A float size ran ceil(size) groups on the host, a NameError (nan) or a C compile
    error (inf) elsewhere: the verifier refuses it when the kernel is built."""
    with pytest.raises(IRError, match="int|axis must be|not a Variable|SymDim needs"):
        verify(Kernel("bad", ops))


def test_the_builder_refuses_a_float_group_count() -> None:
    kb = KernelBuilder("g")
    kb.group(0, 2.5)
    with pytest.raises(IRError, match="range size 2.5 is not a positive int"):
        kb.build()


def test_constant_of_wrong_python_type() -> None:
    with pytest.raises(IRError, match="1.5 is not a i32 constant"):
        verify(Kernel("bad", (Const(DType.I32, 1.5),)))


def _info(max_threads: int, local_mem: int, private_mem: int = 1 << 30) -> DeviceInfo:
    return DeviceInfo(
        name="tiny",
        compute=1e9,
        max_global_work_dims=(2**31, 2**16, 2**16),
        max_local_threads=max_threads,
        max_local_work_dims=(max_threads, 64, 64),
        local_mem_size=local_mem,
        max_register_bytes=256,
        preferred_vector_size=16,
        warp_size=1,
        global_mem_size=2**30,
        private_mem_size=private_mem,
    )


def test_local_size_over_device_limit_names_the_limit() -> None:
    kb = KernelBuilder("wide")
    kb.local(0, 512)
    kernel = kb.build()
    with pytest.raises(IRError, match="512 work-items, over tiny's limit of 256"):
        check_limits(kernel, _info(256, 1 << 16))
    check_limits(kernel, _info(1024, 1 << 16))


def test_local_memory_over_device_limit() -> None:
    kb = KernelBuilder("hungry")
    kb.define(DType.F32, 1024, Storage.LOCAL)
    kernel = kb.build()
    with pytest.raises(IRError, match="needs 4096 bytes of local memory, tiny has 1024"):
        verify(kernel, _info(256, 1024))


def test_register_arrays_over_device_limit_count_every_work_item_of_a_group() -> None:
    """A CPU holds a group's register arrays on one thread's stack: 4,000,000 f32 of them
    segfaulted at launch on the host and on PoCL."""
    kb = KernelBuilder("registers")
    kb.local(0, 64)
    kb.define(DType.F32, 1000)
    kb.define(DType.F64, 12)
    kernel = kb.build()
    with pytest.raises(IRError, match=r"4096 bytes .* 262144 for a group of 64, over tiny's limit"):
        check_limits(kernel, _info(256, 1024, private_mem=262143))
    check_limits(kernel, _info(256, 1024, private_mem=262144))


def test_constant_group_count_over_device_limit_names_the_limit() -> None:
    kb = KernelBuilder("many")
    kb.group(1, 2**16 + 1)
    with pytest.raises(IRError, match="65537 work-groups on axis 1 is over tiny's limit of 65536"):
        check_limits(kb.build(), _info(256, 1 << 16))


def test_a_long_chain_of_ops_builds_without_recursion() -> None:
    kb = KernelBuilder("chain")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    i = kb.local(0, 4)
    value = x[i]
    for _ in range(5000):  # far past Python's recursion limit
        value = value + 1.0
    out[i] = value
    kernel = kb.build()
    assert kernel.dtype_of(len(kernel.ops) - 2) is DType.F32
