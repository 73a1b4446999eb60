"""Core's generated matmul (``zyx.graph.matmul``) on CUDA: every GPU variant's kernels
compile with NVRTC for sm_90, the default in bf16 and for sm_80 in f16 too, and every
tensor-core (MMA) variant in bf16 and f16 (no GPU needed: CI runs these); on a GPU, each
matches numpy in float64 into poisoned outputs, in f32, f16 and bf16 (f32 accumulation),
the MMA variants in f16 and bf16 (transposed, batched, past a tile and k's step; the
pipelined ones on rows of 16 bytes), and
``zyx.matmul`` takes it where it wins its race (8 x 1024 x 1024 x 512)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

import zyx
from zyx.dtypes import DType
from zyx.graph import matmul
from zyx.ir import Kernel
from zyx.testing.matmul import (
    ALIGNED_CASES,
    CASES,
    Case,
    check_front_end,
    check_variant,
    found,
    operands,
)

pytest.importorskip("cuda.bindings.nvrtc")

from zyx_cuda.codegen import CudaDialect  # noqa: E402
from zyx_cuda.compiler import Compiler  # noqa: E402

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = pytest.mark.cuda

STAGED = tuple(v for v in matmul.MMA_VARIANTS if v.stages)
UNSTAGED = tuple(v for v in matmul.MMA_VARIANTS if not v.stages)


@pytest.mark.parametrize(
    ("arch", "dtype", "variants"),
    [
        ((9, 0), DType.F32, matmul.GPU_VARIANTS),
        ((9, 0), DType.BF16, (matmul.GPU_TILE,)),
        ((8, 0), DType.F16, (matmul.GPU_TILE,)),
        ((9, 0), DType.BF16, matmul.MMA_VARIANTS),
        ((8, 0), DType.F16, UNSTAGED[:1]),
        ((8, 0), DType.F16, STAGED[:1]),
    ],
    ids=[
        "sm_90-f32-all",
        "sm_90-bf16-gpu",
        "sm_80-f16-gpu",
        "sm_90-bf16-mma",
        "sm_80-f16-mma",
        "sm_80-f16-pipelined",
    ],  # fmt: skip
)
def test_gpu_variants_compile(
    arch: tuple[int, int],
    dtype: DType,
    variants: tuple[matmul.Variant, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each on a product it takes: the pipelined ones (``stages``) on rows of 16 bytes, their
    copies ``cp.async``, and with tensor cores their fragments held as the 32-bit words
    ldmatrix and mma.sync take (no unpacking and packing again)."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    compiler = Compiler(arch)
    for variant in variants:
        case = ALIGNED_CASES[0] if variant.stages else CASES[1]
        m = found(zyx.device("host"), case, *operands(np.random.default_rng(0), dtype, case))
        for launch in matmul.build(m, variant):
            assert isinstance(launch.kernel, Kernel)
            source = CudaDialect().render(launch.kernel)
            if variant.stages:
                assert "zyx_copy_async<16>(" in source.code
            if variant.stages and variant.mma:
                assert source.code.count("zyx_pair_bits(") == 1  # defined, never called
            assert compiler.compile(source).format == "cubin"


@pytest.mark.parametrize("variant", matmul.GPU_VARIANTS, ids=str)
def test_every_gpu_variant_matches_numpy(device: CudaDevice, variant: matmul.Variant) -> None:
    """The pipelined ones (``stages``) on rows of 16 bytes, and 512 x 1024 x 2048."""
    cases = (*ALIGNED_CASES, Case((), (), 512, 1024, 2048)) if variant.stages else CASES
    for case in cases:
        check_variant(device, variant, DType.F32, case)


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16, DType.F64], ids=str)
def test_float_dtypes_match_numpy(device: CudaDevice, dtype: DType) -> None:
    for case in CASES:
        check_variant(device, matmul.GPU_TILE, dtype, case)


MMA_CASES = (*CASES, Case((3,), (3,), 300, 260, 100, a_transposed=True, b_transposed=True))
"""Past a 128 x 128 tile in both dims, k past steps of 32, both operands transposed."""


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16], ids=str)
@pytest.mark.parametrize("variant", matmul.MMA_VARIANTS, ids=str)
def test_every_mma_variant_matches_numpy(
    device: CudaDevice, variant: matmul.Variant, dtype: DType
) -> None:
    """The pipelined ones (``stages``) on rows of 16 bytes, which are all they take, and on
    1024 x 2048 x 4096 (128 steps of 32 along k: the pipeline's steady state)."""
    cases = (*ALIGNED_CASES, Case((), (), 1024, 2048, 4096)) if variant.stages else MMA_CASES
    for seed, case in enumerate(cases):
        check_variant(device, variant, dtype, case, seed)


def test_the_default_for_bf16_is_tensor_cores(device: CudaDevice) -> None:
    case = Case((), (), 4096, 4096, 64)
    m = found(device, case, *operands(np.random.default_rng(0), DType.BF16, case))
    assert matmul.default(m, device) == matmul.MMA_VARIANTS[0]


@pytest.mark.usefixtures("zyx_tuning_cache")  # its races counted
def test_zyx_matmul_takes_the_generated_matmul_where_it_wins(device: CudaDevice) -> None:
    case = Case((8,), (8,), 1024, 1024, 512, b_transposed=True)
    first = check_front_end(device, DType.F32, case, seed=6)
    assert first.claims_offered > 1 and first.claim_races == 1 and first.claims_taken == 1
