"""The host C dialect: a kernel becomes one C function over all its work-groups.

The entry point is ``void zyx_kernel_NAME(void* const* args, int32_t nthreads)``:
``args[i]`` points to param ``i``'s buffer, or to its scalar value for a ``Variable``. A
bounds-checked kernel (``zyx.codegen.c``) takes two more: ``args[n]`` its error record
(``int64 [4]``) and ``args[n + 1]`` an ``int64`` per param, the element count of each buffer. One
pointer array keeps the ctypes call cheap (the device fills it in place per launch).
``nthreads`` is the OpenMP team size; 0 means OpenMP's default.

Work-groups are loops spread over threads by ``#pragma omp parallel for collapse(n)
schedule(static)``: one contiguous chunk of groups per thread. Inside a group, work-items
are loops run in phases between barriers (see ``zyx.host.phases``); the innermost loop runs
over axis 0 of the work-items, so consecutive items are consecutive iterations the compiler
can vectorize.

f16 is C's ``_Float16`` where the compiler has it, else 16-bit integers converted in
software; bf16 is always converted in software (round to nearest even). Both compute in
float. Signed overflow wraps, as in the interpreter, because the compiler runs with
``-fwrapv``.
"""

from __future__ import annotations

import math

from zyx.codegen.c import ERROR_RECORD, CDialect, Source, constant_divisor, length_name
from zyx.dtypes import DType
from zyx.host.phases import GroupLoop, Guard, Hoisted, Phase, Schedule, Step, schedule
from zyx.ir.ops import (
    Binary,
    BOp,
    Cast,
    Const,
    Define,
    EndIf,
    EndLoop,
    Fma,
    If,
    Kernel,
    Load,
    Loop,
    Param,
    ParamKind,
    Range,
    Ref,
    Scope,
    SymDim,
)

PARALLEL_LOADS = 1 << 20
"""Work from which a launch spreads over threads: loads from global memory, each counted
as many times as the loops around it run (``HostDialect.loop_work``). A group of a
CPU layout (``zyx.graph.cpu``) loops over its rows, one or a few loads an element; a
matmul's few work-items each load blocks of a and b per step of k. Smaller kernels
(a 64 x 48 x 80 matmul: 15 us on one thread) finish before sleeping OpenMP workers wake
up, and on a busy machine a worker may wait for a whole time slice (milliseconds) before
it runs."""

_STORAGE = {
    DType.BOOL: "bool", DType.U8: "uint8_t", DType.U16: "uint16_t", DType.U32: "uint32_t",
    DType.U64: "uint64_t", DType.I8: "int8_t", DType.I16: "int16_t", DType.I32: "int32_t",
    DType.I64: "int64_t", DType.BF16: "uint16_t", DType.F32: "float", DType.F64: "double",
}  # fmt: skip

_HEADERS = """\
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
"""

_BF16 = """\
static inline float zyx_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline uint16_t zyx_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* round to nearest even */
}
"""

# For compilers without _Float16. float -> half after F. Giesen's float_to_half_fast3_rtne:
# the subnormal case lets the FPU round by adding a magic number.
_SOFT_F16 = """\
static inline float zyx_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, u;
  float f;
  if (em >= 0x7c00u) {
    u = sign | 0x7f800000u | ((em & 0x3ffu) << 13); /* inf, NaN */
  } else if (em >= 0x0400u) {
    u = sign | ((em << 13) + 0x38000000u); /* normal: rebias the exponent by 112 */
  } else {
    f = (float)em * 0x1p-24f; /* subnormal: exact in float */
    memcpy(&u, &f, sizeof u);
    u |= sign;
  }
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline uint16_t zyx_f32_to_f16(float value) {
  uint32_t u, sign;
  memcpy(&u, &value, sizeof u);
  sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u >= 0x47800000u) return (uint16_t)(sign | (u > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (u < 0x38800000u) { /* subnormal or zero */
    float f, magic = 0.5f;
    memcpy(&f, &u, sizeof f);
    f += magic;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(sign | (u - 0x3f000000u));
  }
  u += 0xc8000fffu + ((u >> 13) & 1u); /* rebias by -112, round to nearest even */
  return (uint16_t)(sign | (u >> 13));
}
"""


