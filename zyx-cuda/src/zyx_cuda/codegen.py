"""The CUDA C dialect of ``zyx.codegen``: one ``extern "C" __global__`` function per kernel.

f16 and bf16 live in memory as ``__half`` / ``__nv_bfloat16`` (``cuda_fp16.h``,
``cuda_bf16.h``) and compute in ``float``, as the core renderer prescribes; the headers are
included only by kernels that use those types, so most kernels compile without any header.

Local memory (``Define`` with ``Storage.LOCAL``) is carved out of one dynamic
``extern __shared__`` array: static ``__shared__`` arrays stop at 48 KiB, dynamic shared
memory reaches the device's opt-in maximum. ``shared_bytes(kernel)`` is what a launch asks for.

Register ``Define``s of f16 and bf16 hold them as memory does (``register_type``), and the
elements a kernel only moves (``Kernel.copies``: a matmul's operands, from global memory
through registers and shared memory into fragments) are moved as held, never converted.

``Mma``, ``LdMatrix`` and the asynchronous copies are inline PTX, rendered by
``zyx.codegen.ptx``; here a fragment's pair is a ``__half2`` or ``__nv_bfloat162``, and the
copies call helpers that copy at once below sm_80 (NVRTC picks the architecture after
rendering), where ``cp.async`` does not exist.

Bounds-checked (``bounds_checked``), a kernel takes ``long long* zyx_err`` and a ``long long``
element count per buffer param after its own params (``zyx.codegen.c``).
"""

from __future__ import annotations

from zyx.codegen.ptx import (
    COMMIT_GROUP,
    CP_ASYNC,
    CP_ASYNC_16,
    WAIT_GROUP,
    PtxDialect,
)
from zyx.codegen.ptx import in_words as in_words  # where tests/cuda asked for it first
from zyx.dtypes import DType
from zyx.ir.ops import (
    Cast,
    CopyAsync,
    Define,
    Kernel,
    LdMatrix,
    Mma,
    Range,
    Ref,
    Scope,
    Shuffle,
    Storage,
    Store,
    WaitCopies,
)

_STORAGE = {
    DType.BOOL: "bool", DType.U8: "unsigned char", DType.U16: "unsigned short",
    DType.U32: "unsigned int", DType.U64: "unsigned long long", DType.I8: "signed char",
    DType.I16: "short", DType.I32: "int", DType.I64: "long long", DType.F16: "__half",
    DType.BF16: "__nv_bfloat16", DType.F32: "float", DType.F64: "double",
}  # fmt: skip

_AXES = "xyz"
_SHARED = "zyx_shared_memory"
_SHARED_ALIGN = 16

# math.h's INFINITY and NAN do not exist under NVRTC without headers: build them from bits.
_SPECIAL_F32 = {"inf": "__int_as_float(0x7f800000)", "nan": "__int_as_float(0x7fffffff)"}
_SPECIAL_F64 = {
    "inf": "__longlong_as_double(0x7ff0000000000000LL)",
    "nan": "__longlong_as_double(0x7fffffffffffffffLL)",
}


def half_types(kernel: Kernel) -> frozenset[DType]:
    """The 16-bit float types ``kernel`` uses."""
    return kernel.used_dtypes & {DType.F16, DType.BF16}


