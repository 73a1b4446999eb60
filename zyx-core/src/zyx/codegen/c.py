"""One renderer for the C family of kernel languages; a dialect fills its hooks.

``CDialect.render(kernel)`` walks the op list once and emits one statement per op. Values
are typed locals (``v12``), params are ``p0, p1, ...``, constants are inlined as exact
literals. Every value is assigned to a variable of its own type, so C's integer
promotion never leaks into results (``u8 + u8`` wraps as in zyx).

f16 and bf16 are stored in memory as 16-bit types and computed in ``float``: a dialect
converts on load and store (``storage_type`` vs ``value_type``).

A dialect subclass names the types, builtins and qualifiers of its language (CUDA C,
OpenCL C, host C, or a third party's). The hooks are the methods below that are not
``render``/``render_op``.

**Bounds-checked kernels** (``bounds_checked``, ``zyx.debug.BOUNDS``): every ``Load`` and
``Store`` of a buffer param or a ``Define`` first calls ``zyx_in_bounds(zyx_err, index,
length, op)`` (the dialect's ``bounds_helper``), which is 1 where ``0 <= index < length``,
else records the first such access in the error record ``zyx_err`` (``int64 [4]``: nonzero,
the op's ref, the index, the length) and is 0: the load gives 0, the store is skipped. The
lengths of buffer params are hidden arguments ``zyx_len<i>`` (elements of param ``i``),
passed after the kernel's own with the record (``checked_params``); the launch reads the
record after the kernel and raises ``bounds_error`` of it.
"""

from __future__ import annotations

import hashlib
import keyword
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from zyx.dtypes import DType, round_to
from zyx.errors import BackendError, ErrorStatus
from zyx.ir.extent import out_of_bounds
from zyx.ir.ops import (
    Barrier,
    Binary,
    BOp,
    Cast,
    CommitCopies,
    Const,
    CopyAsync,
    Define,
    EndIf,
    EndLoop,
    Fma,
    If,
    Kernel,
    LdMatrix,
    Load,
    Loop,
    Mma,
    Op,
    Param,
    ParamKind,
    Range,
    Ref,
    Shuffle,
    Storage,
    Store,
    Unary,
    UOp,
    WaitCopies,
    Where,
    always,
)

_C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while bool half kernel global local private constant "
    "__kernel __global __local __device__ __global__ __shared__ main "
    # C99, C11 and C23
    "_Bool _Complex _Imaginary _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert "
    "_Thread_local _BitInt alignas alignof constexpr false true nullptr static_assert "
    "thread_local typeof typeof_unqual".split()
) | frozenset(keyword.kwlist)
# Kernels named like a math builtin clash with it in OpenCL C and in C with <math.h>.
_BUILTINS = frozenset(
    "abs fabs exp exp2 log log2 sqrt sin cos floor trunc pow fmod fmax fmin max min "
    "tan tanh asin acos atan sinh cosh asinh acosh atanh expm1 log1p log10 ceil rint "
    "atan2 hypot copysign nextafter fma barrier printf".split()
)
_RESERVED = _C_KEYWORDS | _BUILTINS


@dataclass(frozen=True)
class Source:
    """Rendered kernel source: the entry point's name, the code, and its dialect."""

    name: str
    code: str
    dialect: str

    @cached_property
    def digest(self) -> str:
        """SHA-256 of dialect and code: the key of on-disk caches."""
        return hashlib.sha256(f"{self.dialect}\0{self.code}".encode()).hexdigest()


def sanitize(name: str) -> str:
    """A C identifier made from ``name``: other characters become ``_``, keywords get one."""
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "_"
    if ident[0].isdigit():
        ident = "_" + ident
    return ident + "_" if ident in _RESERVED else ident


ENTRY_NAME_CHARS = 64
"""The longest entry point a dialect renders: drivers name symbols and files after kernels
(PoCL aborted on a kernel name of 251 characters), and profilers show them. A longer one
keeps its start and ends in a hash of the whole kernel name, so that it stays unique."""


