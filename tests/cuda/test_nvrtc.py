"""Every dtype and op renders as CUDA C and compiles with NVRTC, for sm_90 and sm_80.

These run wherever ``nvidia-cuda-nvrtc`` is installed: compiling needs no GPU and no
driver (CI runs them). Loading and running the images is the GPU tests' job.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx.ir import INDEX, Kernel, KernelBuilder, ParamKind, ceil_div
from zyx.testing import kernels
from zyx.testing.examples import examples

nvrtc = pytest.importorskip("cuda.bindings.nvrtc")

from zyx_cuda import compiler as compiler_module  # noqa: E402
from zyx_cuda.codegen import CudaDialect, shared_bytes  # noqa: E402
from zyx_cuda.compiler import Compiler, Image, target  # noqa: E402
from zyx_cuda.device import dtype_capabilities  # noqa: E402

pytestmark = pytest.mark.cuda

ARCHS = [(9, 0), (8, 0)]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test compiles for real, into a cache of its own."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    return tmp_path


def compile_kernel(kernel: Kernel, arch: tuple[int, int]) -> Image:
    return Compiler(arch).compile(CudaDialect().render(kernel))


def ops_of(dtype: DType) -> list[kernels.Elementwise]:
    """Every elementwise part defined on ``dtype``: copy, unary, binary ops, ``where``, ``fma``
    (f32 and f64) and casts to every dtype."""
    parts = [kernels.copy(dtype), kernels.where(dtype)]
    parts += [kernels.unary(op, dtype) for op in kernels.unary_ops(dtype)]
    parts += [kernels.binary(op, dtype) for op in kernels.binary_ops(dtype)]
    parts += [kernels.fma(dtype)] if dtype in (DType.F32, DType.F64) else []
    parts += [kernels.cast(dtype, dst) for dst in DType if dst is not dtype]
    return parts


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a[0]}{a[1]}")
@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_every_op_of_every_dtype_compiles_to_cubin(dtype: DType, arch: tuple[int, int]) -> None:
    kernel = kernels.elementwise(f"ops_{dtype}", ops_of(dtype))
    image = compile_kernel(kernel, arch)
    assert image.format == "cubin"
    assert image.data[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a[0]}{a[1]}")
@pytest.mark.parametrize(
    "kernel",
    [
        kernels.group_sum(DType.F32),
        kernels.group_sum(DType.F16),
        kernels.positive_prefix_sums(DType.BF16),
        kernels.grid3d((5, 6, 7), (4, 2, 2)),
        kernels.local_threads((32, 8)),
        kernels.axpb(DType.F16),
        *(example.kernel for example in examples()),
    ],
    ids=lambda k: k.name,
)
def test_structured_kernels_compile(kernel: Kernel, arch: tuple[int, int]) -> None:
    assert compile_kernel(kernel, arch).format == "cubin"


def test_local_memory_beyond_48_kib_is_dynamic_shared_memory() -> None:
    kernel = kernels.local_memory(100 * 1024)
    source = CudaDialect().render(kernel)
    assert "extern __shared__" in source.code and "__shared__ float" not in source.code
    assert shared_bytes(kernel) == 100 * 1024
    assert Compiler((9, 0)).compile(source).format == "cubin"


def test_special_constants_and_int64_literals_render_for_nvrtc() -> None:
    kb = KernelBuilder("special")
    out32 = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    out64 = kb.param(DType.F64, ParamKind.GLOBAL_MUT)
    big = kb.param(DType.I64, ParamKind.GLOBAL_MUT)
    i = kb.local(0, 1)
    out32[i] = kb.const(float("inf"), DType.F32) + kb.const(float("nan"), DType.F32)
    out64[i] = kb.const(float("-inf"), DType.F64)
    big[i] = kb.const(-(2**63), DType.I64) + kb.const(2**40, DType.I64)
    source = CudaDialect().render(kb.build())
    assert "INFINITY" not in source.code and "NAN" not in source.code
    assert "1099511627776LL" in source.code
    assert compile_kernel(kb.build(), (9, 0)).format == "cubin"


def test_math_functions_use_the_float_overloads_for_f32() -> None:
    code = CudaDialect().render(kernels.elementwise("m", ops_of(DType.F32))).code
    assert "expf(" in code and "sqrtf(" in code and "exp(" not in code.replace("expf(", "")
    assert "tanhf(" in code and "rintf(" in code and "nextafterf(" in code


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16], ids=str)
def test_nextafter_of_half_types_steps_on_their_bits_not_in_float(dtype: DType) -> None:
    part = kernels.nextafter_steps(dtype, special=True)
    code = CudaDialect().render(kernels.elementwise("n", [part])).code
    assert "nextafter" not in code
    assert "_as_ushort(" in code and "__ushort_as_" in code


def test_signature_is_extern_c_with_launch_bounds_of_the_local_size() -> None:
    kb = KernelBuilder("bounds")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable(INDEX)
    i = kb.group(0, ceil_div(n, 128)) * 128 + kb.local(0, 128)
    with kb.if_(i < n):
        out[i] = 1.0
    code = CudaDialect().render(kb.build()).code
    assert 'extern "C" __global__ void __launch_bounds__(128) zyx_kernel_bounds(' in code


def test_a_compile_error_carries_the_nvrtc_log() -> None:
    from zyx.codegen.c import Source

    with pytest.raises(BackendError) as caught:
        Compiler((9, 0)).compile(
            Source("broken", 'extern "C" __global__ void broken() { x; }', "cuda")
        )
    assert caught.value.status is ErrorStatus.KERNEL_COMPILATION
    assert 'identifier "x" is undefined' in caught.value.log


def test_images_are_cached_on_disk_by_source_target_and_version(cache_dir: Path) -> None:
    kernel = kernels.axpb(DType.F32)
    first = compile_kernel(kernel, (9, 0))
    entries = list((cache_dir / "cuda").iterdir())
    assert len(entries) == 1
    assert compile_kernel(kernel, (9, 0)).data == first.data
    compile_kernel(kernel, (8, 0))
    assert len(list((cache_dir / "cuda").iterdir())) == 2
    assert not list((cache_dir / "cuda").glob("*.tmp"))


def test_devices_newer_than_nvrtc_get_ptx_older_ones_an_error() -> None:
    newest = compiler_module.supported_archs()[-1]
    assert target((99, 0)) == f"compute_{newest}"
    assert compile_kernel(kernels.axpb(DType.F32), (99, 0)).data.startswith(b"//")
    with pytest.raises(BackendError, match="older than NVRTC"):
        target((3, 0))


def test_missing_fp16_headers_name_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiler_module, "include_dir", lambda: None)
    with pytest.raises(BackendError, match="nvidia-cuda-runtime") as caught:
        compile_kernel(kernels.axpb(DType.F16), (9, 0))
    assert caught.value.status is ErrorStatus.KERNEL_COMPILATION
    compile_kernel(kernels.axpb(DType.F32), (9, 0))  # f32 kernels include nothing


def test_bf16_only_from_sm80_and_f16_arithmetic_from_sm53() -> None:
    from zyx.dtypes import DTypeCapability as C

    assert DType.BF16 not in dtype_capabilities((7, 5))
    assert C.MATH in dtype_capabilities((8, 0))[DType.BF16]
    assert dtype_capabilities((5, 2))[DType.F16] == C.STORAGE
    assert C.ARITHMETIC in dtype_capabilities((5, 3))[DType.F16]
    assert C.TENSOR_CORE in dtype_capabilities((7, 0))[DType.F16]


@pytest.mark.parametrize("name", ["exp", "printf", "threadIdx", "atomicAdd", "zyx_shared_memory"])
def test_kernels_may_take_names_cuda_already_uses(name: str) -> None:
    kernel = kernels.elementwise(name, [kernels.copy(DType.F32)])
    source = CudaDialect().render(kernel)
    assert source.name.startswith(f"zyx_kernel_{name}")
    assert Compiler((9, 0)).compile(source).format == "cubin"


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16, DType.F32, DType.F64])
def test_special_and_negative_constants_compile(dtype: DType) -> None:
    """inf, -inf, nan, a constant past the dtype's range, and a negated negative literal."""
    kb = KernelBuilder(f"special_{dtype.value}")
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    values = [float("inf"), float("-inf"), float("nan"), 1e300, -1.5]
    for i, value in enumerate(values):
        out[i] = kb.const(value, dtype)
    out[len(values)] = -kb.const(-1.5, dtype)
    compile_kernel(kb.build(), ARCHS[0])


