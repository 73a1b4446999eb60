"""The OpenCL C dialect of zyx's C-family renderer.

Types: ``bool`` is stored as ``uchar`` (OpenCL forbids ``bool`` in buffers and kernel
arguments). f16 lives in memory as ``half`` and is read and written with
``vload_half``/``vstore_half_rte``, which need no extension; it computes in ``float``. bf16
lives as ``ushort`` and converts in software with round-to-nearest-even; it computes in
``float`` too. ``cl_khr_fp16`` is enabled only where the device has it and the kernel uses
f16; it then rounds to half with one native conversion. ``cl_khr_fp64`` is enabled where
the kernel uses f64.

Bounds-checked (``bounds_checked``), a kernel takes ``__global long* zyx_err`` and a ``long``
element count per buffer param after its own params (``zyx.codegen.c``); the record's flag
is set with OpenCL 1.2's 32-bit ``atomic_cmpxchg`` on its low word.

The entry point is the kernel's name prefixed with ``k_``, clear of OpenCL's reserved names.
It carries ``reqd_work_group_size``: zyx always launches it with that local size, and the
compiler may use it to drop bounds on the work-group.

``NvidiaOpenCLDialect`` is OpenCL C for NVIDIA's compiler on a device whose tensor cores a
probe found working (``zyx_opencl.tensor_cores``): that compiler takes inline PTX, and
``zyx.codegen.ptx`` renders ``Mma``, ``LdMatrix`` and ``cp.async`` in it. Fragments of f16
and bf16 are held as floats, as every register of those types here; a fragment only
``LdMatrix`` writes and ``Mma`` reads as the 32-bit words themselves (``in_words``). A
``__local`` pointer converted to an integer is its address in the shared window, as PTX's
``.shared`` instructions take it; local arrays are aligned to 16 bytes, the rows of an
``ldmatrix`` and the destination of a 16-byte ``cp.async``.
"""

from __future__ import annotations

from zyx.codegen import CDialect
from zyx.codegen.ptx import PtxDialect
from zyx.dtypes import DType
from zyx.ir.ops import Kernel, Range, Scope

_STORAGE = {
    DType.BOOL: "uchar", DType.U8: "uchar", DType.U16: "ushort", DType.U32: "uint",
    DType.U64: "ulong", DType.I8: "char", DType.I16: "short", DType.I32: "int",
    DType.I64: "long", DType.F16: "half", DType.BF16: "ushort", DType.F32: "float",
    DType.F64: "double",
}  # fmt: skip

_FP64 = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
_FP16 = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"

_BF16 = """\
float zyx_bf16_to_f32(ushort h) { return as_float((uint)h << 16); }
ushort zyx_f32_to_bf16(float f) {
  uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); /* quiet NaN */
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* round to nearest even */
}
"""

# Without cl_khr_fp16 no half value may exist, but half pointers may: a float becomes the
# bits of a half through a ushort in private memory.
_F16_BITS = """\
ushort zyx_f16_bits(float x) {
  ushort h;
  vstore_half_rte(x, 0, (__private half*)&h);
  return h;
}
float zyx_f16_from_bits(ushort h) { return vload_half(0, (__private const half*)&h); }
"""
# One function, one variable: PoCL 5 miscompiled zyx_f16_from_bits(zyx_f16_bits(x)) in a
# loop after a barrier (work-items read each other's rounded values).
_ROUND_F16_SOFT = """\
float zyx_round_f16(float x) {
  ushort h;
  vstore_half_rte(x, 0, (__private half*)&h);
  return vload_half(0, (__private const half*)&h);
}
"""
_ROUND_F16_NATIVE = "float zyx_round_f16(float x) { return (float)convert_half_rte(x); }\n"
# From double in one rounding: through float would round twice.
_ROUND_F16_FROM_F64 = """\
float zyx_round_f16_f64(double x) {
  ushort h;
  vstore_half_rte(x, 0, (__private half*)&h);
  return vload_half(0, (__private const half*)&h);
}
"""


_IN_BOUNDS = """\
int zyx_in_bounds(__global long* err, long index, long length, long op) {
  if (index >= 0 && index < length) return 1;
  if (atomic_cmpxchg((volatile __global int*)err, 0, 1) == 0) {
    err[1] = op;
    err[2] = index;
    err[3] = length;
  }
  return 0;
}
"""


