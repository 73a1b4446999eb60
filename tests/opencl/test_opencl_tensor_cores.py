"""Tensor cores through NVIDIA's OpenCL (``zyx_opencl.tensor_cores``): what the dialect of
inline PTX renders, that PoCL never gets it (it is never probed, and its dialect refuses an
``Mma``), the probe's decision on a build that fails and on wrong numbers (a test double
runs the kernels where no device here can: the interpreter, or a broken one), and the
device taking tensor cores only where its probe passed. On an NVIDIA GPU of sm_80 and later
(``scripts/gpu-check.sh``): the probe passes, and every tensor-core matmul variant that
fits matches numpy in float64, in f16 and bf16."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyopencl as cl
import pytest
from opencl_support import open_all

import zyx
from zyx.backend import DeviceInfo
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import BackendError, ErrorStatus
from zyx.graph import matmul
from zyx.ir import Kernel
from zyx.ir.interpreter import interpret
from zyx.testing.kernels import staged_copies, warp_ldmatrix, warp_mma
from zyx.testing.matmul import ALIGNED_CASES, CASES, Case, check_variant, found, operands
from zyx_opencl import tensor_cores
from zyx_opencl.codegen import NvidiaOpenCLDialect, OpenCLDialect
from zyx_opencl.compiler import BUILD_OPTIONS
from zyx_opencl.device import OpenCLDevice

HALVES = [DType.F16, DType.BF16]

Array = np.ndarray[Any, Any]


def nvidia_info(cc: tuple[int, int] = (9, 0)) -> DeviceInfo:
    """A stand-in for an H200 as NVIDIA's OpenCL describes it (no tensor cores yet)."""
    full = DTypeCapability.FULL
    return DeviceInfo(
        name="NVIDIA H200", compute=6.7e13, max_global_work_dims=(2**31 - 1, 65535, 65535),
        max_local_threads=1024, max_local_work_dims=(1024, 1024, 64), local_mem_size=48 << 10,
        max_register_bytes=1024, preferred_vector_size=4, warp_size=32,
        global_mem_size=140 << 30, compute_capability=cc, dtypes=dict.fromkeys(DType, full),
    )  # fmt: skip


def interpreted(kernel: Kernel, arrays: Sequence[Array]) -> list[Array]:
    """A device whose tensor cores work: the interpreter (its warps emulated)."""
    out = [x.copy() for x in arrays]
    interpret(kernel, out)
    return out


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_mma_renders_as_inline_ptx_in_opencl_c(dtype: DType) -> None:
    """``__asm__``, which clang's OpenCL C has (``asm`` it has not); fragments paired from
    their bits, ldmatrix's words spread into floats, a ``__local`` pointer's shared address
    as an integer, local arrays aligned to 16 bytes; none of CUDA C++'s helpers."""
    code = NvidiaOpenCLDialect().render(tensor_cores.probe_kernel(dtype)).code
    t = dtype.value
    assert f'__asm__("mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 ' in code
    assert '__asm__ __volatile__("ldmatrix.sync.aligned.m8n8.x4.shared.b16 ' in code
    assert '__asm__ __volatile__("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 ' in code
    copy = '"cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"((uint)(ulong)('
    assert f"__asm__ __volatile__({copy}" in code
    assert '__asm__ __volatile__("cp.async.commit_group;" ::: "memory");' in code
    assert '__asm__ __volatile__("cp.async.wait_group %0;" :: "n"(0) : "memory");' in code
    bits = "zyx_f16_bits" if dtype is DType.F16 else "zyx_f32_to_bf16"
    assert f"((uint){bits}(" in code and "<< 16))" in code
    assert " __attribute__((aligned(16)));" in code
    for cuda in ("asm(", "asm volatile", "__cvta_generic_to_shared", "zyx_pair_bits", "template"):
        assert cuda not in code


def test_short_copies_take_their_size_as_an_immediate() -> None:
    code = NvidiaOpenCLDialect().render(staged_copies(DType.F32, 1, 5, 3)).code
    assert '"cp.async.ca.shared.global [%0], [%1], %2, %3;"' in code and '"n"(4)' in code


@pytest.mark.parametrize(
    "kernel",
    [
        tensor_cores.probe_kernel(DType.F16),
        tensor_cores.probe_kernel(DType.BF16),
        warp_mma(DType.BF16),
        warp_ldmatrix(DType.F16, 2, trans=True),
        staged_copies(DType.BF16, 8, 5, 3),
    ],
    ids=lambda k: k.name,
)
def test_the_ptx_kernels_are_opencl_c(kernel: Kernel) -> None:
    """PoCL's clang parses them (it assembles a kernel only when one is launched, which these
    never are on PoCL): what NVIDIA's compiler is given is OpenCL C."""
    code = NvidiaOpenCLDialect().render(kernel).code
    cl.Program(parsing_context(), code).build(list(BUILD_OPTIONS))


