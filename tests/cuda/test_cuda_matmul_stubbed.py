"""Core's pipelined matmul (``zyx.graph.matmul``'s ``stages`` variants) through a
``CudaDevice`` as the H200 describes itself (compute capability 9.0, 227 KiB of local memory
a group): each tensor-core variant fits the bf16 goals' shapes (8192^3 and 64 x 512^3 as
1024^3 and 8 x 512^3 here), each other one f32 1024^3, compiles with NVRTC, loads (above
48 KiB of shared memory with the function's attribute set) and passes the launch's checks
of its arguments, launching its work-groups; and core offers a claim for each.

On the stand-in driver (``stub_driver``, in a process of its own): no GPU; the numbers run on
one in test_cuda_matmul.py. Needs a C compiler (zyx-cuda's native launcher).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from stub_driver import run_stubbed

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH"),
]

HERE = Path(__file__).parent


def test_pipelined_variants_build_load_and_launch_on_an_h200() -> None:
    out = run_stubbed(Path(__file__))
    if out.startswith("skip:"):
        pytest.skip(out)
    assert out == "ok\n", out


# ---- in the stubbed process ----------------------------------------------------------------


def check() -> None:
    from math import prod

    from stub_driver import stand_ins

    import zyx
    from zyx.graph import matmul
    from zyx.graph.claims import matmuls
    from zyx.graph.schedule import Graph
    from zyx.ir import Kernel
    from zyx_cuda.device import CudaDevice

    device = CudaDevice(0)
    runs = [(zyx.bfloat16, shape, [v for v in matmul.MMA_VARIANTS if v.stages])
            for shape in ((1024, 1024), (8, 512, 512))]  # fmt: skip
    runs.append((zyx.float32, (1024, 1024), [v for v in matmul.GPU_VARIANTS if v.stages]))
    for dtype, shape, staged in runs:
        a = zyx.ones(shape, dtype=dtype, device=device)
        b = zyx.ones(shape, dtype=dtype, device=device)
        zyx.realize(a, b)
        (m,) = matmuls(Graph([zyx.matmul(a, b).node]))
        out = device.pool.allocate(prod(m.batch) * m.n * m.m * m.output.dtype.itemsize)
        chosen = matmul.default(m, device)
        assert chosen is not None and chosen.mma == (dtype is zyx.bfloat16)
        offered = {c.key[-1] for c in matmul.offer([m], device, search=True)}
        assert set(staged) <= offered, offered
        for variant in staged:
            assert matmul.fits(variant, m, device), (variant, shape)
            (launch,) = matmul.build(m, variant)
            assert isinstance(launch.kernel, Kernel)
            program = device.compile(launch.kernel)
            args = matmul.arguments(launch, a.node.buffer, b.node.buffer, out)
            device.synchronize()
            stand_ins().launches()  # those before (the operands' fills) taken
            device.launch(program, args)
            device.synchronize()
            (logged,) = stand_ins().launches()
            groups = prod(m.batch) * (m.n // variant.tile[0]) * (m.m // variant.tile[1])
            assert logged[1:4] == (groups, 1, 1), (variant, logged)
        device.pool.release(out)
    x = zyx.ones((4096, 4096), dtype=zyx.float32, device=device)  # a broadcast: no rows
    (m,) = matmuls(Graph([zyx.matmul(x, x).node]))
    assert matmul.default(m, device) == matmul.GPU_TILE
    y = x * 2
    zyx.realize(y)  # rows of 16 KiB in memory: the pipelined default fits
    (m,) = matmuls(Graph([zyx.matmul(y, y).node]))
    assert matmul.default(m, device) == matmul.GPU_VARIANTS[0] and matmul.GPU_VARIANTS[0].stages


def main() -> str:
    os.environ["ZYX_AUTOTUNE__ENABLED"] = "false"  # a search asks the driver its version
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    stand_ins = install()
    from zyx_cuda.native import launcher_type

    if launcher_type() is None:
        return "skip: zyx-cuda's native module did not build"
    stand_ins.record(True)
    check()
    return "ok"


if __name__ == "__main__":
    print(main())
