"""IR kernels the GPU benchmarks share (imported from the scripts' own folder)."""

from __future__ import annotations

from zyx.dtypes import DType
from zyx.ir import INDEX, Kernel, KernelBuilder, ParamKind, ceil_div


def empty_kernel() -> Kernel:
    """One written f32 buffer, one work-item, no body: a launch with nothing to run."""
    kb = KernelBuilder("empty")
    kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    kb.local(0, 1)
    return kb.build()


def strided_add(per_item: int, local: int) -> Kernel:
    """``c = a + b`` over f32; each work-item adds ``per_item`` elements ``local`` apart, so
    every load and store of a group is contiguous (one coalesced transaction per warp) and a
    work-item has ``2 * per_item`` independent loads in flight."""
    kb = KernelBuilder(f"add_{per_item}x{local}")
    a, b = kb.param(DType.F32), kb.param(DType.F32)
    c = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable(INDEX, "n")
    base = kb.group(0, ceil_div(n, per_item * local)) * (per_item * local) + kb.local(0, local)
    with kb.loop(per_item) as j:
        i = base + j * local
        with kb.if_(i < n):
            c[i] = a[i] + b[i]
    return kb.build()
