"""A kernel whose running time is a parameter and whose result numpy predicts exactly:
``out[i] = lcg^k(a[i]) + b[i]`` over u32, ``lcg(x) = 1664525 x + 1013904223``."""

from __future__ import annotations

import numpy as np

from zyx.dtypes import DType
from zyx.ir import INDEX, Kernel, KernelBuilder, ParamKind, ceil_div

A, C = 1664525, 1013904223
MASK = (1 << 32) - 1


def lcg_kernel(local: int = 256) -> Kernel:
    """Params: ``a``, ``b`` (Global u32), ``out`` (GlobalMut u32), ``k``, ``n`` (i64)."""
    kb = KernelBuilder("lcg")
    a, b = kb.param(DType.U32), kb.param(DType.U32)
    out = kb.param(DType.U32, ParamKind.GLOBAL_MUT)
    k, n = kb.variable(INDEX, "k"), kb.variable(INDEX, "n")
    i = kb.group(0, ceil_div(n, local)) * local + kb.local(0, local)
    with kb.if_(i < n):
        x = kb.define(DType.U32)
        x[0] = a[i]
        with kb.loop(k):
            x[0] = x[0] * A + C
        out[i] = x[0] + b[i]
    return kb.build()


def lcg_model(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """What ``lcg_kernel`` writes, by composing the map ``k`` times in closed form."""
    mul, add = 1, 0
    step_mul, step_add = A, C
    while k:  # binary powering of the affine map x -> step_mul x + step_add
        if k & 1:
            mul, add = (step_mul * mul) & MASK, (step_mul * add + step_add) & MASK
        step_mul, step_add = (step_mul * step_mul) & MASK, (step_mul * step_add + step_add) & MASK
        k >>= 1
    x = a.astype(np.uint64) * mul + add
    result: np.ndarray = ((x + b) & MASK).astype(np.uint32)
    return result
