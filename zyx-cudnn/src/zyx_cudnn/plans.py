"""Plans: a ``Spec``'s fastest cuDNN plan on one device, built once and launched as a zyx
``LibraryProgram`` (zyx-cuda's library-program hook), so the device schedules it on its
streams like any kernel.

Every candidate plan of the graph (heuristics A, then the fallback list) is built and timed
with ``Device.launch_timed`` (a warm-up, then the best of ``RUNS``; with ``autotune.enabled
= false``, the first plan that builds is taken untimed); the fastest is kept:
the heuristics' first choice is not always it (measured: matmul + bias + relu, bf16
8192³, ran at 668 TFLOP/s as the first choice). The choice is remembered per spec and
device for the life of the process (``plan_for``). A disk tuning cache would store the
winner's ``(engine id, knobs)`` (``pygraph.get_engine_and_knobs_at_index``) under the spec,
the device's name and compute capability and the cuDNN and frontend versions, and rebuild
that one plan with ``pygraph.create_execution_plan`` instead of timing them all: the seam
is ``_tune``, which would look there first.

A launch does as little as the frontend allows: the plan is pinned (its index in the
backend graph), the variant pack is a ctypes array of pointers in the frontend's uid order,
made once, whose buffer entries are rewritten in place and whose numbers are host cells it
points at; the backend graph's raw-pointer execute takes it (the call the frontend's own
``execute`` ends in, after building that array each time). One cuDNN handle per device, its
stream set only when the device's choice of stream changes. Its workspace is the claim's
scratch buffer, from the device's pool. An execution that fails raises ``BackendError``
with cuDNN's message.
"""

from __future__ import annotations

import ctypes
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zyx.backend import Arg, Buffer
from zyx.backend import Scalar as Number
from zyx.dtypes import DType, round_to
from zyx.errors import BackendError, ErrorStatus
from zyx.graph.nodes import CustomLaunch
from zyx.ir.ops import Param, ParamKind
from zyx_cudnn.graphs import OPERANDS, OUT, A, B, Unsupported, build
from zyx_cudnn.spec import OUTPUT, Layout, Scalar, Spec

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.library import LibraryProgram

log = logging.getLogger("zyx.tune.cudnn")

RUNS = 3
"""Timed runs of each candidate plan, after one to warm up; the fastest counts."""

Bindings = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Plan:
    """A spec's chosen plan on one device: its program, bound as a claim binds params
    (``("src", i)``, ``("out", 0)``, ``("scratch", 0)``), and its workspace bytes."""

    program: LibraryProgram
    args: Bindings
    workspace: int

    @property
    def scratch(self) -> tuple[int, ...]:
        return (self.workspace,) if self.workspace else ()

    def launches(self, device: Any) -> list[CustomLaunch]:
        return [CustomLaunch(self.program, self.args)]


_lock = threading.Lock()
_plans: dict[tuple[int, Spec, bool], Plan | Unsupported] = {}
_handles: dict[int, Any] = {}


def plan_for(spec: Spec, device: CudaDevice, tune: bool = True) -> Plan:
    """``spec``'s fastest plan on ``device``, tuned on first use (``tune`` false, as
    ``autotune.enabled = false`` has it: the first plan that builds, untimed);
    ``Unsupported`` (cached too) where cuDNN cannot run it."""
    key = (id(device), spec, tune)
    with _lock:
        found = _plans.get(key)
        if found is None:
            try:
                found = _tune(spec, device, tune)
            except Unsupported as refusal:
                found = refusal
            _plans[key] = found
    if isinstance(found, Unsupported):
        raise found
    return found


FAST_PATH = ("_execute_with_raw_ptrs", "_prepare_variant_pack_template",
             "_get_variant_pack_uids_sorted")  # fmt: skip
"""What the launches use of the frontend's backend graph (1.32's; not its public API)."""