def parsing_context() -> cl.Context:
    """A context on a device of PoCL (whose clang parses NVIDIA's inline asm) or of NVIDIA
    (which compiles it) that builds kernels; other compilers refuse it (Intel's CPU runtime:
    "invalid output constraint '+f'"), so the test skips without one."""
    device = _parsing_device()
    if device is None:
        pytest.skip("no PoCL or NVIDIA OpenCL device builds kernels here")
    return cl.Context([device])


@cache
def _parsing_device() -> cl.Device | None:
    """``parsing_context``'s device: found once, as finding it opens every OpenCL device."""
    for device in open_all():
        platform = device.cl_device.platform.name
        if "Portable Computing Language" in platform or "NVIDIA" in platform:
            return device.cl_device
    return None


KINDS = {
    "pipelined": matmul.MMA_VARIANTS[0],  # the default: cp.async, ldmatrix, fragments carried
    "ldmatrix": next(v for v in matmul.MMA_VARIANTS if v.ldmatrix and not v.stages),
    "elementwise": next(v for v in matmul.MMA_VARIANTS if not v.ldmatrix),
}


@pytest.mark.parametrize("kind", KINDS)
def test_the_mma_matmuls_are_opencl_c(kind: str) -> None:
    """The default tensor-core variant's kernels (pipelined), an unpipelined ldmatrix one's
    and one's of fragments element by element, in bf16: PoCL's clang parses them."""
    variant = KINDS[kind]
    case = ALIGNED_CASES[0] if variant.stages else CASES[1]
    m = found(zyx.device("host"), case, *operands(np.random.default_rng(0), DType.BF16, case))
    context = parsing_context()
    for launch in matmul.build(m, variant):
        assert isinstance(launch.kernel, Kernel)
        code = NvidiaOpenCLDialect().render(launch.kernel).code
        assert ("ldmatrix" in code) == variant.ldmatrix and ("cp.async" in code) == bool(
            variant.stages
        )
        cl.Program(context, code).build(list(BUILD_OPTIONS))


def test_opencl_c_without_ptx_refuses_mma() -> None:
    with pytest.raises(BackendError, match="renders no Mma"):
        OpenCLDialect().render(warp_mma(DType.F16))


def test_only_nvidia_from_sm_80_is_probed() -> None:
    assert tensor_cores.unavailable(nvidia_info(), "NVIDIA CUDA") is None
    assert tensor_cores.unavailable(nvidia_info((8, 0)), "NVIDIA CUDA") is None
    assert "below" in str(tensor_cores.unavailable(nvidia_info((7, 5)), "NVIDIA CUDA"))
    pocl = "Portable Computing Language"
    assert "no inline PTX" in str(tensor_cores.unavailable(nvidia_info(), pocl))
    assert "warps of 1" in str(
        tensor_cores.unavailable(replace(nvidia_info(), warp_size=1), "NVIDIA CUDA")
    )


def test_a_probed_device_offers_the_tensor_core_variants() -> None:
    info = nvidia_info()
    assert matmul.variants(SimpleNamespace(info=info, backend="opencl")) == matmul.GPU_VARIANTS
    probed = tensor_cores.with_tensor_cores(info)
    offered = matmul.variants(SimpleNamespace(info=probed, backend="opencl"))
    assert offered[: len(matmul.MMA_VARIANTS)] == matmul.MMA_VARIANTS
    assert all(probed.supports(d, DTypeCapability.TENSOR_CORE) for d in HALVES)
    assert not probed.supports(DType.F32, DTypeCapability.TENSOR_CORE)


def test_the_probe_passes_where_the_numbers_are_numpys() -> None:
    assert tensor_cores.probe(interpreted) is None


def test_the_probe_fails_where_the_kernel_does_not_build() -> None:
    def refuses(kernel: Kernel, arrays: Sequence[Array]) -> list[Array]:
        raise BackendError(
            ErrorStatus.KERNEL_COMPILATION, f"kernel {kernel.name!r} does not build",
            log="ptxas fatal: Unresolved extern function",
        )  # fmt: skip

    reason = tensor_cores.probe(refuses)
    assert reason is not None and "f16 probe kernel failed" in reason and "ptxas fatal" in reason