def entry_symbol(prefix: str, name: str) -> str:
    """``prefix`` and the kernel name ``name`` as an identifier of at most
    ``ENTRY_NAME_CHARS`` characters."""
    ident = prefix + sanitize(name)
    if len(ident) <= ENTRY_NAME_CHARS:
        return ident
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{ident[: ENTRY_NAME_CHARS - len(digest) - 1]}_{digest}"


_BINARY_INFIX = {
    BOp.ADD: "+", BOp.SUB: "-", BOp.MUL: "*", BOp.DIV: "/", BOp.CMPLT: "<", BOp.CMPGT: ">",
    BOp.CMPGE: ">=", BOp.OR: "||", BOp.AND: "&&", BOp.BITXOR: "^", BOp.BITOR: "|",
    BOp.BITAND: "&", BOp.SHL: "<<", BOp.SHR: ">>", BOp.NOTEQ: "!=", BOp.EQ: "==",
}  # fmt: skip

_WRAPPING = frozenset({BOp.ADD, BOp.SUB, BOp.MUL, BOp.SHL})
"""The integer ops that may leave their type's range: they wrap in the IR."""


def constant_divisor(kernel: Kernel, op: Binary) -> int | None:
    """The value of an integer ``/`` or ``%``'s divisor where it is a constant, wrapped to
    its dtype as C converts the literal."""
    divisor = kernel.ops[op.b]
    if op.op not in (BOp.DIV, BOp.MOD) or not isinstance(divisor, Const):
        return None
    return None if divisor.dtype.is_float else int(divisor.wrapped)


_FLOAT_FUNCTIONS: dict[UOp | BOp, str] = {
    UOp.EXP: "exp", UOp.EXP2: "exp2", UOp.LN: "log", UOp.LOG2: "log2", UOp.SQRT: "sqrt",
    UOp.SIN: "sin", UOp.COS: "cos", UOp.FLOOR: "floor", UOp.TRUNC: "trunc", UOp.ABS: "fabs",
    UOp.TAN: "tan", UOp.TANH: "tanh", UOp.ASIN: "asin", UOp.ACOS: "acos", UOp.ATAN: "atan",
    UOp.SINH: "sinh", UOp.COSH: "cosh", UOp.ASINH: "asinh", UOp.ACOSH: "acosh",
    UOp.ATANH: "atanh", UOp.EXPM1: "expm1", UOp.LOG1P: "log1p", UOp.LOG10: "log10",
    UOp.CEIL: "ceil", UOp.RINT: "rint", BOp.MAX: "fmax", BOp.MIN: "fmin", BOp.POW: "pow",
    BOp.MOD: "fmod", BOp.ATAN2: "atan2", BOp.HYPOT: "hypot", BOp.COPYSIGN: "copysign",
    BOp.NEXTAFTER: "nextafter",
}  # fmt: skip
"""The C math function of each float op that is one (C99's names, as OpenCL C has them;
``function`` makes ``expf`` of ``exp`` where a language needs)."""


ERROR_RECORD = "zyx_err"
"""The name of the bounds-checked kernel's error record."""


def bounds_error(kernel: Kernel, record: Sequence[int]) -> BackendError | None:
    """The error of a bounds-checked launch of ``kernel`` whose error record (``int64 [4]``)
    the kernel left as ``record``: KernelLaunch naming the op, the param (or ``Define``)
    and the index, as the interpreter does; ``None`` where no access was out of bounds."""
    flag, ref, index, length = (int(x) for x in record)
    if not flag:
        return None
    if 0 <= ref < len(kernel.ops) and isinstance(kernel.ops[ref], (Load, Store)):
        message = out_of_bounds(kernel, ref, index, length)
    else:  # cannot happen: the kernel records the ref of one of its accesses
        message = f"kernel {kernel.name!r}: an access out of bounds, record {list(record)}"
    return BackendError(ErrorStatus.KERNEL_LAUNCH, message)


def length_name(position: int) -> str:
    """The hidden argument that holds the element count of buffer param ``position``."""
    return f"zyx_len{position}"


