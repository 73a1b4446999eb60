"""Tensor cores on NVIDIA's OpenCL: inline PTX (``NvidiaOpenCLDialect``), once a probe found
it working on the device.

NVIDIA's OpenCL compiler takes the same ``mma.sync``, ``ldmatrix`` and ``cp.async`` as
NVRTC, but nothing documents it: how a ``__local`` pointer becomes a shared address, or
whether a driver builds the PTX at all. So a device of NVIDIA's platform from compute
capability 8.0 (``MMA_CAPABILITY``) advertises tensor cores (``DeviceInfo.tensor_cores``,
``TENSOR_CORE`` for f16 and bf16) only after ``probe_kernel`` of each dtype built and gave
exactly numpy's numbers on known data; else it says why in ``OpenCLDevice.mma_probe``
(``zyx.dev``'s log, ``ZYX_DEBUG=1``). Other devices (PoCL) are never probed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from zyx.backend import DeviceInfo
from zyx.codegen.ptx import HALVES
from zyx.dtypes import DType, DTypeCapability
from zyx.ir import Kernel, KernelBuilder, ParamKind, Storage
from zyx.ir.verify import MMA_CAPABILITY

if TYPE_CHECKING:
    from zyx_opencl.device import OpenCLDevice

_log = logging.getLogger("zyx.dev")

Array = np.ndarray[Any, Any]
Runner = Callable[[Kernel, Sequence[Array]], list[Array]]
"""Runs a kernel on arrays (one per param, as the kernel reads them) and returns them as
the kernel left them."""

WARP = 32


def unavailable(info: DeviceInfo, platform: str) -> str | None:
    """Why a device of ``platform`` described by ``info`` is not probed; ``None`` where it is."""
    if "NVIDIA" not in platform:
        return f"no inline PTX on {platform}"
    cc = info.compute_capability
    if cc is None or cc < MMA_CAPABILITY:
        return f"compute capability {cc} is below {MMA_CAPABILITY}"
    if info.warp_size != WARP:
        return f"warps of {info.warp_size}"
    return None


def with_tensor_cores(info: DeviceInfo) -> DeviceInfo:
    """``info`` with tensor cores for f16 and bf16."""
    dtypes = dict(info.dtypes)
    for dtype in HALVES:
        dtypes[dtype] = dtypes.get(dtype, DTypeCapability.NONE) | DTypeCapability.TENSOR_CORE
    return replace(info, tensor_cores=True, dtypes=dtypes)


def probe_kernel(dtype: DType) -> Kernel:
    """One warp's product of a 16 x 16 ``a`` and a 16 x 8 ``b`` of ``dtype``, every path
    the dialect renders: params ``(a, b, c, c2, d)``. Both are copied into local memory by
    16-byte ``cp.async``, a's rows 8 to 15 as zeros (their condition false); ``c`` is the
    product of fragments ``ldmatrix`` loads (held as words), ``c2`` of fragments loaded
    element by element (paired at the ``mma``), and ``d`` a's fragments as ``ldmatrix``
    spreads them into elements (``expected`` says what each holds)."""
    kb = KernelBuilder(f"mma_probe_{dtype}")
    a, b = kb.param(dtype, name="a"), kb.param(dtype, name="b")
    c, c2 = (kb.param(DType.F32, ParamKind.GLOBAL_MUT, name=n) for n in ("c", "c2"))
    d = kb.param(dtype, ParamKind.GLOBAL_MUT, name="d")
    lane = kb.local(0, WARP)
    g, t = lane / 4, lane % 4
    tile_a, tile_b = kb.define(dtype, 256, Storage.LOCAL), kb.define(dtype, 256, Storage.LOCAL)
    kb.copy_async(tile_a, lane * 8, a, lane * 8, 8, lane < 16)
    kb.copy_async(tile_b, lane * 8, b, lane % 16 * 8, 8)  # lanes 16 to 31 past b's 128
    kb.commit_copies()
    kb.wait_copies(0)
    kb.barrier()
    fa, fb, fd = kb.define(dtype, 8), kb.define(dtype, 4), kb.define(dtype, 8)
    kb.ldmatrix(fa, tile_a, lane % 16 * 16 + lane / 16 * 8, 4)
    kb.ldmatrix(fb, tile_b, lane % 16 * 8, 2, trans=True)
    kb.ldmatrix(fd, tile_a, lane % 16 * 16 + lane / 16 * 8, 4)
    fa2, fb2 = kb.define(dtype, 8), kb.define(dtype, 4)
    for i in range(8):
        fa2[i] = tile_a[(g + i // 2 % 2 * 8) * 16 + t * 2 + i % 2 + i // 4 * 8]
        d[lane * 8 + i] = fd[i]
    for i in range(4):
        fb2[i] = tile_b[(t * 2 + i % 2 + i // 2 * 8) * 8 + g]
    fc, fc2 = kb.define(DType.F32, 4), kb.define(DType.F32, 4)
    for i in range(4):
        fc[i] = kb.const(0.0, DType.F32)
        fc2[i] = kb.const(0.0, DType.F32)
    kb.mma(fc, fa, fb)
    kb.mma(fc2, fa2, fb2)
    for i in range(4):
        at = (g + i // 2 * 8) * 8 + t * 2 + i % 2
        c[at], c2[at] = fc[i], fc2[i]
    return kb.build()


def probe_data(dtype: DType) -> tuple[Array, Array]:
    """``a`` and ``b`` of ``probe_kernel``: multiples of 1/8 up to 2 in magnitude, which f16
    and bf16 hold exactly, as f32 does their products' sums: the result is exact."""
    rng = np.random.default_rng(0)
    a, b = ((rng.integers(-16, 17, n) / 8).astype(dtype.numpy) for n in (256, 128))
    return a, b


