"""A compiled OpenCL kernel and its launch path.

Where a kernel is launched (``OpenCLDevice.launch`` calls ``program.submit``, which takes
the device's lock): a launch is appended to the scheduler's window, and enqueued when the
window is (``zyx_opencl.scheduler``). Both steps run

- in C, in zyx-opencl's native ``Enqueuer`` (native.c), where the module is built:
  ``submit`` appends a launch whose arguments are plainly of their params' kinds;
  ``enqueue`` (``enqueue_and_commit``) enqueues one that needs no wait but the window's
  gate, onto a kernel that holds its arguments or only other buffers; native.c's
  ``enqueue_window`` is the window's loop;
- in Python, in ``OpenCLProgram.schedule`` (append) and ``OpenCLProgram.issue`` (enqueue),
  with ``Scheduler._enqueue_entries`` as the loop: every other launch, and every launch
  where the module is not built (``ZYX_NATIVE=0``). They are the specification of the C.

``Scheduler.time`` runs ``launch_timed``'s one launch alone, through pyopencl.

A bounds-checked program (``zyx.debug.BOUNDS``) has no ``Enqueuer``: ``schedule`` binds the
kernel's hidden arguments too (its error record and each buffer's element count,
``zyx.codegen.c``), waits for the launch and raises what the record holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyopencl as cl

from zyx.backend import Arg, Buffer, Program
from zyx.codegen.c import bounds_error
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

    def __init__(
        self, device: OpenCLDevice, kernel: Kernel, cl_kernel: cl.Kernel, checked: bool = False
    ) -> None:
        super().__init__(device, kernel)
        self.kernel = cl_kernel
        self._ir = kernel
        self.record: cl.Buffer | None = None
        """A bounds-checked kernel's error record (``int64 [4]``); ``None`` where unchecked."""
        hidden: list[Any] = []
        if checked:
            self.record = cl.Buffer(
                device.scheduler.context,
                cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                hostbuf=np.zeros(4, np.int64),
            )
            hidden = [None] + [np.int64] * len(self.buffer_positions)
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
        ] + hidden)  # fmt: skip
        self.bound: tuple[Arg, ...] | None = None
        """The arguments the kernel holds, as set by the last ``bind``."""
        self.fixed_work = None if self.symbolic else self._work(self.groups(()))
        """The global work of every launch; ``None`` where it depends on a ``Variable``
        (or where there is no work-group)."""
        self._reads = [i for i, kind in enumerate(self.param_kinds) if kind is ParamKind.GLOBAL]
        self._writes = [
            i for i, kind in enumerate(self.param_kinds) if kind is ParamKind.GLOBAL_MUT
        ]
        self._native_enqueue = enqueue_function()
        """zyx-opencl's native ``enqueue`` (``clEnqueueNDRangeKernel`` with plain ints and
        no event), or ``None``: pyopencl's, whose event is dropped."""
        self._lock = device.lock
        self._scheduler = scheduler = device.scheduler
        self.enqueuer = (
            None
            if checked
            else scheduler.native_launcher(self, self.schedule, self.issue, self._failure)
        )
        """zyx-opencl's native ``Enqueuer`` of this kernel, or ``None``."""
        self.submit = self.schedule if self.enqueuer is None else self.enqueuer.submit
        """``Device.launch`` of this program, its device checked; takes the device's lock."""
        self.enqueue = self.issue if self.enqueuer is None else self.enqueuer.enqueue
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

    def schedule(self, args: Sequence[Arg]) -> None:
        """``submit`` in Python, under the device's lock: the arguments checked, then the
        launch appended to the window as ``(self, values, work)``; nothing where it has no
        work-group."""
        with self._lock:
            values, _, _, groups = self.inspect(args)
            work = self.fixed_work if self.fixed_work is not None else self._work(groups)
            if work is not None:
                self._scheduler.append(self, values, work)
                if self.record is not None:
                    self._scheduler.synchronize()
                    self.check_record()

    def check_record(self) -> None:
        """Raise what a bounds-checked kernel's error record holds (its kernels are done),
        and clear it; nothing where unchecked."""
        if self.record is None:
            return
        queue = self.device.scheduler.queues[0]
        found = np.zeros(4, np.int64)
        cl.enqueue_copy(queue, found, self.record)
        error = bounds_error(self._ir, found.tolist())
        if error is not None:
            cl.enqueue_copy(queue, self.record, np.zeros(4, np.int64))
            raise error

    def issue(self, args: tuple[Arg, ...], work: Work) -> int:
        """``enqueue`` in Python: a launch from the window enqueued on the queue the
        scheduler places it on, after its waits, without an event, and recorded; returns
        the queue. Where a kernel is enqueued in Python."""
        scheduler = self._scheduler
        # Buffers at the buffer params: ``schedule`` checked the arguments.
        reads: list[Buffer] = [args[i] for i in self._reads]  # type: ignore[misc]
        writes: list[Buffer] = [args[i] for i in self._writes]  # type: ignore[misc]
        queue, wait_for = scheduler.place(reads, writes)
        if self.bound != args:
            self.bind(args)
        if self._native_enqueue is not None:
            waits = None if wait_for is None else tuple(event.int_ptr for event in wait_for)
            (x, y, z), (lx, ly, lz) = work, self.local_size
            address = scheduler.queues[queue].int_ptr
            status = self._native_enqueue(address, self.kernel.int_ptr, x, y, z, lx, ly, lz, waits)
            if status:
                raise self._failure("clEnqueueNDRangeKernel", status)
        else:  # positional: keywords cost extra in pyopencl's binding
            cl_queue = scheduler.queues[queue]
            cl.enqueue_nd_range_kernel(cl_queue, self.kernel, work, self.local_size, None, wait_for)
        scheduler.commit(queue, reads, writes)
        return queue

    def _failure(self, call: str, status: int) -> BackendError:
        return enqueue_failure(f"{call}({self.name})", status)

    def retire(self) -> None:
        super().retire()
        self.submit = self.schedule  # whose inspect refuses it, where an Enqueuer would not

    def bind(self, args: tuple[Arg, ...]) -> None:
        """Set the kernel's arguments to ``args``. While its scalars stay the same, only the
        buffers that changed are set, one ``set_arg`` each (a launch over fresh outputs
        changes one or two); else all, in one ``set_args``, which packs the scalars by
        their dtypes."""
        bound, kernel = self.bound, self.kernel
        values: list[Any] = list(args)  # Buffers at the buffer positions (checked)
        self.bound = None  # until every argument is set: a failure leaves nothing assumed
        if bound is not None and self.record is None and self._same_scalars(args, bound):
            for i in self.buffer_positions:
                if values[i] is not bound[i]:
                    kernel.set_arg(i, values[i].handle)
        elif self.record is not None:  # every argument, the hidden ones too
            lengths = [
                values[i].nbytes // self.param_dtypes[i].itemsize for i in self.buffer_positions
            ]
            for i in self.buffer_positions:
                values[i] = values[i].handle
            for i, dtype in self._halves:
                values[i] = round_to(float(values[i]), dtype)
            kernel.set_args(*values, self.record, *lengths)
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
