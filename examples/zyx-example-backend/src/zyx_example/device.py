"""The example device: compiles IR to vectorized Python and runs it on the pool's arrays."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np
from zyx.backend import Arg, Buffer, Device, DeviceInfo, Program
from zyx.codegen import Source
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import BackendError, ErrorStatus, IRError
from zyx.ir import Kernel, verify

from zyx_example.codegen import render
from zyx_example.compiler import KernelFunction, compile_source
from zyx_example.pool import ExamplePool

CHUNK_ITEMS = 1 << 18
"""Work-items per call of a kernel function: bounds the memory of its per-item arrays."""

_asm = logging.getLogger("zyx.asm")
_launches = logging.getLogger("zyx.launch")

# Every dtype is computed by numpy; f16 and bf16 through float32, so they have every op.
_DTYPES = {
    dtype: (
        DTypeCapability.FULL
        if dtype.is_float
        else DTypeCapability.STORAGE | DTypeCapability.ARITHMETIC
    )
    for dtype in DType
}


class ExampleProgram(Program):
    """A compiled kernel: the contract's ``Program`` plus its source and Python function."""

    def __init__(self, device: Device, kernel: Kernel, source: Source) -> None:
        super().__init__(device, kernel)
        self.source = source
        self.function: KernelFunction = compile_source(source)
        self.group_size = prod(kernel.local_size)


class ExampleDevice(Device):
    """Device ``example:<index>``, with its own pool of ``memory`` bytes."""

    backend = "example"

    def __init__(self, index: int, memory: int) -> None:
        self.index = index
        self.pool = ExamplePool(self.name, memory)
        self.info = DeviceInfo(
            name="numpy (zyx example backend)",
            compute=1e10,
            max_global_work_dims=(2**31 - 1, 2**16 - 1, 2**16 - 1),
            max_local_threads=1024,
            max_local_work_dims=(1024, 1024, 1024),
            local_mem_size=64 * 1024,
            max_register_bytes=1024,
            preferred_vector_size=16,
            warp_size=1,
            global_mem_size=memory,
            dtypes=_DTYPES,
        )

    def compile(self, kernel: Kernel) -> ExampleProgram:
        try:
            verify(kernel, self.info)
        except IRError as error:
            raise BackendError(ErrorStatus.KERNEL_COMPILATION, str(error)) from error
        source = render(kernel)
        _asm.debug("%s:\n%s", kernel.name, source.code)
        return ExampleProgram(self, kernel, source)

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        """Run ``program`` to completion; errors surface here, as this device is synchronous."""
        program = self.own(program, ExampleProgram)
        program.check_args(args)
        groups = program.groups(args)
        values = [_bind(arg, dtype) for arg, dtype in zip(args, program.param_dtypes, strict=True)]
        total, per_call = prod(groups), max(1, CHUNK_ITEMS // program.group_size)
        _launches.debug("%s on %s: %s groups of %s", program.name, self.name, groups,
                        program.local_size)  # fmt: skip
        try:
            with np.errstate(all="ignore"):  # C neither traps on overflow nor on x / 0.
                for first in range(0, total, per_call):
                    count = min(per_call, total - first)
                    program.function(*values, groups=groups, first=first, count=count)
        except Exception as error:
            raise BackendError(
                ErrorStatus.KERNEL_LAUNCH, f"{program.name}: {type(error).__name__}: {error}"
            ) from error

    def launch_timed(self, program: Program, args: Sequence[Arg]) -> int:
        start = time.perf_counter_ns()
        self.launch(program, args)
        return time.perf_counter_ns() - start

    def synchronize(self) -> None:
        """Nothing is ever pending: every launch and copy finishes before it returns."""


def _bind(arg: Arg, dtype: DType) -> Any:
    """A buffer as a 1-D array of its param's dtype (no copy); a scalar as it is."""
    if not isinstance(arg, Buffer):
        return arg
    memory = ExamplePool.array(arg)
    return memory[: len(memory) - len(memory) % dtype.itemsize].view(dtype.numpy)