def _tune(spec: Spec, device: CudaDevice, tune: bool) -> Plan:
    import cudnn

    missing = [name for name in FAST_PATH if not hasattr(cudnn._pybind_module.backend_graph, name)]
    if missing:
        raise Unsupported(f"nvidia-cudnn-frontend {cudnn.__version__} has no {', '.join(missing)}")
    handle = _handle(cudnn, device)
    graph = build(cudnn, spec, handle)
    count = graph.get_execution_plan_count()
    inputs: list[Arg] = [  # the data does not change a plan's time: left as it is
        1.0 if i.number is not None else device.pool.allocate(max(i.nbytes, 1)) for i in spec.inputs
    ]
    best: tuple[int, Plan] | None = None
    failures: list[str] = []
    try:
        for index in range(count):
            started = time.perf_counter()
            plan = _plan(cudnn, graph, index, spec, device, handle, failures)
            if plan is None:
                continue
            if not tune:
                return plan
            try:
                ns = _time(plan, spec, device, inputs)
            except BackendError as error:  # a plan that fails to run is no candidate
                failures.append(f"plan {index}: {error}")
                device.release(plan.program)
                continue
            log.debug("%s on %s: plan %d (%s) %d ns, built and timed in %.0f ms", spec.describe(),
                      device.name, index, graph.get_plan_name_at_index(index), ns,
                      (time.perf_counter() - started) * 1e3)  # fmt: skip
            if best is not None and best[0] <= ns:
                device.release(plan.program)
                continue
            if best is not None:
                device.release(best[1].program)
            best = (ns, plan)
    finally:
        for value in inputs:
            if isinstance(value, Buffer):
                device.pool.release(value)
    if best is None:
        raise Unsupported(f"cuDNN built no plan for {spec.describe()}: " + "; ".join(failures))
    log.debug("%s on %s: %d ns, the fastest of %d plans built", spec.describe(), device.name,
              best[0], count - len(failures))  # fmt: skip
    return best[1]


def _plan(
    cudnn: Any, graph: Any, index: int, spec: Spec, device: CudaDevice, handle: Any,
    failures: list[str],
) -> Plan | None:  # fmt: skip
    """The plan at ``index`` built and wrapped as a program; ``None`` (its failure noted)
    where it does not build."""
    from zyx_cuda.library import LibraryProgram

    config = graph.plans[index]
    if config.cpp_index is None:  # a delegating entry, or one of the frontend's own engines
        failures.append(f"plan {index}: not a cuDNN engine's plan")
        return None
    try:
        graph.build_plan_at_index(index)
        workspace = graph.get_workspace_size_plan_at_index(index)
    except (cudnn.cudnnGraphNotSupportedError, RuntimeError, ValueError) as error:
        failures.append(f"plan {index}: {error}")
        return None
    backend = graph._lowered_graph  # the frontend's own fast path (the module's doc)
    backend._prepare_variant_pack_template()
    order = list(backend._get_variant_pack_uids_sorted())
    missing = set(_uids(spec)) - set(order)
    if missing:  # the pack would lack an operand: a frontend that packs otherwise
        failures.append(f"plan {index}: uids {sorted(missing)} are not in its variant pack")
        return None
    run = Runner(cudnn, backend, config.cpp_index, handle, spec, order, workspace > 0)
    params, args = _params(spec, workspace > 0)
    name = f"cudnn_plan{index}_" + "x".join(str(d) for d in spec.out.dims)
    return Plan(LibraryProgram(device, name, params, run), args, workspace)


def _params(spec: Spec, workspace: bool) -> tuple[list[Param], Bindings]:
    """The program's params (the claim's inputs, its output, its workspace) and what a
    claim binds them to."""
    params = [  # buffers as bytes: cuDNN reads them through its own descriptors
        Param(DType.U8, ParamKind.GLOBAL)
        if i.number is None
        else Param(i.number, ParamKind.VARIABLE)
        for i in spec.inputs
    ]
    args: list[tuple[str, int]] = [("src", i) for i in range(len(params))]
    params.append(Param(spec.out.dtype, ParamKind.GLOBAL_MUT))
    args.append(("out", 0))
    if workspace:
        params.append(Param(DType.U8, ParamKind.GLOBAL_MUT))
        args.append(("scratch", 0))
    return params, tuple(args)


