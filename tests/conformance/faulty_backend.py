"""A zyx backend plugin, ``faulty``: the host device with one deliberate fault.

Its config section names the fault (``faulty.fault``); each is a way a real backend can
be wrong, and the conformance suite must fail on it. ``""`` is the host device unchanged.
``faulty.narrow`` is no fault: the device declares small limits, which the suite must
respect.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from zyx.backend import (
    Arg,
    Buffer,
    Device,
    DeviceInfo,
    MemoryPool,
    Prepared,
    Program,
    Recording,
    Scalar,
)
from zyx.config import BackendSection
from zyx.dtypes import DType, round_to
from zyx.errors import BackendError, ErrorStatus, IRError
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl
from zyx.host.codegen import HostDialect
from zyx.host.device import CompiledProgram, HostDevice
from zyx.host.pool import HostPool
from zyx.ir import Barrier, Binary, BOp, Const, Kernel, Op, ParamKind, Range, SymDim, Unary, UOp
from zyx.ir.verify import check_limits

ZYX_PLUGIN_API = "1.0"

KERNEL_FAULTS = {
    "sub computes add": lambda op: (
        Binary(BOp.ADD, op.a, op.b) if isinstance(op, Binary) and op.op is BOp.SUB else op
    ),
    "exp computes exp2": lambda op: (
        Unary(UOp.EXP2, op.x) if isinstance(op, Unary) and op.op is UOp.EXP else op
    ),
    "half the groups": lambda op: (
        Range(op.axis, op.scope, SymDim(op.size.param, 2 * op.size.div))
        if isinstance(op, Range) and isinstance(op.size, SymDim)
        else op
    ),
    "barriers dropped": lambda op: Const(DType.I64, 0) if isinstance(op, Barrier) else op,
    "less-than computes greater-or-equal": lambda op: (
        Binary(BOp.CMPGE, op.a, op.b) if isinstance(op, Binary) and op.op is BOp.CMPLT else op
    ),
}
"""Faults of the generated code: each rewrites the kernel's ops one by one."""

DEVICE_FAULTS = frozenset(
    {"every 7th launch skipped", "launch_timed returns 0", "set_arg ignored",
     "limits unenforced", "arguments unchecked", "int scalars unchecked",
     "zero work-groups raise", "limits overstated"}
)  # fmt: skip


_LARGEST = {DType.F16: 65504.0, DType.BF16: 3.3895313892515355e38, DType.F32: 3.4028234663852886e38}
"""The largest finite value of the floats narrower than float64."""


def _truncated(value: Scalar, bits: int, signed: bool) -> int:
    """``value``'s low ``bits``, read as a signed or unsigned number."""
    low = int(value) & ((1 << bits) - 1)
    return low - (1 << bits) if signed and low >> (bits - 1) else low


SCALAR_FAULTS: dict[str, Callable[[DType, Scalar], Scalar]] = {
    "f64 scalars passed as f32": lambda dtype, value: (
        round_to(value, DType.F32) if dtype is DType.F64 else value
    ),
    "f32 and f64 scalars rounded to f16": lambda dtype, value: (
        round_to(value, DType.F16) if dtype in (DType.F32, DType.F64) else value
    ),
    "64-bit int scalars truncated to 32 bits": lambda dtype, value: (
        _truncated(value, 32, dtype.is_signed) if dtype in (DType.I64, DType.U64) else value
    ),
    "16- and 32-bit int scalars truncated to 8 bits": lambda dtype, value: (
        _truncated(value, 8, dtype.is_signed)
        if dtype in (DType.I16, DType.U16, DType.I32, DType.U32)
        else value
    ),
    "numpy float scalars lose their fraction": lambda dtype, value: (
        float(int(value)) if isinstance(value, np.floating) else value
    ),
    "float scalars past their range saturate": lambda dtype, value: (
        math.copysign(_LARGEST[dtype], value)
        if dtype in _LARGEST and math.isinf(round_to(value, dtype))
        else value
    ),
}
"""Faults of passing ``Variable``s to the kernel, after they passed the argument check:
each maps a Variable's dtype and value to the value the kernel gets."""