def expected(a: Array, b: Array) -> tuple[Array, Array]:
    """``probe_kernel``'s ``c`` (and ``c2``) and ``d`` of ``a`` and ``b``, in float64."""
    rows = a.astype(np.float64).reshape(16, 16)
    rows[8:] = 0.0  # copied as zeros
    product = (rows @ b.astype(np.float64).reshape(16, 8)).ravel()
    lane, i = np.arange(WARP)[:, None], np.arange(8)[None, :]
    g, t = lane // 4, lane % 4
    held = rows.ravel()[(g + i // 2 % 2 * 8) * 16 + t * 2 + i % 2 + i // 4 * 8].ravel()
    return product, held


def probe(run: Runner) -> str | None:
    """Why ``run`` (a device's) does not multiply on tensor cores as numpy does, for
    either dtype; ``None`` where both are exact."""
    for dtype in HALVES:
        a, b = probe_data(dtype)
        nan = np.full(128, np.nan, np.float32)
        try:
            _, _, c, c2, d = run(probe_kernel(dtype), [a, b, nan, nan.copy(), np.zeros_like(a)])
        except Exception as error:  # noqa: BLE001 - whatever fails, the device has none
            return f"the {dtype} probe kernel failed: {error}"
        product, held = expected(a, b)
        for name, got, want in (("ldmatrix", c, product), ("element", c2, product), ("d", d, held)):
            wrong = np.flatnonzero(got.astype(np.float64) != want)
            if wrong.size:
                where = int(wrong[0])
                return (
                    f"the {dtype} probe's {name} output is wrong at {wrong.size} of {want.size}"
                    f" elements (first [{where}]: {got[where]}, numpy {want[where]})"
                )
    return None


def on_device(device: OpenCLDevice) -> Runner:
    """The ``Runner`` of ``device``: each array in a buffer of its own, read back after."""

    def run(kernel: Kernel, arrays: Sequence[Array]) -> list[Array]:
        pool = device.pool
        buffers = [pool.allocate(max(x.nbytes, 1)) for x in arrays]
        program = None
        try:
            for buf, x in zip(buffers, arrays):
                pool.write(buf, x)
            program = device.compile(kernel)
            device.launch(program, buffers)
            out = [np.empty_like(x) for x in arrays]
            for buf, x in zip(buffers, out):
                pool.read(buf, x)
            return out
        finally:
            if program is not None:
                device.release(program)
            for buf in buffers:
                pool.release(buf)

    return run


__all__ = ["on_device", "probe", "probe_kernel", "unavailable", "with_tensor_cores"]