@pytest.mark.parametrize("kernel", [e.kernel for e in examples()], ids=lambda k: k.name)
def test_bounds_checked_kernels_compile(kernel: Kernel) -> None:
    """Every access guarded by ``zyx_in_bounds``, the record and the element counts after
    the params (``zyx.codegen.c``): shared local memory and f16 in the sample kernels too."""
    dialect = CudaDialect()
    dialect.bounds_checked = True
    source = dialect.render(kernel)
    accesses = sum(type(op).__name__ in ("Load", "Store") for op in kernel.ops)
    assert source.code.count("zyx_in_bounds(zyx_err, ") == accesses
    buffers = sum(p.kind is not ParamKind.VARIABLE for p in kernel.params)
    assert "long long* __restrict__ zyx_err, const long long zyx_len" in source.code
    assert source.code.count("const long long zyx_len") == buffers
    assert Compiler(ARCHS[0]).compile(source).format == "cubin"


@pytest.mark.parametrize("dtype", [DType.BOOL, DType.I8, DType.F16, DType.F32, DType.I64,
                                   DType.F64], ids=str)  # fmt: skip
def test_shuffles_of_every_width_compile(dtype: DType) -> None:
    """``__shfl_xor_sync`` has no overload below 32 bits: bool and small ints go through an
    int (f16 values are floats already)."""
    kb = KernelBuilder(f"shuffle_{dtype}")
    x = kb.param(dtype, ParamKind.GLOBAL)
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    i = kb.local(0, 64)
    out[i] = kb.shuffle(x[i], 16)
    code = CudaDialect().render(kb.build()).code
    assert "__shfl_xor_sync(0xffffffffu, " in code
    assert ("(int)" in code) == (not dtype.is_float and dtype.itemsize < 4)
    assert compile_kernel(kb.build(), (9, 0)).format == "cubin"