DIALECT_FAULTS = frozenset(
    {"int-float casts through i8", "bool x / 0 and x % 0 give 1",
     "f16 results keep only bf16 precision", "bf16 results truncated, not rounded",
     "f32 sin reduced by a float 2 pi", "float max as a > b ? a : b",
     "a >= b as !(a < b)", "float negation as 0 - x", "f16 results saturate at 65504",
     "f32 results flush subnormals to zero"}
)  # fmt: skip
"""Faults of the rendered C (``FaultyDialect``)."""

POOL_FAULTS = frozenset(
    {"reads ignore the offset", "writes ignore the offset", "writes take the caller's data late",
     "copies do nothing",
     "out of memory raises MemoryError", "free bytes drift", "release frees at once",
     "ranges unchecked"}
)  # fmt: skip

FAULTS = (
    frozenset(KERNEL_FAULTS) | DEVICE_FAULTS | POOL_FAULTS | frozenset(SCALAR_FAULTS)
    | DIALECT_FAULTS
)  # fmt: skip


class FaultySection(BackendSection):
    """Config section ``faulty``."""

    fault: str = ""
    """One of ``FAULTS``, or ``""`` for none."""
    narrow: bool = False
    """Declare one-dimensional groups of at most 32 work-items and 4 KiB of local memory:
    no fault, a small device on which the suite must pass, sizing its kernels or skipping."""
    single: bool = False
    """Declare groups of one work-item: no fault, the smallest device the suite runs on."""
    claims: list[str] | None = None
    """Declare only these dtypes (``[]``: none); ``None``: the host's."""
    interpret: bool = False
    """Run kernels in the IR interpreter, as the host without a C compiler does."""


_FAULT_HELPERS = """\
static inline float zyx_fault_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u &= 0xffff0000u;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline float zyx_fault_ftz(float f) {
  return fabsf(f) < 0x1p-126f ? copysignf(0.0f, f) : f;
}
"""


class FaultyDialect(HostDialect):
    """The host's C with one of ``DIALECT_FAULTS``."""

    def __init__(self, fault: str, *, native_f16: bool) -> None:
        super().__init__(native_f16=native_f16)
        self.fault = fault

    def preamble(self, kernel: Kernel) -> str:
        return super().preamble(kernel) + _FAULT_HELPERS

    def cast(self, x: str, src: DType, dst: DType) -> str:
        between = DType.BOOL not in (src, dst) and src.is_float != dst.is_float
        if self.fault == "int-float casts through i8" and between:
            return super().cast(f"(int8_t)({x})", DType.I8, dst)
        return super().cast(x, src, dst)

    def binary(self, op: BOp, a: str, b: str, dtype: DType, divisor: int | None = None) -> str:
        # A GPU's unguarded integer division by zero gives all ones, where a CPU traps.
        guarded = dtype is DType.BOOL and op in (BOp.DIV, BOp.MOD)
        if self.fault == "bool x / 0 and x % 0 give 1" and guarded:
            return f"({b} ? {a} {'/' if op is BOp.DIV else '%'} {b} : 1)"
        # Each is right on numbers and wrong on NaN or a signed zero.
        if self.fault == "float max as a > b ? a : b" and op is BOp.MAX and dtype.is_float:
            return f"({a} > {b} ? {a} : {b})"
        if self.fault == "a >= b as !(a < b)" and op is BOp.CMPGE:
            return f"(!({a} < {b}))"
        value = super().binary(op, a, b, dtype, divisor)
        if self.fault == "f32 results flush subnormals to zero" and dtype is DType.F32:
            return value if op.is_comparison else f"zyx_fault_ftz({value})"
        return value

    def unary(self, op: UOp, x: str, dtype: DType) -> str:
        # sin(x - 2 pi) with 2 pi rounded to float: off by about 1.7e-7 for x past pi,
        # a few ulps, and many near pi, where sin is small: the norm bound does not see it.
        if self.fault == "f32 sin reduced by a float 2 pi" and (op, dtype) == (UOp.SIN, DType.F32):
            return f"sinf({x} > 3.14159265f ? {x} - 6.28318531f : {x})"
        if self.fault == "float negation as 0 - x" and op is UOp.NEG and dtype.is_float:
            return f"(0 - {x})"
        return super().unary(op, x, dtype)

    def round16(self, x: str, dtype: DType) -> str:
        if self.fault == "f16 results keep only bf16 precision" and dtype is DType.F16:
            x = f"zyx_fault_bf16({x})"
        if self.fault == "bf16 results truncated, not rounded" and dtype is DType.BF16:
            return f"zyx_fault_bf16({x})"
        if self.fault == "f16 results saturate at 65504" and dtype is DType.F16:
            x = f"fminf(fmaxf({x}, -65504.0f), 65504.0f)"
        return super().round16(x, dtype)


