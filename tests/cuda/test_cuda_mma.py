"""``zyx.ir.Mma`` and ``zyx.ir.LdMatrix`` on CUDA: they render as inline PTX ``mma.sync`` and
``ldmatrix`` that NVRTC compiles for sm_80 and sm_90 (no GPU needed: CI runs these); on a
GPU, each warp's product matches numpy in float64, and each lane holds what the interpreter
says it does (tests/core/test_ir_mma.py). ``zyx.ir.CopyAsync`` renders as ``cp.async`` from
sm_80, plain copies below, and a pipeline of them matches the interpreter's result
(tests/core/test_ir_copies.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

import zyx
from zyx.dtypes import DType
from zyx.graph import matmul
from zyx.graph.claims import matmuls
from zyx.graph.schedule import Graph
from zyx.ir import Kernel, KernelBuilder, ParamKind, Storage, Store
from zyx.ir.interpreter import interpret
from zyx.testing.kernels import staged_copies, staged_copies_expected, warp_ldmatrix, warp_mma
from zyx.testing.numerics import assert_close, poisoned, random

pytest.importorskip("cuda.bindings.nvrtc")

from run_kernel import run_kernel  # noqa: E402

from zyx_cuda.codegen import CudaDialect, in_words  # noqa: E402
from zyx_cuda.compiler import Compiler  # noqa: E402

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = pytest.mark.cuda

HALVES = [DType.F16, DType.BF16]


@pytest.mark.parametrize("arch", [(9, 0), (8, 0)], ids=lambda a: f"sm_{a[0]}{a[1]}")
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_mma_compiles_to_cubin(
    dtype: DType, arch: tuple[int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    source = CudaDialect().render(warp_mma(dtype))
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{dtype.value}.{dtype.value}.f32" in source.code
    assert Compiler(arch).compile(source).format == "cubin"


@pytest.mark.parametrize("trans", [False, True], ids=["rows", "trans"])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_ldmatrix_compiles_to_cubin(
    count: int, trans: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    source = CudaDialect().render(warp_ldmatrix(DType.BF16, count, trans))
    assert (
        f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16" in source.code
    )
    assert Compiler((8, 0)).compile(source).format == "cubin"


@pytest.mark.parametrize("trans", [False, True], ids=["rows", "trans"])
@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_ldmatrix_spreads_rows_as_the_interpreter_does(
    device: CudaDevice, dtype: DType, count: int, trans: bool
) -> None:
    kernel = warp_ldmatrix(dtype, count, trans)
    x = random(np.random.default_rng(count), dtype, 64 * count, -2.0, 2.0)
    want = np.zeros(64 * count, dtype.numpy)
    interpret(kernel, [x, want])
    got = run_kernel(device, kernel, [x, poisoned(dtype, want.size)], 1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_each_warp_multiplies_its_matrices(device: CudaDevice, dtype: DType) -> None:
    rng, warps = np.random.default_rng(0), 4
    a = random(rng, dtype, warps * 256, -2.0, 2.0)
    b = random(rng, dtype, warps * 128, -2.0, 2.0)
    c = random(rng, DType.F32, warps * 128, -2.0, 2.0)
    got = run_kernel(device, warp_mma(dtype, warps), [a, b, c], 2)
    product = a.astype(np.float64).reshape(warps, 16, 16) @ b.astype(np.float64).reshape(
        warps, 16, 8
    )
    assert_close(got, c + product.ravel(), DType.F32, f"Mma {dtype}")


def test_a_matmul_moves_its_operands_as_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From global memory through registers and shared memory into fragments, a and b are
    never converted to float and back (``Kernel.copies``); each f32 output is converted
    once, by its store (``CudaDialect.rounded_by_stores``), not rounded to a float first."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    x = zyx.zeros((256, 256), dtype=zyx.bfloat16, device="host")
    (m,) = matmuls(Graph([zyx.matmul(x, x.mT).node]))
    (launch,) = matmul.build(m, next(v for v in matmul.MMA_VARIANTS if not v.stages))
    kernel = launch.kernel
    assert isinstance(kernel, Kernel)
    source = CudaDialect().render(kernel)
    out = kernel.param_refs[2]
    stores = sum(isinstance(op, Store) and op.dst == out for op in kernel.ops)
    assert "__bfloat162float(" not in source.code
    assert source.code.count("__float2bfloat16_rn(") == stores == 64
    assert Compiler((9, 0)).compile(source).format == "cubin"


@pytest.mark.parametrize("arch", [(9, 0), (8, 0), (7, 5)], ids=lambda a: f"sm_{a[0]}{a[1]}")
@pytest.mark.parametrize(("dtype", "count"), [(DType.BF16, 8), (DType.F32, 1), (DType.F16, 4)],
                         ids=str)  # fmt: skip
def test_copies_compile_to_cp_async(
    dtype: DType, count: int, arch: tuple[int, int], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """``cp.async`` from sm_80 (``.cg`` for 16 bytes), plain copies below it."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    source = CudaDialect().render(staged_copies(dtype, count, 5, 3))
    assert "zyx_copy_async<" in source.code and "zyx_wait_copies<1>()" in source.code
    assert Compiler(arch).compile(source).format == "cubin"


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_a_pipeline_of_copies_matches_the_interpreter(device: CudaDevice, stages: int) -> None:
    count, tiles = 8, 7
    x = random(np.random.default_rng(stages), DType.BF16, tiles * 32 * count, -2.0, 2.0)
    kernel = staged_copies(DType.BF16, count, tiles, stages)
    got = run_kernel(device, kernel, [x, poisoned(DType.BF16, x.size)], 1)
    np.testing.assert_array_equal(got, staged_copies_expected(x, count))


def test_fragments_only_ldmatrix_and_mma_use_are_held_as_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded by LdMatrix and read by Mma only, a fragment is the 32-bit words both take:
    unpacked and packed again, ptxas kept a SHF and a PRMT for each word at each use. A
    fragment also written element by element stays an array of halves."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    kb = KernelBuilder("words")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    lane = kb.local(0, 32)
    tile = kb.define(DType.BF16, 256, Storage.LOCAL)
    tile[lane] = kb.const(1.0, DType.BF16)
    kb.barrier()
    fa, fb, fc = kb.define(DType.BF16, 8), kb.define(DType.BF16, 4), kb.define(DType.F32, 4)
    kb.ldmatrix(fa, tile, lane % 16 * 16, 4)
    kb.ldmatrix(fb, tile, lane % 16 * 16, 2, trans=True)
    fb[3] = kb.const(2.0, DType.BF16)  # written by a store too: halves
    for i in range(4):
        fc[i] = kb.const(0.0, DType.F32)
    kb.mma(fc, fa, fb)
    for i in range(4):
        out[lane * 4 + i] = fc[i]
    kernel = kb.build()
    code = CudaDialect().render(kernel).code
    assert in_words(kernel, fa.ref) and not in_words(kernel, fb.ref)
    assert f"unsigned v{fa.ref}[4];" in code and f'"=r"(v{fa.ref}[3])' in code
    assert f"__nv_bfloat16 v{fb.ref}[4];" in code
    assert Compiler((9, 0)).compile(CudaDialect().render(kernel)).format == "cubin"
