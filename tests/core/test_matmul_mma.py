"""Core's tensor-core matmul (``zyx.graph.matmul``'s ``mma`` variants): offered only where a
device has warps of 32 and tensor cores for f16 or bf16, and, run by the interpreter (its
warps of 32 emulated), each variant's kernels match numpy in float64 into poisoned outputs,
transposed and batched by strides, at sizes that are no multiple of a tile or of k's step.
On a GPU they run in tests/cuda/test_cuda_matmul.py."""

from __future__ import annotations

from dataclasses import replace
from math import prod
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.backend import Device
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import matmul
from zyx.graph.claims import Matmul, matmuls
from zyx.graph.schedule import Graph
from zyx.ir import Kernel, Mma
from zyx.ir.interpreter import interpret
from zyx.testing.matmul import CASES, Case, found, operands, reference
from zyx.testing.numerics import Array, assert_close, poisoned

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


def interpreted(variant: matmul.Variant, m: Matmul, a: Array, b: Array) -> Array:
    """``m`` computed by ``variant``'s kernels in the interpreter into a poisoned array."""
    out = poisoned(m.output.dtype, prod(m.batch) * m.n * m.m)
    named = {("src", 0): a, ("src", 1): b, ("out", 0): out}
    for launch in matmul.build(m, variant):
        assert isinstance(launch.kernel, Kernel)
        interpret(launch.kernel, [named[arg] for arg in launch.args])
    return out.reshape(*m.batch, m.n, m.m)


def held(x: Array, transposed: bool) -> Array:
    """The buffer that holds operand ``x`` (``arrays`` of zyx.testing.matmul)."""
    return (np.ascontiguousarray(np.swapaxes(x, -1, -2)) if transposed else x).ravel()


def check(host: Device, variant: matmul.Variant, dtype: DType, case: Case) -> None:
    a, b = operands(np.random.default_rng(0), dtype, case)
    m = found(host, case, a, b)
    assert matmul.fits(variant, m, gpu(host))
    got = interpreted(variant, m, held(a, case.a_transposed), held(b, case.b_transposed))
    assert_close(got, reference(a, b), dtype, f"{variant} {case}")


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16], ids=str)
def test_the_default_mma_variant_matches_numpy(host: Device, dtype: DType) -> None:
    for case in CASES + EDGES:
        check(host, matmul.MMA_VARIANTS[0], dtype, case)


@pytest.mark.parametrize("variant", matmul.MMA_VARIANTS[1:], ids=str)
def test_every_mma_variant_matches_numpy(host: Device, variant: matmul.Variant) -> None:
    check(host, variant, DType.BF16, CASES[1])
    check(host, variant, DType.F16, EDGES[2])


def test_the_kernels_use_tensor_cores(host: Device) -> None:
    x = zyx.zeros((256, 256), dtype=zyx.bfloat16, device=host)
    (m,) = matmuls(Graph([zyx.matmul(x, x).node]))
    (launch,) = matmul.build(m, matmul.MMA_VARIANTS[0])
    assert isinstance(launch.kernel, Kernel)
    assert launch.kernel.local_size == (256, 1, 1)
    # 8 warps of 4 x 4 MMAs, 2 steps of 16 along k a step of the tiles
    assert sum(isinstance(op, Mma) for op in launch.kernel.ops) == 32


def test_mma_is_offered_only_with_tensor_cores_for_the_dtype(host: Device) -> None:
    x = zyx.zeros((4096, 4096), dtype=zyx.bfloat16, device=host)
    (m,) = matmuls(Graph([zyx.matmul(x, x).node]))
    assert matmul.default(m, gpu(host)) == matmul.MMA_VARIANTS[0]
    assert matmul.variants(gpu(host))[: len(matmul.MMA_VARIANTS)] == matmul.MMA_VARIANTS
    for device in (
        gpu(host, tensor_cores=False),
        gpu(host, dtypes={d: DTypeCapability.FULL for d in DType}),
        gpu(host, compute_capability=(7, 5)),  # tensor cores, but not m16n8k16's
    ):
        assert not any(v.mma for v in matmul.variants(device))
    no_bf16 = gpu(host, dtypes={**gpu(host).info.dtypes, DType.BF16: DTypeCapability.FULL})
    assert not matmul.fits(matmul.MMA_VARIANTS[0], m, no_bf16)
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