class FaultyPool(HostPool):
    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault = fault
        self.late_writes: list[tuple[Buffer, memoryview, int]] = []
        """Writes not done yet, which read the caller's memory when the next read comes."""

    def _read(self, buf: Buffer, view: memoryview, offset: int) -> None:
        for late in self.late_writes:
            super()._write(*late)
        self.late_writes.clear()
        super()._read(buf, view, 0 if self.fault == "reads ignore the offset" else offset)

    def _write(self, buf: Buffer, view: memoryview, offset: int) -> None:
        if self.fault == "writes take the caller's data late":
            self.late_writes.append((buf, view, offset))
            return
        super()._write(buf, view, 0 if self.fault == "writes ignore the offset" else offset)

    def _copy_from(self, src_pool: MemoryPool, src_buf: Buffer, dst_buf: Buffer) -> None:
        if self.fault != "copies do nothing":
            super()._copy_from(src_pool, src_buf, dst_buf)

    def _allocate(self, nbytes: int) -> Buffer:
        if self.fault == "out of memory raises MemoryError" and nbytes > self.free_bytes():
            raise MemoryError(nbytes)
        buf = super()._allocate(nbytes)
        if self.fault == "free bytes drift":
            self._used += 1
        return buf

    def release(self, buf: Buffer) -> None:
        if self.fault == "release frees at once" and buf.refcount > 1:
            buf.refcount = 1
        super().release(buf)

    def _check_range(self, buf: Buffer, offset: int, nbytes: int, status: ErrorStatus) -> None:
        if self.fault == "ranges unchecked":
            self._check_live(buf, status)
        else:
            super()._check_range(buf, offset, nbytes, status)


class FaultyDevice(HostDevice):
    backend = "faulty"

    def __init__(self, fault: str, narrow: bool = False) -> None:
        super().__init__(FaultyPool(fault))
        self.fault = fault
        self.launches = 0
        self.real_info = self.info
        """The limits the device keeps, whatever ``info`` states."""
        self.over_real_limits: set[Program] = set()
        if narrow:
            self.info = self.real_info = dataclasses.replace(
                self.info, max_local_threads=32, max_local_work_dims=(32, 1, 1),
                local_mem_size=4096,
            )  # fmt: skip
        if fault == "limits overstated":
            x, y, z = self.info.max_local_work_dims
            self.info = dataclasses.replace(
                self.info, max_local_threads=4 * self.info.max_local_threads,
                max_local_work_dims=(4 * x, 4 * y, 4 * z),
                local_mem_size=4 * self.info.local_mem_size,
            )  # fmt: skip

    @property
    def name(self) -> str:
        return "faulty"

    def compile(self, kernel: Kernel) -> Program:
        rewrite = KERNEL_FAULTS.get(self.fault)
        if rewrite is not None:
            ops: tuple[Op, ...] = tuple(rewrite(op) for op in kernel.ops)
            kernel = Kernel(kernel.name, ops)
        if self.fault == "limits unenforced":
            return self._compile_unlimited(kernel)
        program = (
            self._compile_c(kernel) if self.fault in DIALECT_FAULTS else super().compile(kernel)
        )
        # Program.inspect is the check that check_args and the host's launch run.
        if self.fault == "arguments unchecked":
            program.inspect = _unchecked(program)  # type: ignore[method-assign]
        if self.fault == "int scalars unchecked":
            program.inspect = _without_int_ranges(program)  # type: ignore[method-assign]
        if self.fault == "limits overstated" and not _fits(kernel, self.real_info):
            self.over_real_limits.add(program)
        return program

    def _compile_c(self, kernel: Kernel) -> Program:
        """Compile as the host does, from the C of a ``FaultyDialect``."""
        if self._compiler is None or self.toolchain is None:
            raise BackendError(ErrorStatus.KERNEL_COMPILATION, f"{self.fault}: no C compiler")
        try:
            check_limits(kernel, self.info)
        except IRError as error:
            raise BackendError(ErrorStatus.KERNEL_COMPILATION, str(error)) from error
        dialect = FaultyDialect(self.fault, native_f16=self.toolchain.native_f16)
        library, function = self._compiler.compile(dialect.render(kernel))
        return CompiledProgram(self, kernel, library, function)

    def _compile_unlimited(self, kernel: Kernel) -> Program:
        """Compile as if the device had no limits, while ``info`` still states them."""
        info = self.info
        self.info = dataclasses.replace(
            info, max_local_threads=1 << 20, max_local_work_dims=(1 << 20,) * 3,
            local_mem_size=1 << 30,
        )  # fmt: skip
        try:
            return super().compile(kernel)
        finally:
            self.info = info

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        self.launches += 1
        if self.fault in SCALAR_FAULTS:
            program.check_args(args)
            args = _spoiled(SCALAR_FAULTS[self.fault], program, args)
        if self.fault == "zero work-groups raise":
            program.check_args(args)
            if 0 in program.groups(args):
                raise BackendError(ErrorStatus.KERNEL_LAUNCH, "grid of zero blocks")
        if program in self.over_real_limits:
            raise BackendError(ErrorStatus.KERNEL_LAUNCH, "too many resources requested")
        if self.fault != "every 7th launch skipped" or self.launches % 7:
            super().launch(program, args)

    def launch_timed(self, program: Program, args: Sequence[Arg]) -> int:
        ns = super().launch_timed(program, args)
        return 0 if self.fault == "launch_timed returns 0" else ns

    def record(self) -> Recording:
        recording = super().record()
        if self.fault == "set_arg ignored":
            recording.set_arg = lambda *args: None  # type: ignore[method-assign]
        return recording