# The bits of a _Float16, for nextafter (CDialect.nextafter16).
_NATIVE_F16_BITS = """\
static inline uint16_t zyx_f16_bits(float f) {
  _Float16 h = (_Float16)f;
  uint16_t u;
  memcpy(&u, &h, sizeof u);
  return u;
}
static inline float zyx_f16_from_bits(uint16_t u) {
  _Float16 h;
  memcpy(&h, &u, sizeof h);
  return (float)h;
}
"""


# A double to float with round-to-odd: an inexact result keeps its last bit set, so that a
# later rounding to f16 (11 bits against float's 24) rounds the double once, not twice.
_F32_ODD = """\
static inline float zyx_f32_odd(double x) {
  float f = (float)x;
  if ((double)f != x && x == x && !isinf(f)) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (!(u & 1u)) u += fabs((double)f) < fabs(x) ? 1u : 0xffffffffu; /* toward x */
    memcpy(&f, &u, sizeof f);
  }
  return f;
}
"""


_IN_BOUNDS = """\
static int zyx_in_bounds(int64_t* err, int64_t index, int64_t length, int64_t op) {
  if (index >= 0 && index < length) return 1;
  int64_t none = 0;
  if (__atomic_compare_exchange_n(&err[0], &none, 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    err[1] = op;
    err[2] = index;
    err[3] = length;
  }
  return 0;
}
"""