def shared_layout(kernel: Kernel) -> dict[Ref, int]:
    """Byte offset of each local-memory ``Define`` in the dynamic shared array."""
    offsets, end = {}, 0
    for ref, op in enumerate(kernel.ops):
        if isinstance(op, Define) and op.storage is Storage.LOCAL:
            start = -(-end // _SHARED_ALIGN) * _SHARED_ALIGN
            offsets[ref] = start
            end = start + op.length * op.dtype.itemsize
    return offsets


def shared_bytes(kernel: Kernel) -> int:
    """Dynamic shared memory a launch of ``kernel`` needs."""
    total = 0
    for ref, offset in shared_layout(kernel).items():
        op = kernel.ops[ref]
        assert isinstance(op, Define)
        total = max(total, offset + op.length * op.dtype.itemsize)
    return total


_IN_BOUNDS = """\
static __device__ int zyx_in_bounds(long long* err, long long index, long long length,
                                    long long op) {
  if (index >= 0 && index < length) return 1;
  if (atomicCAS((unsigned long long*)err, 0ULL, 1ULL) == 0ULL) {
    err[1] = op;
    err[2] = index;
    err[3] = length;
  }
  return 0;
}
"""


_PAIR = {DType.F16: "__halves2half2", DType.BF16: "__halves2bfloat162"}
"""The function that makes a pair of each 16-bit float type."""

_PACK_HELPER = """\
template <typename T> static __device__ __forceinline__ unsigned zyx_pair_bits(T pair) {
  return *reinterpret_cast<unsigned*>(&pair);
}
template <typename T> static __device__ __forceinline__ void zyx_unpair(unsigned bits, T& lo,
                                                                       T& hi) {
  unsigned short low = bits & 0xffffu, high = bits >> 16;
  lo = *reinterpret_cast<T*>(&low);
  hi = *reinterpret_cast<T*>(&high);
}
"""


_COPY_HELPERS = f"""\
template <int N> struct alignas(N) zyx_bytes {{ unsigned w[N / 4]; }};
template <int N> static __device__ __forceinline__ void zyx_copy_async(void* dst, const void* src,
                                                                      bool valid) {{
#if __CUDA_ARCH__ >= 800
  unsigned at = (unsigned)__cvta_generic_to_shared(dst);
  if constexpr (N == 16) {{
    asm volatile("{CP_ASYNC_16}"
                 :: "r"(at), "l"(src), "r"(valid ? 16 : 0) : "memory");
  }} else {{
    asm volatile("{CP_ASYNC}"
                 :: "r"(at), "l"(src), "n"(N), "r"(valid ? N : 0) : "memory");
  }}
#else
  *(zyx_bytes<N>*)dst = valid ? *(const zyx_bytes<N>*)src : zyx_bytes<N>{{}};
#endif
}}
static __device__ __forceinline__ void zyx_commit_copies() {{
#if __CUDA_ARCH__ >= 800
  asm volatile("{COMMIT_GROUP}" ::: "memory");
#endif
}}
template <int P> static __device__ __forceinline__ void zyx_wait_copies() {{
#if __CUDA_ARCH__ >= 800
  asm volatile("{WAIT_GROUP}" :: "n"(P) : "memory");
#endif
}}
"""
"""``cp.async`` and its groups, with their synchronous stand-ins below sm_80."""


def _copies(kernel: Kernel) -> bool:
    """Whether ``kernel`` has a ``CopyAsync``."""
    return any(isinstance(op, CopyAsync) for op in kernel.ops)


def _warp_matrices(kernel: Kernel) -> bool:
    """Whether ``kernel`` has an ``Mma`` or ``LdMatrix``."""
    return any(isinstance(op, (Mma, LdMatrix)) for op in kernel.ops)


class CudaDialect(PtxDialect):
    """CUDA C++ as NVRTC compiles it."""

    name = "cuda"
    restrict = "__restrict__"

    moves_as_held = True

    def storage_type(self, dtype: DType) -> str:
        return _STORAGE[dtype]

    def register_type(self, dtype: DType) -> str:
        return self.storage_type(dtype)

    def preamble(self, kernel: Kernel) -> str:
        halves = half_types(kernel)
        lines = []
        if DType.F16 in halves:
            lines.append("#include <cuda_fp16.h>")
        if DType.BF16 in halves:
            lines.append("#include <cuda_bf16.h>")
        if shared_layout(kernel):
            lines.append(f"extern __shared__ __align__({_SHARED_ALIGN}) char {_SHARED}[];")
        if _warp_matrices(kernel):
            lines.append(_PACK_HELPER)
        if _copies(kernel) and not self.bounds_checked:
            lines.append(_COPY_HELPERS)
        return "\n".join(lines)

    def signature(self, kernel: Kernel, name: str, params: list[str]) -> str:
        local = kernel.local_size
        threads = local[0] * local[1] * local[2]
        # The bound lets ptxas spend registers for exactly this block size.
        head = f'extern "C" __global__ void __launch_bounds__({threads}) {name}'
        return f"{head}({', '.join(params)})"

    def range_index(self, op: Range) -> str:
        builtin = "blockIdx" if op.scope is Scope.GROUP else "threadIdx"
        return f"(long long){builtin}.{_AXES[op.axis]}"

    def local_decl(self, dtype: DType, name: str, length: int) -> str:
        raise AssertionError("local memory is rendered by render_op from the shared layout")

    def barrier(self) -> str:
        return "__syncthreads()"

    def bounds_helper(self) -> str:
        return _IN_BOUNDS

    def pair_word(self, fragment: str, at: int, dtype: DType) -> str:
        return f"zyx_pair_bits({_PAIR[dtype]}({fragment}[{at}], {fragment}[{at + 1}]))"

    def unpair(self, word: str, fragment: str, at: int, dtype: DType) -> str:
        return f"zyx_unpair({word}, {fragment}[{at}], {fragment}[{at + 1}]);"

    def shared_address(self, pointer: str) -> str:
        return f"(unsigned)__cvta_generic_to_shared({pointer})"

    def async_copy(self, size: int, dst: str, src: str, valid: str) -> str:
        return f"zyx_copy_async<{size}>({dst}, {src}, {valid});"

    def commit_copies(self) -> str:
        return "" if self.bounds_checked else "zyx_commit_copies();"

    def wait_copies(self, op: WaitCopies) -> str:
        return "" if self.bounds_checked else f"zyx_wait_copies<{op.pending}>();"

    def shuffle(self, kernel: Kernel, op: Shuffle) -> str:
        x, dtype = self.expr(kernel, op.x), kernel.dtype_of(op.x)
        if not dtype.is_float and dtype.itemsize < 4:  # no overload for bool, 8 or 16-bit ints
            t = self.value_type(dtype)
            return f"({t})__shfl_xor_sync(0xffffffffu, (int){x}, {op.mask})"
        return f"__shfl_xor_sync(0xffffffffu, {x}, {op.mask})"

    def render_op(self, kernel: Kernel, ref: Ref) -> str:
        op = kernel.ops[ref]
        if isinstance(op, Define) and op.storage is Storage.LOCAL:
            t = self.storage_type(op.dtype)
            offset = shared_layout(kernel)[ref]
            return f"{t}* const v{ref} = ({t}*)({_SHARED} + {offset});"
        if isinstance(op, Cast) and self.rounded_by_stores(kernel, ref):
            return ""  # each Store rounds its float once (below)
        if isinstance(op, Store) and self.rounded_by_stores(kernel, op.value):
            cast = kernel.ops[op.value]
            assert isinstance(cast, Cast)
            dst, index, x = (self.expr(kernel, r) for r in (op.dst, op.index, cast.x))
            return self.store(dst, index, x, cast.dtype) + ";"
        return super().render_op(kernel, ref)

    def rounded_by_stores(self, kernel: Kernel, ref: Ref) -> bool:
        """Whether ``ref`` is a ``Cast`` of an f32 to f16 or bf16 that only ``Store``s store
        (not bounds-checked): rendered as each store's one conversion of the f32 (the same
        value; a matmul's outputs). Else the cast rounds to a float and the store converts
        that again: ptxas kept three instructions an element where one does."""
        op = kernel.ops[ref]
        if self.bounds_checked or not isinstance(op, Cast) or op.dtype not in _PAIR:
            return False
        if kernel.dtype_of(op.x) is not DType.F32:
            return False
        users = [kernel.ops[u] for u in kernel.users.get(ref, ())]
        return all(
            isinstance(u, Store) and u.value == ref and ref not in (u.dst, u.index) for u in users
        )

    def load(self, ptr: str, index: str, dtype: DType) -> str:
        if dtype is DType.F16:
            return f"__half2float({ptr}[{index}])"
        if dtype is DType.BF16:
            return f"__bfloat162float({ptr}[{index}])"
        return f"{ptr}[{index}]"

    def store(self, ptr: str, index: str, value: str, dtype: DType) -> str:
        if dtype is DType.F16:
            value = f"__float2half_rn({value})"
        elif dtype is DType.BF16:
            value = f"__float2bfloat16_rn({value})"
        return f"{ptr}[{index}] = {value}"

    def round16(self, x: str, dtype: DType) -> str:
        if dtype is DType.F16:
            return f"__half2float(__float2half_rn({x}))"
        return f"__bfloat162float(__float2bfloat16_rn({x}))"

    def bits16(self, x: str, dtype: DType) -> str:
        if dtype is DType.F16:
            return f"__half_as_ushort(__float2half_rn({x}))"
        return f"__bfloat16_as_ushort(__float2bfloat16_rn({x}))"

    def from_bits16(self, bits: str, dtype: DType) -> str:
        if dtype is DType.F16:
            return f"__half2float(__ushort_as_half({bits}))"
        return f"__bfloat162float(__ushort_as_bfloat16({bits}))"

    def cast(self, x: str, src: DType, dst: DType) -> str:
        # f16 rounds once from double; bf16 goes through float, as the IR defines it.
        if src is DType.F64 and dst is DType.F16:
            return f"__half2float(__double2half({x}))"
        return super().cast(x, src, dst)

    def infinity(self, dtype: DType) -> str:
        return (_SPECIAL_F64 if dtype is DType.F64 else _SPECIAL_F32)["inf"]

    def nan(self, dtype: DType) -> str:
        return (_SPECIAL_F64 if dtype is DType.F64 else _SPECIAL_F32)["nan"]

    def function(self, name: str, dtype: DType) -> str:
        return name if dtype is DType.F64 else f"{name}f"
