"""Core's generated matmul (``zyx.graph.matmul``) on each OpenCL device (PoCL in CI): the
device's default variant and the GPU variants' local-memory path with real barriers, the
float dtypes the device has, against numpy in float64 into poisoned outputs; ``zyx.matmul``
taking it where it wins its race. The host's are in tests/core/test_matmul.py."""

from __future__ import annotations

import pytest

from zyx.dtypes import DType
from zyx.graph import matmul
from zyx.testing.matmul import CASES, Case, check_front_end, check_variant
from zyx_opencl.device import OpenCLDevice

GPU_CASE = Case((8,), (8,), 1024, 1024, 512, a_transposed=True)

SMALL_STAGED = matmul.Variant((2, 2), (4, 8), 8)
"""Local memory, barriers and a rest of k, in tiles small enough to need many groups."""


@pytest.mark.parametrize(
    ("variant", "case"),
    [
        (None, CASES[1]),
        (matmul.GPU_TILE, CASES[1]),
        (SMALL_STAGED, CASES[2]),
    ],
    ids=["default", "gpu-default", "small-staged"],
)
def test_variants_match_numpy(
    device: OpenCLDevice, variant: matmul.Variant | None, case: Case
) -> None:
    chosen = variant or matmul.variants(device)[0]
    check_variant(device, chosen, DType.F32, case)


@pytest.mark.parametrize("dtype", [DType.F64, DType.F16, DType.BF16], ids=str)
def test_float_dtypes_match_numpy(device: OpenCLDevice, dtype: DType) -> None:
    if dtype not in device.info.dtypes:
        pytest.skip(f"{device.name} has no {dtype}")
    check_variant(device, matmul.variants(device)[0], dtype, CASES[0])


@pytest.mark.usefixtures("zyx_tuning_cache")  # its races counted
def test_zyx_matmul_takes_the_generated_matmul_where_it_wins(device: OpenCLDevice) -> None:
    """Large enough that the claim wins by far: on a CPU 2 x 128 x 96 x 128; on a GPU
    8 x 1024 x 1024 x 512, which keeps its SMs busy."""
    cpu = device.info.warp_size <= 1
    case = Case((2,), (2,), 128, 96, 128, a_transposed=True) if cpu else GPU_CASE
    first = check_front_end(device, DType.F32, case, seed=5)
    assert first.claims_offered == 1 and first.claim_races == 1 and first.claims_taken == 1
