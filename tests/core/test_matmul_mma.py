"""Core's tensor-core matmul (``zyx.graph.matmul``'s ``mma`` variants): offered only where a
device has warps of 32 and tensor cores for f16 or bf16, and, run by the interpreter (its
warps of 32 emulated), each variant's kernels match numpy in float64 into poisoned outputs,
transposed and batched by strides, at sizes that are no multiple of a tile or of k's step.
On a GPU they run in tests/cuda/test_cuda_matmul.py."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.backend import Buffer, Device
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import matmul
from zyx.graph.claims import matmuls
from zyx.graph.schedule import Graph
from zyx.ir import Kernel, Mma
from zyx.testing.matmul import (
    ALIGNED_CASES,
    CASES,
    Case,
    found,
    held,
    interpreted,
    operands,
    reference,
)
from zyx.testing.numerics import assert_close, random

TENSOR = DTypeCapability.FULL | DTypeCapability.TENSOR_CORE

EDGES = (
    Case((), (), 5, 1, 7),
    Case((3,), (3,), 3, 4, 0),
    Case((), (), 130, 70, 40, a_transposed=True, b_transposed=True),
)
"""A matrix times a vector, an empty contraction (zeros), both operands transposed."""


@pytest.fixture(scope="module")
def host() -> Device:
    return zyx.device("host")


def gpu(host: Device, **changes: Any) -> Any:
    """A stand-in for a GPU with tensor cores for every float dtype: the host's DeviceInfo
    with warps of 32 (only ``info`` is read)."""
    info = replace(
        host.info,
        warp_size=32,
        tensor_cores=True,
        max_local_threads=1024,
        max_local_work_dims=(1024, 1024, 64),
        local_mem_size=1 << 16,
        dtypes={d: TENSOR for d in DType},
    )
    return SimpleNamespace(info=replace(info, **changes))


def check(host: Device, variant: matmul.Variant, dtype: DType, case: Case) -> None:
    a, b = operands(np.random.default_rng(0), dtype, case)
    m = found(host, case, a, b)
    assert matmul.fits(variant, m, gpu(host))
    got = interpreted(variant, m, held(a, case.a_transposed), held(b, case.b_transposed))
    assert_close(got, reference(a, b), dtype, f"{variant} {case}")


UNSTAGED = [v for v in matmul.MMA_VARIANTS if not v.stages]
"""The default first (where rows are not 16-byte aligned, or local memory is short)."""
STAGED = [v for v in matmul.MMA_VARIANTS if v.stages]


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16], ids=str)
def test_the_unaligned_default_mma_variant_matches_numpy(host: Device, dtype: DType) -> None:
    for case in CASES + EDGES:
        check(host, UNSTAGED[0], dtype, case)


H200_LOCAL = 232448
"""Bytes of local memory of a work-group on the H200 (its opt-in shared memory)."""


@pytest.mark.parametrize("variant", UNSTAGED[1:], ids=str)
def test_every_mma_variant_matches_numpy(host: Device, variant: matmul.Variant) -> None:
    check(host, variant, DType.BF16, CASES[1])
    check(host, variant, DType.F16, EDGES[2])


@pytest.mark.parametrize("variant", STAGED, ids=str)
def test_every_pipelined_variant_matches_numpy(host: Device, variant: matmul.Variant) -> None:
    """Its copies complete only at their waits in the interpreter, and a stage read before
    that is NaN: a pipeline that waits too little fails here (test_ir_copies.py)."""
    dtypes = (DType.BF16, DType.F16, DType.BF16, DType.F16)
    for dtype, case in zip(dtypes, ALIGNED_CASES, strict=True):
        a, b = operands(np.random.default_rng(1), dtype, case)
        m = found(host, case, a, b)
        assert matmul.fits(variant, m, gpu(host, local_mem_size=H200_LOCAL))
        got = interpreted(variant, m, held(a, case.a_transposed), held(b, case.b_transposed))
        assert_close(got, reference(a, b), dtype, f"{variant} {case}")


def test_pipelined_variants_take_only_16_byte_rows(host: Device) -> None:
    """Each copy moves 16 aligned bytes: a row of an odd length, an offset that is not a
    multiple of 8, or a dim of neither stride 1, and the pipelined variants do not fit
    (the others do); nor do stages that overflow local memory, nor a buffer at an address
    that is no multiple of 16 (a foreign one, adopted)."""
    device = gpu(host, local_mem_size=H200_LOCAL)
    rng = np.random.default_rng(2)
    for case in (CASES[1], Case((), (), 64, 64, 36), Case((), (), 60, 64, 64, a_transposed=True)):
        m = found(host, case, *operands(rng, DType.BF16, case))
        assert not any(matmul.fits(v, m, device) for v in STAGED)
        assert matmul.fits(UNSTAGED[0], m, device)
    x = zyx.asarray(random(rng, DType.BF16, 65 * 64).reshape(65, 64), device=host)
    for view in (x[1:], x[:, ::2]):  # an offset of 64 + 0 and 16-byte rows; a stride of 2
        (m,) = matmuls(Graph([zyx.matmul(view, x[:64, : view.shape[1]].mT).node]))
        fitting = any(matmul.fits(v, m, device) for v in STAGED)
        assert fitting == (view.shape[1] == 64), view.shape
    aligned = ALIGNED_CASES[0]
    m = found(host, aligned, *operands(rng, DType.BF16, aligned))
    assert all(matmul.fits(v, m, device) for v in STAGED)
    assert not any(matmul.fits(v, m, gpu(host, local_mem_size=48 << 10)) for v in STAGED)
    assert not matmul.fits(replace(UNSTAGED[0], carry=True), m, device)
    held = m.a.node.buffer
    assert held is not None
    m.a.node.buffer = Buffer(held.pool, held.nbytes, 0x7F0000000002)  # adopted from a view
    try:
        assert not any(matmul.fits(v, m, device) for v in STAGED)
    finally:
        m.a.node.buffer = held


@pytest.mark.parametrize("width", [16, 32, 64, 128, 256])
def test_a_stage_swizzle_puts_ldmatrix_rows_and_copies_in_distinct_banks(width: int) -> None:
    """8 rows from a multiple of 8, one chunk of 16 bytes each (an ``LdMatrix`` matrix), and
    8 chunks in copy order (8 work-items' ``CopyAsync``s), each lie in 8 distinct 16-byte
    columns of the 32 banks: no bank conflict, with no padding."""
    chunks = width // 8  # of bf16

    def column(row: int, chunk: int) -> int:
        return matmul.swizzled(row, chunk, width, 8) * 2 // 16 % 8

    for row0 in range(0, 32, 8):
        for chunk in range(chunks):
            assert len({column(row0 + r, chunk) for r in range(8)}) == 8
    for first in range(0, 8 * chunks, 8):
        copies = [divmod(first + i, chunks) for i in range(8)]
        assert len({column(row, chunk) for row, chunk in copies}) == 8
    rows = [matmul.swizzled(r, c, width, 8) for r in range(8) for c in range(chunks)]
    assert sorted(rows) == list(range(0, 8 * width, 8))  # a permutation


def test_the_kernels_use_tensor_cores(host: Device) -> None:
    x = zyx.zeros((256, 256), dtype=zyx.bfloat16, device=host)
    (m,) = matmuls(Graph([zyx.matmul(x, x).node]))
    (launch,) = matmul.build(m, UNSTAGED[0])
    assert isinstance(launch.kernel, Kernel)
    assert launch.kernel.local_size == (256, 1, 1)
    # 8 warps of 4 x 4 MMAs, 2 steps of 16 along k a step of the tiles
    assert sum(isinstance(op, Mma) for op in launch.kernel.ops) == 32


def test_mma_is_offered_only_with_tensor_cores_for_the_dtype(host: Device) -> None:
    x = zyx.zeros((4096, 4096), dtype=zyx.bfloat16, device=host)
    (m,) = matmuls(Graph([zyx.matmul(x, x).node]))
    assert matmul.default(m, gpu(host)) == UNSTAGED[0]  # 64 KiB: no pipelined variant fits
    y = zyx.ones((4096, 4096), dtype=zyx.bfloat16, device=host) * 2  # rows in memory
    zyx.realize(y)
    (aligned,) = matmuls(Graph([zyx.matmul(y, y).node]))
    assert matmul.default(aligned, gpu(host, local_mem_size=H200_LOCAL)) == matmul.MMA_VARIANTS[0]
    assert matmul.variants(gpu(host))[: len(matmul.MMA_VARIANTS)] == matmul.MMA_VARIANTS
    for device in (
        gpu(host, tensor_cores=False),
        gpu(host, dtypes={d: DTypeCapability.FULL for d in DType}),
        gpu(host, compute_capability=(7, 5)),  # tensor cores, but not m16n8k16's
    ):
        assert not any(v.mma for v in matmul.variants(device))
    no_bf16 = gpu(host, dtypes={**gpu(host).info.dtypes, DType.BF16: DTypeCapability.FULL})
    assert not matmul.fits(UNSTAGED[0], m, no_bf16)
    chosen = matmul.default(m, no_bf16)
    assert chosen is not None and not chosen.mma


@pytest.mark.parametrize(
    ("a", "b"), [(zyx.float32, zyx.float32), (zyx.float16, zyx.bfloat16)], ids=["f32", "mixed"]
)
def test_mma_takes_only_f16_or_bf16_operands_of_one_dtype(host: Device, a: Any, b: Any) -> None:
    x = zyx.zeros((512, 512), dtype=a, device=host)
    y = zyx.zeros((512, 512), dtype=b, device=host)
    (m,) = matmuls(Graph([zyx.matmul(x, y).node]))
    assert not any(matmul.fits(v, m, gpu(host)) for v in matmul.MMA_VARIANTS)
    chosen = matmul.default(m, gpu(host))
    assert chosen is not None and not chosen.mma