def _time(plan: Plan, spec: Spec, device: CudaDevice, inputs: list[Arg]) -> int:
    """The plan's best time of ``RUNS`` on ``inputs`` (after a warm-up)."""
    pool = device.pool
    scratch = [pool.allocate(spec.out.nbytes), *map(pool.allocate, plan.scratch)]
    args = [*inputs, *scratch]
    try:
        device.launch_timed(plan.program, args)
        return min(device.launch_timed(plan.program, args) for _ in range(RUNS))
    finally:
        for buf in scratch:
            pool.release(buf)


class Runner:
    """One plan's launch, called as zyx-cuda calls a library program: ``(stream,
    pointers, scalars)``, pointers and scalars in param order."""

    def __init__(
        self, cudnn: Any, backend: Any, index: int, handle: Any, spec: Spec,
        order: Sequence[int], workspace: bool,
    ) -> None:  # fmt: skip
        self.cudnn, self.handle, self.index = cudnn, handle, index
        self.execute: Callable[..., None] = backend._execute_with_raw_ptrs
        self.raw_handle = handle.backend_handle
        self.pack = (ctypes.c_uint64 * len(order))()
        self.address, self.count = ctypes.addressof(self.pack), len(order)
        slot = {uid: i for i, uid in enumerate(order)}
        inputs = spec.inputs
        buffers = [i for i, x in enumerate(inputs) if x.number is None] + [OUTPUT]
        numbers = [i for i, x in enumerate(inputs) if x.number is not None]
        self.tensors = [
            (slot[uid], buffers.index(t.source), t.offset * t.dtype.itemsize)
            for uid, t in zip(_uids(spec), spec.layouts, strict=False)
        ]
        """Per tensor in device memory: its slot in the pack, the pointer it is at, its
        byte offset from there."""
        self.workspace = len(buffers) if workspace else -1
        self.cells: list[ctypes.c_float] = []
        """The numbers' host cells, which the pack points at (kept alive here)."""
        self.numbers: list[tuple[ctypes.c_float, int, DType, bool]] = []
        """Per number a launch passes: its cell, its position among the scalars, its dtype,
        and whether it passes NaN-or-zero."""
        for j, o in enumerate(spec.operands):
            if isinstance(o, Scalar):
                cell = ctypes.c_float(0.0 if o.value is None else _value(o.value, o.dtype, o.nan))
                self.cells.append(cell)
                self.pack[slot[OPERANDS + j]] = ctypes.addressof(cell)
                if o.source is not None:
                    self.numbers.append((cell, numbers.index(o.source), o.dtype, o.nan))

    def __call__(self, stream: int, pointers: list[int], scalars: list[Number]) -> None:
        pack = self.pack
        for slot, buffer, offset in self.tensors:
            pack[slot] = pointers[buffer] + offset
        for cell, number, dtype, nan in self.numbers:
            cell.value = _value(scalars[number], dtype, nan)
        if self.handle.stream != stream:
            self.cudnn.set_stream(self.handle, stream)
        workspace = pointers[self.workspace] if self.workspace >= 0 else 0
        try:
            self.execute(self.address, self.count, workspace, self.raw_handle, self.index)
        except Exception as error:  # the frontend's binding raises with cuDNN's message
            raise BackendError(ErrorStatus.KERNEL_LAUNCH, f"cuDNN: {error}") from error


def _uids(spec: Spec) -> list[int]:
    """The uids of the spec's layouts (in ``Spec.layouts``' order), then of its numbers."""
    tensors = [OPERANDS + j for j, o in enumerate(spec.operands) if isinstance(o, Layout)]
    numbers = [OPERANDS + j for j, o in enumerate(spec.operands) if isinstance(o, Scalar)]
    return [A, B, OUT, *tensors, *numbers]


def _value(number: Number, dtype: DType, nan: bool) -> float:
    """What a number's cell holds: it rounded to its dtype (as zyx's kernels round it), or
    NaN-or-zero."""
    value = float(number)
    if nan:
        return math.nan if value != value else 0.0
    return value if dtype is DType.F32 else round_to(value, dtype)


def _handle(cudnn: Any, device: CudaDevice) -> Any:
    """The device's cuDNN handle, made on first use (under ``_lock``)."""
    handle = _handles.get(id(device))
    if handle is None:
        device.context.activate()
        handle = _handles[id(device)] = cudnn.create_handle()
    return handle
