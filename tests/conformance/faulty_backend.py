"""A zyx backend plugin, ``faulty``: the host device with one deliberate fault.

Its config section names the fault (``faulty.fault``); each is a way a real backend can
be wrong, and the conformance suite must fail on it. ``""`` is the host device unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from zyx.backend import Arg, Buffer, Device, MemoryPool, Program, Recording
from zyx.config import BackendSection
from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir import Barrier, Binary, BOp, Const, Kernel, Op, Range, SymDim, Unary, UOp

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
     "limits unenforced", "arguments unchecked"}
)  # fmt: skip

POOL_FAULTS = frozenset(
    {"reads ignore the offset", "writes ignore the offset", "copies do nothing",
     "out of memory raises MemoryError", "free bytes drift", "release frees at once",
     "ranges unchecked"}
)  # fmt: skip

FAULTS = frozenset(KERNEL_FAULTS) | DEVICE_FAULTS | POOL_FAULTS


class FaultySection(BackendSection):
    """Config section ``faulty``."""

    fault: str = ""
    """One of ``FAULTS``, or ``""`` for none."""


class FaultyPool(HostPool):
    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault = fault

    def _read(self, buf: Buffer, view: memoryview, offset: int) -> None:
        super()._read(buf, view, 0 if self.fault == "reads ignore the offset" else offset)

    def _write(self, buf: Buffer, view: memoryview, offset: int) -> None:
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

    def __init__(self, fault: str) -> None:
        super().__init__(FaultyPool(fault))
        self.fault = fault
        self.launches = 0

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
        program = super().compile(kernel)
        if self.fault == "arguments unchecked":
            program.check_args = lambda args: None  # type: ignore[method-assign]
        return program

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


def probe() -> ProbeResult:
    return ProbeResult(available=True, devices=1)


def open_faulty(section: FaultySection) -> Sequence[Device]:
    if section.fault and section.fault not in FAULTS:
        raise BackendError(ErrorStatus.INITIALIZATION, f"no fault {section.fault!r}")
    return [FaultyDevice(section.fault)]


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [BackendSpec(name="faulty", config=FaultySection, probe=probe, open=open_faulty)]
