"""A compiled OpenCL kernel and its launch path, generated per program.

A launch passes through two functions of its program. ``submit`` (what ``Device.launch``
calls) checks the arguments (``Program.specialize``) and appends ``(program, args, work)``
to the scheduler's window. ``enqueue``, when the window is enqueued, chooses the queue and
waits (``Scheduler.inline``), sets the kernel's arguments where they differ from the ones
it last ran with (``bind``), enqueues the kernel without an event and records it by
sequence number. Where zyx-opencl's native module is built, both run in C for a launch
that repeats the shape of an earlier one (``Scheduler.enqueuer``), and the generated
functions take the rest.

Where a kernel is enqueued:

- ``OpenCLProgram._specialize_enqueue``: the generated ``enqueue``, through native.c's
  ``enqueue`` (``enqueue_function()``), else pyopencl's ``enqueue_nd_range_kernel``;
- native.c ``enqueue_and_commit``: the steady state of the native ``Enqueuer.enqueue``;
- ``Scheduler.time``: ``launch_timed``'s one launch, through pyopencl on a profiling queue.

A window's launches reach the first two from ``Scheduler._enqueue_entries``, or from its
loop in C, native.c's ``enqueue_window``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyopencl as cl

from zyx.backend import Arg, Program, generate
from zyx.dtypes import DType, round_to
from zyx.errors import BackendError
from zyx.ir import Kernel, ParamKind
from zyx_opencl.errors import enqueue_failure
from zyx_opencl.native import enqueue_function
from zyx_opencl.scheduler import Work

if TYPE_CHECKING:
    from zyx_opencl.device import OpenCLDevice

_SCALAR_DTYPES = {
    DType.BOOL: np.uint8, DType.F16: np.float32, DType.BF16: np.float32,
}  # fmt: skip
"""Scalar arguments whose OpenCL type differs from their numpy dtype (``value_type``)."""


class OpenCLProgram(Program):
    """A built kernel: the ``cl.Kernel`` with the arguments it last ran with, and its
    global size (work-items per axis, as OpenCL counts them). A static global size outside
    the device's limits was refused at compile time (``check_compilable``); one that depends on
    a ``Variable`` is checked at each launch."""

    device: OpenCLDevice

    def __init__(self, device: OpenCLDevice, kernel: Kernel, cl_kernel: cl.Kernel) -> None:
        super().__init__(device, kernel)
        self.kernel = cl_kernel
        """Deleted by ``OpenCLDevice.release``."""
        self._halves = tuple(
            (i, dtype)
            for i in self.scalar_positions
            if (dtype := self.param_dtypes[i]) in (DType.F16, DType.BF16)
        )
        """f16 and bf16 scalars: passed as float, so rounded to their dtype first, f16 once
        from the Python float (through float32 it would round twice), bf16 through float32
        as the IR defines it."""
        # pyopencl packs scalars by these dtypes in one call (set_arg one by one costs µs).
        cl_kernel.set_scalar_arg_dtypes([
            None if kind is not ParamKind.VARIABLE else _SCALAR_DTYPES.get(dtype, dtype.numpy)
            for kind, dtype in zip(self.param_kinds, self.param_dtypes)
        ])  # fmt: skip
        self.bound: tuple[Arg, ...] | None = None
        """The arguments the kernel holds, as set by the last ``bind``."""
        self.fixed_work = None if self.symbolic else self._work(self.groups(()))
        """The global work of every launch; ``None`` where it depends on a ``Variable``
        (or where there is no work-group)."""
        submit, enqueue = self._specialize_submit(), self._specialize_enqueue()
        native = self.device.scheduler.enqueuer(self, submit, enqueue, self._failure)
        self.submit = native.submit if native else submit
        """``Device.launch`` of this program, its device already checked."""
        self.enqueue = native.enqueue if native else enqueue
        """The scheduler's ``Launchable.enqueue``."""

    def work(self, groups: tuple[int, int, int]) -> tuple[int, int, int] | None:
        """Global work-items per axis for a launch of ``groups`` work-groups (``inspect``
        says how many); ``None`` when there is no work-group."""
        return self.fixed_work if self.fixed_work is not None else self._work(groups)

    def _work(self, groups: tuple[int, int, int]) -> tuple[int, int, int] | None:
        # ``inspect`` checked the counts against the device's limits.
        if 0 in groups:
            return None
        (x, y, z), (lx, ly, lz) = groups, self.local_size
        return (x * lx, y * ly, z * lz)

    def _specialize_submit(self) -> Callable[[Sequence[Arg]], None]:
        """``inspect``'s checks, then the launch appended to the window as
        ``(self, args, work)``; nothing where it has no work-group."""
        args = "".join(f"a{i}, " for i in range(len(self.param_kinds)))
        append, names = self.device.scheduler.appending(f"(program, ({args}), work)")
        names["program"] = self
        if self.fixed_work is not None:
            names["work"] = self.fixed_work
            body = append
        elif self.symbolic:  # inspect checked that no count is negative
            lx, ly, lz = self.local_size
            body = [
                "if g0 and g1 and g2:",
                f"    work = (g0 * {lx}, g1 * {ly}, g2 * {lz})",
                *(f"    {line}" for line in append),
            ]
        else:
            body = []
        submit = self.specialize(body, names, returns=False)
        return cast("Callable[[Sequence[Arg]], None]", submit)

    def _specialize_enqueue(self) -> Callable[[tuple[Arg, ...], Work], int]:
        """The scheduler's ``Launchable.enqueue``, straight-line for this program's params:
        through zyx-opencl's native module where it is built, else through pyopencl (its
        event dropped)."""
        count = len(self.param_kinds)
        scheduler, enqueue_kernel = self.device.scheduler, enqueue_function()
        lx, ly, lz = self.local_size
        if enqueue_kernel is not None:
            enqueue = [
                f"status = enqueue_kernel(queue_addresses[queue], {self.kernel.int_ptr}, "
                f"work[0], work[1], work[2], {lx}, {ly}, {lz}, wait_list)",
                "if status:",
                "    raise enqueue_failure(what, status)",
            ]
        else:  # positional: keywords cost extra in pyopencl's binding
            enqueue = [
                "cl.enqueue_nd_range_kernel(scheduler_queues[queue], program.kernel, work, "
                f"{self.local_size}, None, wait_list)"
            ]
        schedule, names = scheduler.inline(
            self.arg_names(ParamKind.GLOBAL),
            self.arg_names(ParamKind.GLOBAL_MUT),
            ["if program.bound != args:", "    program.bind(args)", *enqueue],
            native=enqueue_kernel is not None,
        )
        unpack = [f"{''.join(f'a{i}, ' for i in range(count))}= args"] if count else []
        lines = [*unpack, *schedule, "return queue"]
        enqueued = generate(
            ["def enqueue(args, work):", *(f"    {line}" for line in lines)],
            {
                **names,
                "program": self,
                "cl": cl,
                "enqueue_kernel": enqueue_kernel,
                "enqueue_failure": enqueue_failure,
                "what": f"clEnqueueNDRangeKernel({self.name})",
                "queue_addresses": [queue.int_ptr for queue in scheduler.queues],
                "scheduler_queues": scheduler.queues,
            },
            f"enqueue {self.name}",
        )
        return cast("Callable[[tuple[Arg, ...], Work], int]", enqueued)

    def _failure(self, call: str, status: int) -> BackendError:
        return enqueue_failure(f"{call}({self.name})", status)

    def retire(self) -> None:
        super().retire()
        self.submit = self.refused

    def bind(self, args: tuple[Arg, ...]) -> None:
        """Set the kernel's arguments to ``args``. While its scalars stay the same, only the
        buffers that changed are set, one ``set_arg`` each (a launch over fresh outputs
        changes one or two); else all, in one ``set_args``, which packs the scalars by
        their dtypes."""
        bound, kernel = self.bound, self.kernel
        values: list[Any] = list(args)  # Buffers at the buffer positions (checked)
        self.bound = None  # until every argument is set: a failure leaves nothing assumed
        if bound is not None and self._same_scalars(args, bound):
            for i in self.buffer_positions:
                if values[i] is not bound[i]:
                    kernel.set_arg(i, values[i].handle)
        else:
            for i in self.buffer_positions:
                values[i] = values[i].handle
            for i, dtype in self._halves:
                values[i] = round_to(float(values[i]), dtype)
            kernel.set_args(*values)
        self.bound = args

    def _same_scalars(self, args: tuple[Arg, ...], bound: tuple[Arg, ...]) -> bool:
        for i in self.scalar_positions:
            if args[i] != bound[i]:
                return False
        return True