class OpenCLDialect(CDialect):
    """OpenCL C 1.2. ``fp16``: the device has ``cl_khr_fp16``."""

    name = "opencl"
    global_qualifier = "__global "
    long_suffix = "L"
    # OpenCL C reserves hundreds of names at file scope (float4, _Bool, get_global_id,
    # every math function): a prefix no builtin and no zyx_ helper has avoids them all.
    entry_prefix = "k_"

    def __init__(self, *, fp16: bool = False) -> None:
        self.fp16 = fp16

    def storage_type(self, dtype: DType) -> str:
        return _STORAGE[dtype]

    def preamble(self, kernel: Kernel) -> str:
        dtypes = kernel.used_dtypes
        parts = []
        if DType.F64 in dtypes:
            parts.append(_FP64)
        if DType.F16 in dtypes:
            parts += [_FP16] if self.fp16 else []
            parts += [_F16_BITS, _ROUND_F16_NATIVE if self.fp16 else _ROUND_F16_SOFT]
        if DType.F16 in dtypes and DType.F64 in dtypes:
            parts.append(_ROUND_F16_FROM_F64)
        if DType.BF16 in dtypes:
            parts.append(_BF16)
        return "".join(parts)

    def signature(self, kernel: Kernel, name: str, params: list[str]) -> str:
        x, y, z = kernel.local_size
        attribute = f"__attribute__((reqd_work_group_size({x}, {y}, {z})))"
        return f"__kernel {attribute} void {name}({', '.join(params)})"

    def range_index(self, op: Range) -> str:
        function = "get_group_id" if op.scope is Scope.GROUP else "get_local_id"
        return f"(long){function}({op.axis})"

    locals_at_top = True

    local_attributes = ""
    """What follows the declarator of each local array (an alignment)."""

    def local_decl(self, dtype: DType, name: str, length: int) -> str:
        if dtype is DType.F16:
            # No half arrays without cl_khr_fp16: ushort storage seen through a half pointer.
            return (
                f"__local ushort {name}_bits[{length}]{self.local_attributes}; "
                f"__local half* const {name} = (__local half*){name}_bits"
            )
        return f"__local {self.storage_type(dtype)} {name}[{length}]{self.local_attributes}"

    def barrier(self) -> str:
        return "barrier(CLK_LOCAL_MEM_FENCE)"

    def bounds_helper(self) -> str:
        return _IN_BOUNDS

    def load(self, ptr: str, index: str, dtype: DType) -> str:
        if dtype is DType.F16:
            return f"vload_half({index}, {ptr})"
        if dtype is DType.BF16:
            return f"zyx_bf16_to_f32({ptr}[{index}])"
        return f"{ptr}[{index}]"

    def store(self, ptr: str, index: str, value: str, dtype: DType) -> str:
        if dtype is DType.F16:
            return f"vstore_half_rte({value}, {index}, {ptr})"
        if dtype is DType.BF16:
            return f"{ptr}[{index}] = zyx_f32_to_bf16({value})"
        return f"{ptr}[{index}] = {value}"

    def round16(self, x: str, dtype: DType) -> str:
        if dtype is DType.F16:
            return f"zyx_round_f16({x})"
        return f"zyx_bf16_to_f32(zyx_f32_to_bf16({x}))"

    def bits16(self, x: str, dtype: DType) -> str:
        return f"zyx_f16_bits({x})" if dtype is DType.F16 else f"zyx_f32_to_bf16({x})"

    def from_bits16(self, bits: str, dtype: DType) -> str:
        return f"zyx_f16_from_bits({bits})" if dtype is DType.F16 else f"zyx_bf16_to_f32({bits})"

    def cast(self, x: str, src: DType, dst: DType) -> str:
        if dst is DType.F16 and src is DType.F64:
            return f"zyx_round_f16_f64({x})"
        return super().cast(x, src, dst)


class NvidiaOpenCLDialect(PtxDialect, OpenCLDialect):
    """OpenCL C with inline PTX for NVIDIA's OpenCL on sm_80 and later (module docstring)."""

    local_attributes = " __attribute__((aligned(16)))"
    asm, volatile = "__asm__", "__volatile__"

    def pair_word(self, fragment: str, at: int, dtype: DType) -> str:
        lo, hi = (self.bits16(f"{fragment}[{at + i}]", dtype) for i in range(2))
        return f"((uint){lo} | ((uint){hi} << 16))"

    def unpair(self, word: str, fragment: str, at: int, dtype: DType) -> str:
        lo = self.from_bits16(f"(ushort)({word} & 0xffffu)", dtype)
        hi = self.from_bits16(f"(ushort)({word} >> 16)", dtype)
        return f"{fragment}[{at}] = {lo}; {fragment}[{at + 1}] = {hi};"

    def shared_address(self, pointer: str) -> str:
        return f"(uint)(ulong)({pointer})"

    def global_address(self, pointer: str) -> str:
        return f"(ulong)({pointer})"
