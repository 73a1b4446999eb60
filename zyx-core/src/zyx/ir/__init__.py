"""The kernel IR: ops, a builder for writing kernels by hand, and the verifier.

Memory safety of a launch
-------------------------

A kernel that the verifier accepts may still index past its buffers for the arguments it
is launched with. What zyx checks, and what stays undefined:

- **Checked before any native call, on every backend** (``Program.inspect``, and tracker.c's
  ``zyx_fits`` in the native launchers): the accesses whose extent ``zyx.ir.extent`` knows,
  those whose index is an affine form of independent ranges, loop counters of a uniform
  trip count and ``Variable`` params, possibly divided or clamped (``min``/``max``) by
  ``Variable`` params, under guards ``form < bound`` (``>``, ``>=``, ``<=``, ``and``) on a
  gap-free form, or comparisons of ``Variable`` params. A launch where one of them reaches a
  negative index, or one past its buffer, is ``IncorrectKernelArg`` naming the kernel, op,
  argument, index and the buffer's size. A launch that stays in bounds is never refused.
- **Undefined outside the bounds-checked mode** (``Extents.unchecked`` lists a kernel's,
  with the reason): accesses at an index loaded from data (gathers, scatters, histograms),
  computed through ``Where``, ``%``, casts from other integer dtypes than of ``Variable`` params,
  products of two ranges, or ranges used twice in one index (``i % n * s + i / n``);
  accesses under an ``If`` on anything else (data, ``==``, ``or``, a guard on a form with
  gaps such as ``gid * 1024 + lid`` with 256 work-items) or in a loop whose trip count
  differs between work-items; and every access to register and local arrays
  (``Define``). Such an access out of bounds reads or writes other memory: on the host and
  other CPU devices it may corrupt the process or segfault, on a GPU it may fault the
  context, and on OpenCL it often runs without a word. So does index arithmetic whose
  value leaves ``int64`` (it wraps): a known access whose exact bound leaves ``int64`` is
  refused, but a division of a wrapped operand is not seen as wrapped.
- **Checked as it runs, in the bounds-checked mode** (``ZYX_DEBUG`` bit 512,
  ``zyx.debug.BOUNDS``, or ``bounds_checked=True`` of a device): on the host, OpenCL and
  CUDA, every ``Load`` and ``Store`` of a buffer or ``Define`` is guarded
  (``zyx.codegen.c``): an out-of-bounds load gives 0, such a store is skipped, the kernel
  runs on, and the launch raises ``KernelLaunch`` naming the kernel, the op, the argument
  (or ``Define``) and the index of the first one; the device stays usable. The host's
  interpreter (``HostDevice(interpret=True)``) checks every access too, with the same
  message. Still undefined there: a data race (several work-items storing one element),
  reading memory no store wrote (buffers and registers start with whatever they held),
  and buffers that overlap within a launch where one is written.
"""

from zyx.ir.builder import KernelBuilder, Value, ceil_div
from zyx.ir.ops import (
    INDEX,
    MMA_FRAGMENT,
    MMA_SHAPE,
    Barrier,
    Binary,
    BOp,
    Cast,
    CommitCopies,
    Const,
    CopyAsync,
    Define,
    Dim,
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
    Scope,
    Shuffle,
    Storage,
    Store,
    SymDim,
    Unary,
    UOp,
    WaitCopies,
    Where,
)
from zyx.ir.verify import check_limits, verify

__all__ = [
    "INDEX",
    "Barrier",
    "Binary",
    "BOp",
    "Cast",
    "CommitCopies",
    "Const",
    "CopyAsync",
    "Define",
    "Dim",
    "EndIf",
    "EndLoop",
    "Fma",
    "If",
    "Kernel",
    "KernelBuilder",
    "LdMatrix",
    "Load",
    "Loop",
    "MMA_FRAGMENT",
    "MMA_SHAPE",
    "Mma",
    "Op",
    "Param",
    "ParamKind",
    "Range",
    "Ref",
    "Scope",
    "Shuffle",
    "Storage",
    "Store",
    "SymDim",
    "Unary",
    "UOp",
    "Value",
    "WaitCopies",
    "Where",
    "ceil_div",
    "check_limits",
    "verify",
]
