"""The namespace's hand-written kernels (scans, sorting, searching, compaction, scatter)
render as CUDA C and compile with NVRTC for every dtype, for sm_90 and sm_80: no GPU
needed. Running them on one is the GPU run's job (tests/core/test_array_*.py there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zyx.array import scans, searching, sets, sorting
from zyx.dtypes import DType
from zyx.graph.nodes import ReduceOp
from zyx.ir import Kernel

pytest.importorskip("cuda.bindings.nvrtc")

from zyx_cuda.codegen import CudaDialect  # noqa: E402
from zyx_cuda.compiler import Compiler  # noqa: E402

pytestmark = pytest.mark.cuda

LOCAL = 256
NUMERIC = [d for d in DType if d is not DType.BOOL]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test compiles for real, into a cache of its own."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    return tmp_path


def kernels_of(dtype: DType) -> list[Kernel]:
    out = scans.accumulator(dtype)
    return [
        scans._row_kernel(ReduceOp.SUM, dtype, dtype, LOCAL, totals=False),
        scans._row_kernel(ReduceOp.PROD, dtype, out, LOCAL, totals=True),
        scans._column_kernel(ReduceOp.SUM, dtype, dtype, LOCAL),
        sorting._block_kernel(dtype, LOCAL),
        sorting._step_kernel(dtype, LOCAL),
        searching._search_kernel(dtype, dtype, DType.I32, dtype, LOCAL),
    ]


SHARED = [
    scans._row_kernel(ReduceOp.SUM, DType.BOOL, DType.I64, LOCAL, totals=False),
    searching._compact_kernel(LOCAL),
    sets._scatter_kernel(LOCAL),
    searching._search_kernel(DType.F16, DType.F32, None, DType.F32, LOCAL),
]


@pytest.mark.parametrize("arch", [(9, 0), (8, 0)], ids=lambda a: f"sm_{a[0]}{a[1]}")
@pytest.mark.parametrize("dtype", [*NUMERIC, None], ids=lambda d: str(d) if d else "shared")
def test_array_kernels_compile(dtype: DType | None, arch: tuple[int, int]) -> None:
    compiler = Compiler(arch)
    for kernel in kernels_of(dtype) if dtype is not None else SHARED:
        assert compiler.compile(CudaDialect().render(kernel)).format == "cubin", kernel.name
