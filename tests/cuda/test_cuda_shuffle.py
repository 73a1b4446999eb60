"""``Shuffle`` on the GPU: each lane's value from lane ``lane ^ mask``, as the interpreter
has it (CI runs the interpreter and NVRTC; this runs where a GPU is)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from run_kernel import run_kernel

from zyx.dtypes import DType
from zyx.ir import KernelBuilder, ParamKind
from zyx.ir.interpreter import interpret

pytest.importorskip("cuda.bindings.nvrtc")

pytestmark = pytest.mark.cuda

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice


@pytest.mark.parametrize("mask", [1, 5, 16])
@pytest.mark.parametrize("dtype", [DType.BOOL, DType.I8, DType.F16, DType.F32, DType.I64,
                                   DType.F64], ids=str)  # fmt: skip
def test_each_lane_takes_its_partners_value(device: CudaDevice, dtype: DType, mask: int) -> None:
    kb = KernelBuilder("exchange")
    x = kb.param(dtype, ParamKind.GLOBAL)
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    i = kb.group(0, 3) * 128 + kb.local(0, 128)
    out[i] = kb.shuffle(x[i], mask)
    kernel = kb.build()
    values = (np.arange(384) * 37 % 101 - 50).astype(dtype.numpy)
    want = np.zeros_like(values)
    interpret(kernel, [values, want])
    got = run_kernel(device, kernel, [values, np.full_like(want, 1)], 1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, values[np.arange(384) ^ mask])
