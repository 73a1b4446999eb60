"""``zyx.ir.Mma``, a warp's tensor-core matrix multiply-accumulate, and ``zyx.ir.LdMatrix``,
its fragments' load from local memory: what the verifier and the device limits accept, and
their meaning in the interpreter (warps of 32 work-items emulated) against numpy. The CUDA
rendering is tests/cuda/test_cuda_mma.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from zyx.backend import DeviceInfo
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import BackendError, ErrorStatus, IRError
from zyx.host.codegen import HostDialect
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir import KernelBuilder, Mma, ParamKind, Storage, Value, check_limits
from zyx.ir.interpreter import interpret
from zyx.testing.devices import gpu_info
from zyx.testing.kernels import warp_ldmatrix, warp_mma
from zyx.testing.numerics import Array, assert_close, random

HALVES = [DType.F16, DType.BF16]

GPU = gpu_info(
    tensor_cores=True,
    dtypes={d: DTypeCapability.FULL | DTypeCapability.TENSOR_CORE for d in DType},
)


def operands(dtype: DType, warps: int, seed: int = 0) -> tuple[Array, Array, Array]:
    rng = np.random.default_rng(seed)
    a = random(rng, dtype, warps * 256, -2.0, 2.0)
    b = random(rng, dtype, warps * 128, -2.0, 2.0)
    c = random(rng, DType.F32, warps * 128, -2.0, 2.0)
    return a, b, c


def reference(a: Array, b: Array, c: Array) -> Array:
    warps = c.size // 128
    product = a.astype(np.float64).reshape(warps, 16, 16) @ b.astype(np.float64).reshape(
        warps, 16, 8
    )
    return (c.astype(np.float64) + product.ravel()).reshape(-1)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_interpreter_multiplies_each_warps_matrices(dtype: DType) -> None:
    a, b, c = operands(dtype, warps=3)
    out = c.copy()
    interpret(warp_mma(dtype, warps=3), [a, b, out])
    assert_close(out, reference(a, b, c), DType.F32, f"Mma {dtype}")


def test_interpreter_in_float64_is_exact() -> None:
    a, b, c = operands(DType.BF16, warps=2, seed=1)
    out = c.astype(np.float64)
    kernel = warp_mma(DType.BF16, warps=2)
    interpret(kernel, [a.astype(np.float64), b.astype(np.float64), out], compute=np.float64)
    np.testing.assert_allclose(out, reference(a, b, c), rtol=1e-14, atol=1e-14)


def test_listing_names_fragments_and_offsets() -> None:
    kernel = warp_mma(DType.F16)
    (mma,) = [op for op in kernel.ops if isinstance(op, Mma)]
    assert f"Mma(%{mma.c}, %{mma.a}, %{mma.b}, 0, 0, 0)" in str(kernel)


def _fails(build: Callable[[KernelBuilder], None], fragment: str) -> None:
    kb = KernelBuilder("bad")
    build(kb)
    with pytest.raises(IRError, match=fragment):
        kb.build()


def _fragments(
    kb: KernelBuilder, a: DType = DType.BF16, c: DType = DType.F32, local: int = 64
) -> tuple[Value, Value, Value]:
    kb.local(0, local)
    return kb.define(c, 4), kb.define(a, 8), kb.define(DType.BF16, 4)


def test_verifier_refuses_mma_inside_if() -> None:
    def build(kb: KernelBuilder) -> None:
        c, a, b = _fragments(kb)
        with kb.if_(kb.variable() < 4):
            kb.mma(c, a, b)

    _fails(build, "Mma inside an If")


def test_verifier_refuses_partial_warps() -> None:
    def build(kb: KernelBuilder) -> None:
        kb.mma(*_fragments(kb, local=48))

    _fails(build, r"local size \(48, 1, 1\): not whole warps of 32")


@pytest.mark.parametrize(
    ("a", "c", "message"),
    [
        (DType.F32, DType.F32, "f16 or bf16 fragments of one dtype, got f32 and bf16"),
        (DType.F16, DType.F32, "of one dtype, got f16 and bf16"),
        (DType.BF16, DType.F16, "accumulates in f32, got a f16 fragment"),
    ],
)
def test_verifier_refuses_fragment_dtypes(a: DType, c: DType, message: str) -> None:
    _fails(lambda kb: kb.mma(*_fragments(kb, a=a, c=c)), message)


def test_verifier_refuses_fragments_past_their_define() -> None:
    def build(kb: KernelBuilder) -> None:
        c, a, b = _fragments(kb)
        kb.mma(c, a, b, a_at=1)

    _fails(build, "fragment a at 1: 8 elements from it do not fit in %2's 8")


def test_verifier_refuses_fragments_outside_registers() -> None:
    def build(kb: KernelBuilder) -> None:
        c, a, _ = _fragments(kb)
        kb.mma(c, a, kb.define(DType.BF16, 4, Storage.LOCAL))

    _fails(build, "fragment b %4 is not a register Define")

    def from_buffer(kb: KernelBuilder) -> None:
        buffer = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
        _, a, b = _fragments(kb)
        kb.mma(buffer, a, b)

    _fails(from_buffer, "fragment c %0 is not a register Define")


@pytest.mark.parametrize(
    ("info", "message"),
    [
        (replace(GPU, warp_size=1, tensor_cores=False), "warps of 32 and tensor cores; gpu has "
         "warps of 1 and no tensor cores"),
        (replace(GPU, dtypes={DType.F16: DTypeCapability.FULL}), "no tensor cores for f16"),
        (replace(GPU, compute_capability=(7, 5)), "needs compute capability 8.0, gpu has 7.5"),
    ],
)  # fmt: skip
def test_limits_refuse_devices_without_tensor_cores(info: DeviceInfo, message: str) -> None:
    kernel = warp_mma(DType.F16)
    check_limits(kernel, GPU)
    with pytest.raises(IRError, match=message):
        check_limits(kernel, info)


def test_host_refuses_to_compile_mma() -> None:
    kernel = warp_mma(DType.BF16)
    with pytest.raises(BackendError) as info:
        HostDevice(HostPool()).compile(kernel)
    assert info.value.status is ErrorStatus.KERNEL_COMPILATION
    assert "warps of 32" in str(info.value)
    with pytest.raises(BackendError, match="the host-c dialect renders no Mma"):
        HostDialect().render(kernel)


def ldmatrix_reference(x: Array, count: int, trans: bool) -> Array:
    """What each lane holds after ``warp_ldmatrix``: of matrix ``j``, row ``l / 4`` at
    columns ``2 * (l % 4)`` and the next (``trans``: column ``l / 4`` at those rows)."""
    matrices = x.reshape(count, 8, 8)
    if trans:
        matrices = matrices.transpose(0, 2, 1)
    held = np.empty((32, count, 2), x.dtype)
    for lane in range(32):
        held[lane] = matrices[:, lane // 4, lane % 4 * 2 : lane % 4 * 2 + 2]
    return held.reshape(-1)


@pytest.mark.parametrize("trans", [False, True], ids=["rows", "trans"])
@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_interpreter_spreads_ldmatrix_rows_over_lanes(
    dtype: DType, count: int, trans: bool
) -> None:
    x = random(np.random.default_rng(count), dtype, 64 * count, -2.0, 2.0)
    out = np.zeros(64 * count, dtype.numpy)
    interpret(warp_ldmatrix(dtype, count, trans), [x, out])
    np.testing.assert_array_equal(out, ldmatrix_reference(x, count, trans))


def _ldmatrix(
    kb: KernelBuilder, count: int = 4, dst: DType = DType.BF16, storage: Storage = Storage.LOCAL
) -> None:
    kb.local(0, 32)
    held = kb.define(dst, 8)
    tile = kb.define(DType.BF16, 256, storage)
    kb.ldmatrix(held, tile, kb.const(0, DType.I64), count)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda kb: _ldmatrix(kb, count=3), "LdMatrix of 3 matrices: 1, 2 or 4"),
        (lambda kb: _ldmatrix(kb, dst=DType.F32), "LdMatrix loads f16 or bf16, got f32"),
        (lambda kb: _ldmatrix(kb, dst=DType.F16), "source %2 has dtype bf16, expected f16"),
        (
            lambda kb: _ldmatrix(kb, storage=Storage.REGISTER),
            r"source %2 \(bf16\) is not a local Define",
        ),
    ],
    ids=["count", "dtype", "mixed", "registers"],
)
def test_verifier_refuses_malformed_ldmatrix(
    build: Callable[[KernelBuilder], None], message: str
) -> None:
    _fails(build, message)


def test_verifier_refuses_ldmatrix_past_its_fragment() -> None:
    def build(kb: KernelBuilder) -> None:
        kb.local(0, 32)
        held, tile = kb.define(DType.BF16, 8), kb.define(DType.BF16, 256, Storage.LOCAL)
        kb.ldmatrix(held, tile, kb.const(0, DType.I64), 4, at=2)

    _fails(build, "fragment dst at 2: 8 elements from it do not fit in %1's 8")