class HostDialect(CDialect):
    """Host C (C11 with OpenMP pragmas). One instance renders one kernel at a time."""

    name = "host-c"

    def __init__(self, *, native_f16: bool = True, wide_vectors: bool = False) -> None:
        self.native_f16 = native_f16
        self.wide_vectors = wide_vectors
        """Render kernels that compute by ``Fma`` (a matmul's blocks) for 512-bit vectors
        where the CPU has them (AVX-512; gcc's ``prefer-vector-width``): gcc keeps code to
        256 bits there, a choice for code at large, which the matmul's compute-bound
        blocks lose by (1024^3 f32, one thread, this VM: 8 x 32, laid out for 512 bits
        (``zyx.graph.matmul.AVX512_VARIANTS``), 120 GFLOP/s; 8 x 16 94 at 512 bits, 76 at
        256). Other kernels keep the compiler's choice."""
        self._schedule = Schedule([], frozenset(), frozenset())
        self._local_axes: list[int] = []

    # ---- types and expressions ----------------------------------------------------------

    def storage_type(self, dtype: DType) -> str:
        if dtype is DType.F16:
            return "_Float16" if self.native_f16 else "uint16_t"
        return _STORAGE[dtype]

    def preamble(self, kernel: Kernel) -> str:
        dtypes = kernel.used_dtypes
        parts = [_HEADERS]
        if DType.BF16 in dtypes:
            parts.append(_BF16)
        if DType.F16 in dtypes and self.native_f16:
            parts.append(_NATIVE_F16_BITS)
        if DType.F16 in dtypes and not self.native_f16:
            parts.append(_SOFT_F16)
            if DType.F64 in dtypes:
                parts.append(_F32_ODD)
        return "".join(parts)

    def load(self, ptr: str, index: str, dtype: DType) -> str:
        return self.from_storage(f"{ptr}[{index}]", dtype)

    def from_storage(self, value: str, dtype: DType) -> str:
        if dtype is DType.BF16:
            return f"zyx_bf16_to_f32({value})"
        if dtype is DType.F16:
            return f"(float){value}" if self.native_f16 else f"zyx_f16_to_f32({value})"
        return value

    def store(self, ptr: str, index: str, value: str, dtype: DType) -> str:
        return f"{ptr}[{index}] = {self.to_storage(value, dtype)}"

    def to_storage(self, value: str, dtype: DType) -> str:
        if dtype is DType.BF16:
            return f"zyx_f32_to_bf16({value})"
        if dtype is DType.F16:
            return f"(_Float16)({value})" if self.native_f16 else f"zyx_f32_to_f16({value})"
        return value

    def bits16(self, x: str, dtype: DType) -> str:
        native = dtype is DType.F16 and self.native_f16
        return f"zyx_f16_bits({x})" if native else self.to_storage(x, dtype)

    def from_bits16(self, bits: str, dtype: DType) -> str:
        native = dtype is DType.F16 and self.native_f16
        return f"zyx_f16_from_bits({bits})" if native else self.from_storage(bits, dtype)

    def round16(self, x: str, dtype: DType) -> str:
        if dtype is DType.F16 and self.native_f16:
            return f"(float)(_Float16)({x})"
        return self.from_storage(self.to_storage(x, dtype), dtype)

    def cast(self, x: str, src: DType, dst: DType) -> str:
        if dst is DType.F16 and self.native_f16:
            return f"(float)(_Float16)({x})"  # one rounding, also from double and int64
        if dst is DType.F16 and src is DType.F64:
            return self.round16(f"zyx_f32_odd({x})", dst)
        return super().cast(x, src, dst)

    def function(self, name: str, dtype: DType) -> str:
        return name if dtype is DType.F64 else f"{name}f"

    def binary(self, op: BOp, a: str, b: str, dtype: DType, divisor: int | None = None) -> str:
        if op in (BOp.MAX, BOp.MIN) and dtype.is_float:
            # fmax and fmin (a NaN operand loses) as selects: x86 has no vector fmax, and
            # compilers leave a loop that calls fmax unvectorized.
            return f"({b} != {b} || {a} {'>' if op is BOp.MAX else '<'} {b} ? {a} : {b})"
        return super().binary(op, a, b, dtype, divisor)

    # ---- the kernel's frame -------------------------------------------------------------

    def signature(self, kernel: Kernel, name: str, params: list[str]) -> str:
        wide = self.wide_vectors and any(isinstance(op, Fma) for op in kernel.ops)
        attribute = '__attribute__((target("prefer-vector-width=512"))) ' if wide else ""
        return f"{attribute}void {name}(void* const* args, int32_t nthreads)"

    def range_index(self, op: Range) -> str:
        return f"{'g' if op.scope is Scope.GROUP else 'l'}{op.axis}"

    def local_decl(self, dtype: DType, name: str, length: int) -> str:
        return f"{self.storage_type(dtype)} {name}[{length}]"

    def barrier(self) -> str:
        raise AssertionError("the host renders barriers as phase boundaries")

    def bounds_helper(self) -> str:
        return _IN_BOUNDS

    def ref_name(self, kernel: Kernel, ref: Ref) -> str:
        name = super().ref_name(kernel, ref)
        return f"{name}[lid]" if ref in self._schedule.spilled else name

    def declare(self, name: str, dtype: DType, value: str) -> str:
        if int(name[1:]) in self._schedule.spilled:  # render_op names value %N "vN"
            return f"{name}[lid] = {value};"
        return super().declare(name, dtype, value)

    # ---- the work of a launch -----------------------------------------------------------

    def loop_work(self, kernel: Kernel) -> int | str:
        """The global loads a work-item runs (at least 1): each load times the trips of
        the loops around it. A trip count is its value where it is a constant, a C
        expression of the launch's Variables where it is computed from those and the
        group and item indices (taken as the first group's and item's: a last chunk may
        be shorter), else 1 (it varies, in ways unknown before the kernel runs). An
        ``int`` where every count is known, else a C expression in double (no product
        overflows)."""
        loads: dict[tuple[int | str, ...], int] = {}
        trips: list[int | str] = []
        for op in kernel.ops:
            if isinstance(op, Loop):
                trips.append(self._trips(kernel, op.size))
            elif isinstance(op, EndLoop):
                trips.pop()
            elif isinstance(op, Load) and isinstance(kernel.ops[op.src], Param):
                loads[tuple(trips)] = loads.get(tuple(trips), 0) + 1
        if all(isinstance(t, int) for nest in loads for t in nest):
            return max(1, sum(n * math.prod(nest) for nest, n in loads.items()))  # type: ignore[misc]
        return " + ".join(
            " * ".join([str(n), *(f"(double){t}" for t in nest)]) for nest, n in loads.items()
        )

    def _trips(self, kernel: Kernel, size: Ref) -> int | str:
        op = kernel.ops[size]
        if isinstance(op, Const):
            return max(int(op.value), 0)
        inline = self._inline(kernel, size)
        return 1 if inline is None else f"({inline})"

    def _inline(self, kernel: Kernel, ref: Ref, depth: int = 8) -> str | None:
        """Value ``ref`` as one C expression of the kernel's Variables and constants (a
        group or item index as 0), or ``None`` where it depends on anything else (or is
        more than ``depth`` ops deep)."""
        op = kernel.ops[ref]
        if isinstance(op, Const):
            return self.literal(op)
        if isinstance(op, Param):
            return self.ref_name(kernel, ref) if op.kind is ParamKind.VARIABLE else None
        if isinstance(op, Range):  # the first group's, the first item's
            return self.int_literal(0, DType.I64)
        if depth == 0 or not isinstance(op, (Binary, Cast)):
            return None
        if isinstance(op, Cast):
            inner = self._inline(kernel, op.x, depth - 1)
            return None if inner is None else self.cast(inner, kernel.dtype_of(op.x), op.dtype)
        a, b = self._inline(kernel, op.a, depth - 1), self._inline(kernel, op.b, depth - 1)
        if a is None or b is None:
            return None
        divisor = constant_divisor(kernel, op)
        return self.binary(op.op, a, b, kernel.dtype_of(op.a), divisor)

    # ---- the renderer -------------------------------------------------------------------

    def render(self, kernel: Kernel) -> Source:
        """The kernel as host C; raises IRError where a barrier loop's trip count varies."""
        self._schedule = schedule(kernel)
        self._local_axes = _axes(kernel, Scope.LOCAL)
        name = self.entry_name(kernel)
        out = _Lines()
        out.add(self.signature(kernel, name, []) + " {", +1)
        self.unpack_params(kernel, out)
        self.group_loops(kernel, out)
        self.group_body(kernel, out)
        out.add("}", -1)
        out.add("}", -1)
        preamble = self.preamble(kernel) + (_IN_BOUNDS if self.bounds_checked else "")
        return Source(name, preamble + "\n" + out.text(), self.name)

    def unpack_params(self, kernel: Kernel, out: _Lines) -> None:
        for i, param in enumerate(kernel.params):
            decl = self.param_decl(param, f"p{i}")
            if param.kind is ParamKind.VARIABLE:
                value = f"*(const {self.value_type(param.dtype)}*)args[{i}]"
                if param.dtype in (DType.F16, DType.BF16):
                    value = self.round16(value, param.dtype)
            else:
                const = "const " if param.kind is ParamKind.GLOBAL else ""
                value = f"({const}{self.storage_type(param.dtype)}*)args[{i}]"
            out.add(f"{decl} = {value};")
        if self.bounds_checked:  # the record, then the element counts, past the params
            count = len(kernel.params)
            out.add(f"int64_t* const {ERROR_RECORD} = (int64_t*)args[{count}];")
            for i, param in enumerate(kernel.params):
                if param.kind is not ParamKind.VARIABLE:
                    lengths = f"((const int64_t*)args[{count + 1}])"
                    out.add(f"const int64_t {length_name(i)} = {lengths}[{i}];")

    def group_loops(self, kernel: Kernel, out: _Lines) -> None:
        """Open the loops over work-groups, shared among OpenMP threads."""
        axes = _axes(kernel, Scope.GROUP)
        for axis in axes:
            out.add(f"const int64_t G{axis} = {_group_count(kernel.global_size[axis])};")
        if axes:
            work = self.loop_work(kernel)
            if isinstance(work, int):
                work = str(math.prod(kernel.local_size) * work)
            else:
                work = f"(double){math.prod(kernel.local_size)} * ({work})"
            items = " * ".join([*(f"G{a}" for a in axes), work])
            out.add(
                f"#pragma omp parallel for collapse({len(axes)}) schedule(static) "
                f"num_threads(nthreads > 0 ? nthreads : omp_get_max_threads()) "
                f"if({items} >= {PARALLEL_LOADS})"
            )
        for axis in reversed(axes):
            out.add(f"for (int64_t g{axis} = 0; g{axis} < G{axis}; ++g{axis})")
        out.add("{", +1)

    def group_body(self, kernel: Kernel, out: _Lines) -> None:
        """Group ranges, local memory, spill arrays, then the steps."""
        plan = self._schedule
        size = kernel.local_size[0] * kernel.local_size[1] * kernel.local_size[2]
        for ref, op in enumerate(kernel.ops):
            if ref in plan.group_level and isinstance(op, (Range, Define)):
                out.add(self.render_op(kernel, ref))
        for ref in sorted(plan.spilled):
            op = kernel.ops[ref]
            t = self.value_type(kernel.dtype_of(ref))
            length = f"[{op.length}]" if isinstance(op, Define) else ""
            out.add(f"{t} v{ref}[{size}]{length};")
        self.steps(kernel, plan.steps, out)

    def steps(self, kernel: Kernel, steps: list[Step], out: _Lines) -> None:
        for step in steps:
            if isinstance(step, Hoisted):
                out.add(self.render_op(kernel, step.ref))
            elif isinstance(step, GroupLoop):
                out.add(self.render_op(kernel, step.ref), +1)
                self.steps(kernel, step.steps, out)
                out.add("}", -1)
            else:
                self.phase(kernel, step, out)

    def phase(self, kernel: Kernel, phase: Phase, out: _Lines) -> None:
        """``phase``'s ops in loops over the group's work-items; with a bounds check
        ``l0 + offset < limit`` (``Guard``), items of axis 0 stop at ``limit - offset``."""
        guard = phase.guard
        if guard is None:
            self.items(kernel, phase, out)
            return
        end, limit = f"end{guard.ref}", self.expr(kernel, guard.limit)
        if guard.offset is None:
            out.add(f"int64_t {end} = {limit};")
            self.items(kernel, phase, out, (end, guard))
            return
        # The bound is exact unless l0 + offset or limit - offset wraps for some item:
        # then the If stays, and each item's own wrapped sum decides.
        offset, items = self.expr(kernel, guard.offset), kernel.local_size[0]
        out.add(
            f"if ({offset} <= INT64_MAX - {items - 1} && ({offset} >= 0 ? "
            f"{limit} >= INT64_MIN + {offset} : {limit} <= INT64_MAX + {offset})) {{",
            +1,
        )
        out.add(f"int64_t {end} = {limit} - {offset};")
        self.items(kernel, phase, out, (end, guard))
        out.add("", -1)
        out.add("} else {", +1)
        self.items(kernel, phase, out)
        out.add("}", -1)

    def items(
        self, kernel: Kernel, phase: Phase, out: _Lines, bound: tuple[str, Guard] | None = None
    ) -> None:
        """The loops over the group's work-items running ``phase``'s ops; with a ``bound``
        ``(end, guard)``, axis 0 stops at the variable ``end`` and ``guard``'s ``If`` goes."""
        bounds = [str(size) for size in kernel.local_size]
        dropped = (-1, -1)
        if bound is not None:
            end, guard = bound
            out.add(f"if ({end} > {bounds[0]}) {end} = {bounds[0]};")
            bounds[0], dropped = end, (guard.ref, phase.stop - 1)  # the If and its EndIf
        for axis in reversed(self._local_axes):
            out.add(f"for (int64_t l{axis} = 0; l{axis} < {bounds[axis]}; ++l{axis})")
        out.add("{", +1)
        if self._schedule.spilled:
            out.add(f"const int64_t lid = {_flat_local(self._local_axes, kernel.local_size)};")
        for ref, op in enumerate(kernel.ops):
            if isinstance(op, Range) and op.scope is Scope.LOCAL:
                out.add(self.render_op(kernel, ref))
        for ref in range(phase.start, phase.stop):
            op = kernel.ops[ref]
            skip = ref in self._schedule.group_level or isinstance(op, (Param, Range))
            if skip or ref in dropped or (ref in self._schedule.spilled and isinstance(op, Define)):
                continue
            closes = isinstance(op, (EndLoop, EndIf))
            opens = isinstance(op, (Loop, If))
            out.add(self.render_op(kernel, ref), +1 if opens else -1 if closes else 0)
        out.add("}", -1)


class _Lines:
    """Indented source lines; ``add(line, +1)`` opens a block, ``add(line, -1)`` closes one."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def add(self, line: str, change: int = 0) -> None:
        if change < 0:
            self.depth += change
        if line:
            self.lines.append("  " * self.depth + line)
        if change > 0:
            self.depth += change

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _axes(kernel: Kernel, scope: Scope) -> list[int]:
    """The axes that have a range of ``scope``, ascending."""
    return sorted(op.axis for op in kernel.ops if isinstance(op, Range) and op.scope is scope)


def _group_count(size: int | SymDim) -> str:
    if isinstance(size, SymDim):
        return f"(p{size.param} + {size.div - 1}) / {size.div}"
    return str(size)


def _flat_local(axes: list[int], local: tuple[int, int, int]) -> str:
    """The work-item's index within its group, axis 0 fastest."""
    terms, stride = [], 1
    for axis in axes:
        terms.append(f"l{axis} * {stride}" if stride > 1 else f"l{axis}")
        stride *= local[axis]
    return " + ".join(terms) or "0"