class CDialect:
    """The C-family renderer. Subclasses override the hooks for their language."""

    name = "c"
    indent = "  "
    bounds_checked = False
    """Render every load and store checked (the module docstring); set per instance."""

    # ---- hooks: types -------------------------------------------------------------------

    def storage_type(self, dtype: DType) -> str:
        """The type of an element in memory."""
        raise NotImplementedError

    def value_type(self, dtype: DType) -> str:
        """The type of a value in registers; f16 and bf16 compute in float."""
        return "float" if dtype in (DType.F16, DType.BF16) else self.storage_type(dtype)

    def register_type(self, dtype: DType) -> str:
        """The type of an element of a register ``Define``: a value's, or else its storage
        type, which ``load`` and ``store`` convert from and to as for memory."""
        return self.value_type(dtype)

    moves_as_held = False
    """Render the f16 and bf16 elements a kernel only moves (``Kernel.copies``) in their
    storage type, not converted to float and back (not bounds-checked)."""

    # ---- hooks: the kernel's frame ------------------------------------------------------

    def preamble(self, kernel: Kernel) -> str:
        """Code before the kernel: includes, extension pragmas, helper functions."""
        return ""

    def signature(self, kernel: Kernel, name: str, params: list[str]) -> str:
        """The kernel's declaration up to (excluding) the opening brace."""
        raise NotImplementedError

    def param_decl(self, param: Param, name: str) -> str:
        """One parameter in the signature."""
        if param.kind is ParamKind.VARIABLE:
            return f"const {self.value_type(param.dtype)} {name}"
        const = "const " if param.kind is ParamKind.GLOBAL else ""
        pointee = f"{self.global_qualifier}{const}{self.storage_type(param.dtype)}"
        return f"{pointee}* {self.restrict} {name}"

    global_qualifier = ""
    restrict = "restrict"

    def range_index(self, op: Range) -> str:
        """The expression for a work-group or work-item index."""
        raise NotImplementedError

    def local_decl(self, dtype: DType, name: str, length: int) -> str:
        """Declaration of work-group local memory."""
        raise NotImplementedError

    locals_at_top = False
    """Declare local memory at the top of the kernel, wherever its ``Define`` is (OpenCL C
    allows it nowhere else; local memory lives for the whole group anyway)."""

    def hoisted(self, op: Op) -> bool:
        """Whether ``op`` is rendered at the top of the kernel instead of in place."""
        return self.locals_at_top and isinstance(op, Define) and op.storage is Storage.LOCAL

    def barrier(self) -> str:
        raise NotImplementedError

    def mma(self, kernel: Kernel, op: Mma) -> str:
        """The statement of a warp's ``Mma``. A language without warp-level matrix ops
        refuses it (``check_limits`` refuses it first on a device without tensor cores)."""
        raise self.no_warp_matrices(kernel, op)

    def ldmatrix(self, kernel: Kernel, op: LdMatrix) -> str:
        """The statement of a warp's ``LdMatrix``; refused as ``mma`` is."""
        raise self.no_warp_matrices(kernel, op)

    def shuffle(self, kernel: Kernel, op: Shuffle) -> str:
        """The expression of a ``Shuffle``. A language whose work-items exchange no
        registers refuses it (``check_limits`` refuses it first on such a device)."""
        raise BackendError(
            ErrorStatus.KERNEL_COMPILATION,
            f"kernel {kernel.name!r}: the {self.name} dialect renders no Shuffle (a warp's "
            "register exchange); it compiles for CUDA only",
        )

    def copy_async(self, kernel: Kernel, ref: Ref, op: CopyAsync) -> str:
        """The statement of a ``CopyAsync``: here a copy at once, element by element as
        memory holds them (zeros, where its condition is false, stored as a value), each
        access checked in the bounds-checked mode; ``CommitCopies`` and ``WaitCopies`` are
        then nothing (``commit_copies``, ``wait_copies``)."""
        dtype = kernel.dtype_of(op.dst)
        e = lambda r: self.expr(kernel, r)  # noqa: E731 - local shorthand
        copies, zeros = [], []
        zero = self.literal(Const(dtype, 0))
        for j in range(op.count):
            at, src_at = f"{e(op.index)} + {j}", f"{e(op.src_index)} + {j}"
            copy = f"{e(op.dst)}[{at}] = {e(op.src)}[{src_at}];"
            cleared = self.store(e(op.dst), at, zero, dtype) + ";"
            if self.bounds_checked:
                check = self.in_bounds(kernel, ref, op.dst, at)
                copy = f"if ({check} && {self.in_bounds(kernel, ref, op.src, src_at)}) {copy}"
                cleared = f"if ({check}) {cleared}"
            copies.append(copy)
            zeros.append(cleared)
        if always(kernel.ops[op.cond]):
            return " ".join(copies)
        return f"if ({e(op.cond)}) {{ {' '.join(copies)} }} else {{ {' '.join(zeros)} }}"

    def commit_copies(self) -> str:
        """The statement of a ``CommitCopies`` (none where copies are made at once)."""
        return ""

    def wait_copies(self, op: WaitCopies) -> str:
        """The statement of a ``WaitCopies`` (none where copies are made at once)."""
        return ""

    def no_warp_matrices(self, kernel: Kernel, op: Mma | LdMatrix) -> BackendError:
        return BackendError(
            ErrorStatus.KERNEL_COMPILATION,
            f"kernel {kernel.name!r}: the {self.name} dialect renders no {type(op).__name__} "
            "(a warp's tensor-core matrix op): inline PTX does, for CUDA and NVIDIA's OpenCL "
            "(zyx.codegen.ptx)",
        )

    def checked_params(self, kernel: Kernel) -> list[str]:
        """The hidden parameters of a bounds-checked kernel, after its own: the error record,
        then ``length_name(i)`` of each buffer param ``i`` in order."""
        long = self.value_type(DType.I64)
        record = f"{self.global_qualifier}{long}* {self.restrict} {ERROR_RECORD}"
        lengths = [
            f"const {long} {length_name(i)}"
            for i, p in enumerate(kernel.params)
            if p.kind is not ParamKind.VARIABLE
        ]
        return [record, *lengths]

    def bounds_helper(self) -> str:
        """The definition of ``zyx_in_bounds`` (module docstring) in this language: it must
        record only the first violation, of whichever work-item, atomically."""
        raise NotImplementedError

    # ---- hooks: expressions -------------------------------------------------------------

    def load(self, ptr: str, index: str, dtype: DType) -> str:
        """Read one element from memory as a value of ``value_type(dtype)``."""
        return f"{ptr}[{index}]"

    def store(self, ptr: str, index: str, value: str, dtype: DType) -> str:
        """Write one value to memory (a statement, without the ``;``)."""
        return f"{ptr}[{index}] = {value}"

    def cast(self, x: str, src: DType, dst: DType) -> str:
        if dst is DType.BOOL:
            return f"({x} != 0)"
        if src is DType.F64 and dst is DType.F16:
            # The double itself: rounded to float first, a value halfway between two f16s
            # after that rounding but not before would round a second time, maybe wrongly.
            return self.round16(x, dst)
        if dst in (DType.F16, DType.BF16):  # bf16 rounds through float32 (the IR's definition)
            return self.round16(f"(float)({x})", dst)
        return f"({self.value_type(dst)})({x})"

    def round16(self, x: str, dtype: DType) -> str:
        """Round ``x`` to f16/bf16 precision (the result is still a float). ``x`` is of C
        type float, or double: an f64 cast to f16, or where ``function`` names a
        double-precision function. Round a double once, straight to f16 (``(half)x`` where
        the language has it, or round-to-odd to float first); the suite's f64 -> f16 cast
        test fails a dialect that converts it to float and rounds again."""
        raise NotImplementedError

    def float_literal(self, value: float, dtype: DType) -> str:
        value = round_to(value, dtype)
        if math.isnan(value):
            return self.nan(dtype)
        if math.isinf(value):
            return f"(-{self.infinity(dtype)})" if value < 0 else self.infinity(dtype)
        literal = f"{value.hex()}{'' if dtype is DType.F64 else 'f'}"
        # Bare, a negative literal after a unary minus would read as C's "--" operator.
        return f"({literal})" if literal.startswith("-") else literal

    def infinity(self, dtype: DType) -> str:
        """Positive infinity of a float ``dtype``'s value type."""
        return f"(({self.value_type(dtype)})INFINITY)"

    def nan(self, dtype: DType) -> str:
        """A quiet NaN of a float ``dtype``'s value type."""
        return f"(({self.value_type(dtype)})NAN)"

    def int_literal(self, value: int, dtype: DType) -> str:
        t = self.value_type(dtype)
        if -(2**31) < value < 2**31:
            return f"(({t}){value})"
        if value == -(2**63):
            return f"(({t})(-9223372036854775807{self.long_suffix} - 1))"
        unsigned = "" if dtype.is_signed else "U"
        return f"(({t}){value}{unsigned}{self.long_suffix})"

    long_suffix = "LL"

    def unary(self, op: UOp, x: str, dtype: DType) -> str:
        if op is UOp.NEG:
            return f"(-{x})" if dtype.is_float else self.negate(x, dtype)
        if op is UOp.BITNOT:
            if dtype is DType.BOOL:
                return f"(!{x})"
            # C computes ~ of an 8- or 16-bit int in int; the cast back says so (compilers warn).
            return f"(({self.value_type(dtype)})~{x})" if dtype.itemsize < 4 else f"(~{x})"
        if op is UOp.RECIPROCAL:
            return f"(1.0{'' if dtype is DType.F64 else 'f'} / {x})"
        if op is UOp.ABS and not dtype.is_float:
            return f"({x} < 0 ? {self.negate(x, dtype)} : {x})"
        return f"{self.function(_FLOAT_FUNCTIONS[op], dtype)}({x})"

    def binary(self, op: BOp, a: str, b: str, dtype: DType, divisor: int | None = None) -> str:
        """``a op b`` in ``dtype``. ``divisor`` is ``b``'s value where ``op`` is an integer
        ``/`` or ``%`` by a constant (for ``guarded_division``)."""
        if dtype.is_float and op is BOp.NEXTAFTER and dtype in (DType.F16, DType.BF16):
            return self.nextafter16(a, b, dtype)
        if dtype.is_float and op in _FLOAT_FUNCTIONS:
            return f"{self.function(_FLOAT_FUNCTIONS[op], dtype)}({a}, {b})"
        if op in (BOp.MAX, BOp.MIN):
            return f"({a} {'>' if op is BOp.MAX else '<'} {b} ? {a} : {b})"
        if op in (BOp.DIV, BOp.MOD) and not dtype.is_float:  # bools divide as ints in C
            return self.guarded_division(op, a, b, dtype, divisor)
        if op in _WRAPPING and dtype.is_int and dtype not in (DType.U32, DType.U64):
            # In the unsigned type, where C defines the wrap: signed overflow is undefined,
            # and so is a u16 or u8 product or shift past int, to which they promote.
            unsigned = self.unsigned_type(dtype)
            left = f"({unsigned}){a}"
            right = b if op is BOp.SHL else f"({unsigned}){b}"
            return f"(({self.value_type(dtype)})({left} {_BINARY_INFIX[op]} {right}))"
        value = f"({a} {_BINARY_INFIX[op]} {b})"
        if dtype is DType.BOOL and op in _WRAPPING | {BOp.MAX, BOp.SHR}:
            return f"({value} != 0)"  # computed in int, as C does; a bool is its nonzero-ness
        return value

    def fma(self, a: str, b: str, c: str, dtype: DType) -> str:
        """``a * b + c`` rounded once, of f32 or f64 (``zyx.ir.Fma``): C99's ``fma``."""
        return f"{self.function('fma', dtype)}({a}, {b}, {c})"

    def nextafter16(self, a: str, b: str, dtype: DType) -> str:
        """``nextafter(a, b)`` of f16 or bf16 values held as floats: C's ``nextafterf`` would
        step by a float's ulp, so the step is one on the 16-bit pattern (``bits16``), whose
        magnitude orders the values of either sign; from zero it is the least subnormal
        with ``b``'s sign. A NaN operand gives NaN, and ``a == b`` gives ``b`` (C's)."""
        u16 = self.value_type(DType.U16)
        least = f"({u16})({b} < 0 ? 0x8001 : 1)"
        # +1 makes the magnitude larger: where b lies beyond a, seen from zero.
        step = f"({u16})({self.bits16(a, dtype)} + (({a} < {b}) == ({a} > 0) ? 1 : -1))"
        stepped = self.from_bits16(f"({a} == 0 ? {least} : {step})", dtype)
        return f"({a} != {a} || {b} != {b} ? {a} + {b} : {a} == {b} ? {b} : {stepped})"

    def bits16(self, x: str, dtype: DType) -> str:
        """The 16-bit pattern (a ``value_type(U16)``) of float ``x``, a value of f16 or bf16."""
        raise NotImplementedError

    def from_bits16(self, bits: str, dtype: DType) -> str:
        """The f16 or bf16 value whose 16-bit pattern is ``bits``, as a float."""
        raise NotImplementedError

    def unsigned_type(self, dtype: DType) -> str:
        """The unsigned type an integer ``dtype`` wraps in: 64-bit, or else 32-bit (C's
        narrower types promote to int)."""
        return self.value_type(DType.U64 if dtype.itemsize == 8 else DType.U32)

    def negate(self, x: str, dtype: DType) -> str:
        """``-x`` of a signed integer, wrapping (``-MIN`` is ``MIN``) where C is undefined."""
        unsigned = self.unsigned_type(dtype)
        negated = f"(({unsigned})0 - ({unsigned}){x})"
        if dtype.itemsize < 4:
            # Sign-extended by shifts in int: NVIDIA's compiler (CUDA 13.0's, for NVRTC and
            # its OpenCL alike) folds a 16-bit -x > 0 to x < 0, wrong for MIN, however the
            # negation is written but this way (benchmarks/nvidia_i16_negation.py tries each).
            shift = 32 - 8 * dtype.itemsize
            int32 = self.value_type(DType.I32)
            return f"(({self.value_type(dtype)})((({int32})({negated} << {shift})) >> {shift}))"
        return f"(({self.value_type(dtype)}){negated})"

    def guarded_division(
        self, op: BOp, a: str, b: str, dtype: DType, divisor: int | None = None
    ) -> str:
        """Integer (or bool) ``/`` or ``%`` with the IR's semantics: 0 for a zero divisor, and
        MIN / -1 wraps, where C is undefined (x86 traps with SIGFPE, which kills the
        process). A constant ``divisor`` needs no guard, which would only test constants:
        compilers warn about that (and PoCL prints every warning)."""
        if divisor is not None:
            return self._division_by_constant(op, a, b, dtype, divisor)
        if op is BOp.MOD:
            zero = f"{b} == 0 || {b} == -1" if dtype.is_signed else f"{b} == 0"
            return f"(({zero}) ? 0 : {a} % {b})"
        if dtype.is_signed:
            return f"({b} == 0 ? 0 : {b} == -1 ? {self.negate(a, dtype)} : {a} / {b})"
        return f"({b} == 0 ? 0 : {a} / {b})"

    def _division_by_constant(self, op: BOp, a: str, b: str, dtype: DType, divisor: int) -> str:
        if divisor == 0 or (divisor == -1 and op is BOp.MOD):
            return self.int_literal(0, dtype)
        if divisor == -1:
            return self.negate(a, dtype)
        return f"({a} {'/' if op is BOp.DIV else '%'} {b})"

    def function(self, name: str, dtype: DType) -> str:
        """A math function's name for ``dtype`` (``expf`` vs ``exp`` where the language needs)."""
        return name

    entry_prefix = "zyx_kernel_"
    """What every entry point's name starts with: C links kernels beside the C library's
    functions and the language's own names (``memcpy``, ``exp``, ``threadIdx``), which a
    kernel's name may be."""

    def entry_name(self, kernel: Kernel) -> str:
        """The entry point's name in this language: ``entry_prefix`` and the kernel's name,
        made an identifier of at most ``ENTRY_NAME_CHARS`` (``entry_symbol``)."""
        return entry_symbol(self.entry_prefix, kernel.name)

    # ---- the renderer -------------------------------------------------------------------

    def render(self, kernel: Kernel) -> Source:
        """The kernel as source code of this dialect."""
        name = self.entry_name(kernel)
        params = [
            self.param_decl(p, self.ref_name(kernel, r))
            for p, r in zip(kernel.params, kernel.param_refs)
        ]
        if self.bounds_checked:
            params += self.checked_params(kernel)
        lines = [self.signature(kernel, name, params) + " {"]
        hoisted = [ref for ref, op in enumerate(kernel.ops) if self.hoisted(op)]
        lines += [self.indent + self.render_op(kernel, ref) for ref in hoisted]
        depth = 1
        for ref, op in enumerate(kernel.ops):
            if isinstance(op, (EndLoop, EndIf)):
                depth -= 1
            stmt = "" if self.hoisted(op) else self.render_op(kernel, ref)
            if stmt:
                lines.append(self.indent * depth + stmt)
            if isinstance(op, (Loop, If)):
                depth += 1
        lines.append("}")
        preamble = self.preamble(kernel)
        if self.bounds_checked:
            preamble = "\n".join(filter(None, [preamble, self.bounds_helper()]))
        code = "\n".join(filter(None, [preamble, "\n".join(lines)])) + "\n"
        return Source(name, code, self.name)

    def in_bounds(self, kernel: Kernel, ref: Ref, memory: Ref, index: str) -> str:
        """The check of the access ``ref`` of ``memory`` (a buffer param or ``Define``) at
        ``index``: a call of ``zyx_in_bounds``."""
        op = kernel.ops[memory]
        if isinstance(op, Define):
            length = str(op.length)
        else:
            length = length_name(kernel.param_refs.index(memory))
        return f"zyx_in_bounds({ERROR_RECORD}, {index}, {length}, {ref})"

    def ref_name(self, kernel: Kernel, ref: Ref) -> str:
        """The C name of a param or value."""
        op = kernel.ops[ref]
        if isinstance(op, Param):
            return f"p{kernel.param_refs.index(ref)}"
        return f"v{ref}"

    def expr(self, kernel: Kernel, ref: Ref) -> str:
        """The expression that reads value ``ref``: a literal for constants, else its name."""
        op = kernel.ops[ref]
        if isinstance(op, Const):
            return self.literal(op)
        return self.ref_name(kernel, ref)

    def literal(self, op: Const) -> str:
        if op.dtype is DType.BOOL:
            return "1" if op.value else "0"
        if op.dtype.is_float:
            return self.float_literal(float(op.value), op.dtype)
        return self.int_literal(int(op.wrapped), op.dtype)

    def render_op(self, kernel: Kernel, ref: Ref) -> str:  # noqa: C901 - one branch per op
        """The statement for ``kernel.ops[ref]`` (empty for ops that need none)."""
        op: Op = kernel.ops[ref]
        e = lambda r: self.expr(kernel, r)  # noqa: E731 - local shorthand keeps branches on one line
        name = f"v{ref}"
        if isinstance(op, (Param, Const)):
            return ""
        if isinstance(op, Range):
            return f"const {self.value_type(DType.I64)} {name} = {self.range_index(op)};"
        if isinstance(op, Define):
            if op.storage is Storage.LOCAL:
                return self.local_decl(op.dtype, name, op.length) + ";"
            return f"{self.register_type(op.dtype)} {name}[{op.length}];"
        if isinstance(op, Load):
            dtype = kernel.dtype_of(ref)
            if self.as_held(kernel, ref, dtype):
                return f"const {self.storage_type(dtype)} {name} = {e(op.src)}[{e(op.index)}];"
            value = (
                f"{e(op.src)}[{e(op.index)}]"
                if self.in_registers(kernel, op.src, dtype)
                else self.load(e(op.src), e(op.index), dtype)
            )
            if self.bounds_checked:
                check = self.in_bounds(kernel, ref, op.src, e(op.index))
                value = f"({check} ? {value} : ({self.value_type(dtype)})0)"
            return self.declare(name, dtype, value)
        if isinstance(op, Store):
            dtype = kernel.dtype_of(op.dst)
            if self.in_registers(kernel, op.dst, dtype) or self.as_held(kernel, op.value, dtype):
                stored = f"{e(op.dst)}[{e(op.index)}] = {e(op.value)};"
            else:
                stored = self.store(e(op.dst), e(op.index), e(op.value), dtype) + ";"
            if self.bounds_checked:
                return f"if ({self.in_bounds(kernel, ref, op.dst, e(op.index))}) {stored}"
            return stored
        if isinstance(op, Cast):
            src_dtype = kernel.dtype_of(op.x)
            return self.declare(name, op.dtype, self.cast(e(op.x), src_dtype, op.dtype))
        if isinstance(op, Shuffle):
            return self.declare(name, kernel.dtype_of(ref), self.shuffle(kernel, op))
        if isinstance(op, Unary):
            dtype = kernel.dtype_of(ref)
            value = self.unary(op.op, e(op.x), dtype)
            if dtype in (DType.F16, DType.BF16):
                value = self.round16(value, dtype)
            return self.declare(name, dtype, value)
        if isinstance(op, Binary):
            operand = kernel.dtype_of(op.a)
            divisor = constant_divisor(kernel, op)
            value = self.binary(op.op, e(op.a), e(op.b), operand, divisor)
            if operand in (DType.F16, DType.BF16) and not op.op.is_comparison:
                value = self.round16(value, operand)
            return self.declare(name, kernel.dtype_of(ref), value)
        if isinstance(op, Fma):
            value = self.fma(e(op.a), e(op.b), e(op.c), kernel.dtype_of(ref))
            return self.declare(name, kernel.dtype_of(ref), value)
        if isinstance(op, Where):
            choice = f"({e(op.cond)} ? {e(op.a)} : {e(op.b)})"
            return self.declare(name, kernel.dtype_of(ref), choice)
        if isinstance(op, Loop):
            t = self.value_type(DType.I64)
            return f"for ({t} {name} = 0; {name} < {e(op.size)}; ++{name}) {{"
        if isinstance(op, If):
            return f"if ({e(op.cond)}) {{"
        if isinstance(op, (EndLoop, EndIf)):
            return "}"
        if isinstance(op, Barrier):
            return self.barrier() + ";"
        if isinstance(op, Mma):
            return self.mma(kernel, op)
        if isinstance(op, LdMatrix):
            return self.ldmatrix(kernel, op)
        if isinstance(op, CopyAsync):
            return self.copy_async(kernel, ref, op)
        if isinstance(op, CommitCopies):
            return self.commit_copies()
        if isinstance(op, WaitCopies):
            return self.wait_copies(op)
        raise TypeError(f"cannot render {op}")

    def in_registers(self, kernel: Kernel, memory: Ref, dtype: DType) -> bool:
        """Whether ``memory`` is a register ``Define`` whose elements are values as held."""
        op = kernel.ops[memory]
        return (
            isinstance(op, Define)
            and op.storage is Storage.REGISTER
            and self.register_type(dtype) == self.value_type(dtype)
        )

    def as_held(self, kernel: Kernel, ref: Ref, dtype: DType) -> bool:
        """Whether the ``Load`` ``ref`` of ``dtype`` (or the value a ``Store`` stores) is one
        the kernel only moves, rendered in its storage type (``moves_as_held``)."""
        return (
            self.moves_as_held
            and not self.bounds_checked
            and dtype in (DType.F16, DType.BF16)
            and ref in kernel.copies
        )

    def declare(self, name: str, dtype: DType, value: str) -> str:
        return f"const {self.value_type(dtype)} {name} = {value};"
