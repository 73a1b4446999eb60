"""Core's generated matmul (``zyx.graph.matmul``) on the host: every variant's kernels,
every float dtype, against numpy in float64 into poisoned outputs; ``zyx.matmul`` taking
it where it wins its race. PoCL's are in tests/opencl/test_opencl_matmul.py."""

from __future__ import annotations

import numpy as np
import pytest

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.graph import matmul
from zyx.ir.ops import Storage
from zyx.testing.matmul import CASES, Case, check_front_end, check_variant, found, operands

VARIANTS = matmul.CPU_VARIANTS + matmul.GPU_VARIANTS


@pytest.fixture(scope="module")
def host() -> Device:
    return zyx.device("host")


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_every_variant_matches_numpy(host: Device, variant: matmul.Variant) -> None:
    """Each variant on one case in turn (CPU and GPU variants alike: the host runs both)."""
    case = CASES[VARIANTS.index(variant) % len(CASES)]
    check_variant(host, variant, DType.F32, case)


@pytest.mark.parametrize("dtype", [DType.F64, DType.F16, DType.BF16], ids=str)
def test_every_float_dtype_matches_numpy(host: Device, dtype: DType) -> None:
    """The default CPU variant, and the default GPU one (local memory, the rest of k from
    global memory), in f64 and in the 16-bit floats that accumulate in f32."""
    check_variant(host, matmul.CPU_VARIANTS[0], dtype, CASES[1])
    check_variant(host, matmul.GPU_VARIANTS[0], dtype, CASES[2])


def test_the_default_fits_the_device_and_strides_are_baked_in(host: Device) -> None:
    rng = np.random.default_rng(1)
    case = CASES[1]
    m = found(host, case, *operands(rng, DType.F32, case))
    assert matmul.default(m, host) == matmul.CPU_VARIANTS[0]
    assert m.a.strides[-2:] == (1, case.n)  # a transposed: read through its strides
    # The GPU default through local memory: 128 x 128 outputs per group of 256 items.
    v = matmul.GPU_VARIANTS[0]
    assert v.tile == (128, 128) and v.local_size == 256
    (tiles, edge) = matmul.kernels(m, v)  # 140 columns: a full column of tiles and the rest
    assert tiles.local_size == (256, 1, 1) and edge.name.startswith("matmul_edge")
    assert any(getattr(op, "storage", None) is Storage.LOCAL for op in tiles.ops)
    too_big = matmul.Variant((8, 8), (64, 64), 16)
    assert not matmul.fits(too_big, m, host)


def test_zyx_matmul_takes_the_generated_matmul_where_it_wins(host: Device) -> None:
    """At 128^3 the claim is several times faster than the generic lowering on the host:
    taken once raced, then reused without a race; batched, a transposed operand."""
    case = Case((2,), (2,), 128, 96, 128, b_transposed=True)
    first = check_front_end(host, DType.F32, case, seed=2)
    assert first.claims_offered == 1 and first.claim_races == 1 and first.claims_taken == 1
    assert first.kernels_scheduled == 0
    again = check_front_end(host, DType.F32, case, seed=3)
    assert again.plans_reused == 1 and again.claim_races == 0


def test_zyx_matmul_of_vectors_and_empty_dims_stays_right(host: Device) -> None:
    """Shapes core's matmul might see at the edges: a vector side (m = 1), k = 0."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    v = rng.standard_normal(7).astype(np.float32)
    got = zyx.matmul(zyx.asarray(a, device=host), zyx.asarray(v, device=host)).numpy()
    np.testing.assert_allclose(got, a.astype(np.float64) @ v, rtol=1e-5, atol=1e-5)
    empty = zyx.matmul(zyx.zeros((3, 0), device=host), zyx.zeros((0, 4), device=host)).numpy()
    assert empty.shape == (3, 4) and not empty.any()