@pytest.mark.parametrize("output", [2, 3, 4], ids=["ldmatrix", "element", "d"])
def test_the_probe_fails_where_an_output_is_wrong(output: int) -> None:
    """One element off in any output, of the second dtype only: the first passing does not
    let the second through."""

    def wrong(kernel: Kernel, arrays: Sequence[Array]) -> list[Array]:
        out = interpreted(kernel, arrays)
        if kernel.name.endswith("bf16"):
            out[output][5] = out[output][5] + 1
        return out

    reason = tensor_cores.probe(wrong)
    assert reason is not None and "bf16 probe's" in reason and "at 1 of" in reason


def test_the_probe_fails_where_outputs_stay_unwritten() -> None:
    reason = tensor_cores.probe(lambda kernel, arrays: [x.copy() for x in arrays])
    assert reason is not None and "wrong" in reason


def test_pocl_is_never_probed(device: OpenCLDevice) -> None:
    if "NVIDIA" in device.cl_device.platform.name:
        pytest.skip("an NVIDIA device is probed")
    assert device.mma_probe.startswith("none: no inline PTX on")
    assert type(device.dialect) is OpenCLDialect and not device.info.tensor_cores
    assert not any(v.mma for v in matmul.variants(device))
    assert "tensor_cores=False" in device.versions


def opened(monkeypatch: pytest.MonkeyPatch, run: tensor_cores.Runner) -> list[OpenCLDevice]:
    """The devices opened as though each were NVIDIA's from sm_80, its probe's kernels run
    by ``run``."""
    monkeypatch.setattr(tensor_cores, "unavailable", lambda info, platform: None)
    monkeypatch.setattr(tensor_cores, "on_device", lambda device: run)
    return open_all()


def test_a_device_whose_probe_fails_keeps_plain_opencl(monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong(kernel: Kernel, arrays: Sequence[Array]) -> list[Array]:
        return [x.copy() for x in arrays]

    for device in opened(monkeypatch, wrong):
        assert device.mma_probe.startswith("none: the f16 probe's ldmatrix output is wrong")
        assert type(device.dialect) is OpenCLDialect and not device.info.tensor_cores


def test_a_device_whose_probe_passes_takes_tensor_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    for device in opened(monkeypatch, interpreted):
        assert device.mma_probe == "mma.sync, ldmatrix and cp.async (probed)"
        assert isinstance(device.dialect, NvidiaOpenCLDialect) and device.info.tensor_cores
        assert device.dialect.bounds_checked == device.bounds_checked
        assert "tensor_cores=True" in device.versions


def test_the_probe_finds_tensor_cores_on_nvidia_from_sm_80(nvidia: OpenCLDevice) -> None:
    cc = nvidia.info.compute_capability
    if cc is None or cc < (8, 0):
        pytest.skip(f"{nvidia.info.name} has compute capability {cc}")
    assert nvidia.info.tensor_cores, nvidia.mma_probe
    assert isinstance(nvidia.dialect, NvidiaOpenCLDialect)


MMA_CASES = (CASES[1], Case((3,), (3,), 300, 260, 100, a_transposed=True, b_transposed=True))
"""Of tests/cuda/test_cuda_matmul.py's, two (each a build per variant, in the 150 s that
scripts/gpu-check.sh gives tests/opencl): past a tile with a k no step divides, a
transposed and batched; past a 128 x 128 tile, k past steps of 32, both transposed."""


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("variant", matmul.MMA_VARIANTS, ids=str)
def test_every_mma_variant_matches_numpy(
    nvidia: OpenCLDevice, variant: matmul.Variant, dtype: DType
) -> None:
    """Those that fit NVIDIA's OpenCL's local memory (its static 48 KiB: the pipelined ones
    of 64 KiB and more do not), on rows of 16 bytes for the pipelined ones."""
    if not nvidia.info.tensor_cores:
        pytest.skip(f"{nvidia.info.name}: no tensor cores ({nvidia.mma_probe})")
    cases = ALIGNED_CASES[:2] if variant.stages else MMA_CASES
    m = found(zyx.device("host"), cases[0], *operands(np.random.default_rng(0), dtype, cases[0]))
    if not matmul.fits(variant, m, nvidia):
        pytest.skip(f"{variant} does not fit {nvidia.info.name}'s {nvidia.info.local_mem_size} B")
    for seed, case in enumerate(cases):
        check_variant(nvidia, variant, dtype, case, seed)