def _spoiled(
    spoil: Callable[[DType, Scalar], Scalar], program: Program, args: Sequence[Arg]
) -> list[Arg]:
    """``args`` with each ``Variable``'s value spoiled."""
    kinds, dtypes = program.param_kinds, program.param_dtypes
    return [
        spoil(dtype, arg) if kind is ParamKind.VARIABLE and not isinstance(arg, Buffer) else arg
        for arg, kind, dtype in zip(args, kinds, dtypes)
    ]


def _unchecked(program: Program) -> Callable[[Sequence[Arg]], Prepared]:
    """``program``'s ``inspect`` without any check: the arguments as they came."""

    def inspect(args: Sequence[Arg]) -> Prepared:
        values = tuple(args)
        return values, [], [], program.groups(values)

    return inspect


def _without_int_ranges(program: Program) -> Callable[[Sequence[Arg]], Prepared]:
    """``program``'s ``inspect`` without the range of int ``Variable``s: out of it, a value
    wraps in its C type."""
    inspect = program.inspect
    ints = [
        kind is ParamKind.VARIABLE and not dtype.is_float
        for kind, dtype in zip(program.param_kinds, program.param_dtypes)
    ]

    def unranged(args: Sequence[Arg]) -> Prepared:
        given = list(args)
        ranged = [i < len(ints) and ints[i] and type(arg) is int for i, arg in enumerate(given)]
        checked, reads, writes, _ = inspect([0 if r else a for a, r in zip(given, ranged)])
        values = tuple(a if r else v for a, v, r in zip(given, checked, ranged))
        return values, reads, writes, program.groups(values)

    return unranged


def _fits(kernel: Kernel, info: DeviceInfo) -> bool:
    try:
        check_limits(kernel, info)
    except IRError:
        return False
    return True


def probe() -> ProbeResult:
    return ProbeResult(available=True, devices=1)


def open_faulty(section: FaultySection) -> Sequence[Device]:
    if section.fault and section.fault not in FAULTS:
        raise BackendError(ErrorStatus.INITIALIZATION, f"no fault {section.fault!r}")
    device = FaultyDevice(section.fault, section.narrow)
    if section.single:
        device.info = device.real_info = dataclasses.replace(
            device.info, max_local_threads=1, max_local_work_dims=(1, 1, 1)
        )
    if section.claims is not None:
        dtypes = {d: caps for d, caps in device.info.dtypes.items() if d.value in section.claims}
        device.info = device.real_info = dataclasses.replace(device.info, dtypes=dtypes)
    if section.interpret:
        device._compiler = None  # the host's own state when it found no C compiler
    return [device]


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [BackendSpec(name="faulty", config=FaultySection, probe=probe, open=open_faulty)]
