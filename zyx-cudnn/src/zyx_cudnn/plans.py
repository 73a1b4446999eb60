"""Plans: a ``Spec``'s fastest cuDNN plan on one device, built once and launched as a zyx
``LibraryProgram`` (zyx-cuda's library-program hook), so the device schedules it on its
streams like any kernel.

Every candidate plan of the graph (heuristics A, then the fallback list) is built and timed
with ``Device.launch_timed`` (a warm-up, then the best of ``RUNS``); the fastest is kept:
the heuristics' first choice is not always it (measured: matmul + bias + relu, bf16
8192³, ran at 668 TFLOP/s as the first choice). The winner's engine id and knobs
(``pygraph.get_engine_and_knobs_at_index``) go into zyx's tuning cache under a complete key
(``zyx_cudnn.tuning``: the spec, the device, the versions of everything that builds the
plans), on disk where ``autotune.cache`` is on; a later process finds them there and builds
that one plan (``pygraph.create_execution_plan``), timing none. An entry whose plan no longer
builds (a cuDNN that refuses its knobs) is logged at DEBUG on ``zyx.tune.cudnn``, and every
plan is timed anew and replaces it. With ``autotune.enabled = false`` the first plan that
builds is taken, untimed, and the cache is not used. The plan is remembered per spec and
device for the life of the process (``plan_for``).

A launch does as little as the frontend allows: the plan is pinned (its index in the
backend graph), the variant pack is a ctypes array of pointers in the frontend's uid order,
made once, whose buffer entries are rewritten in place and whose numbers are host cells it
points at; the backend graph's raw-pointer execute takes it (the call the frontend's own
``execute`` ends in, after building that array each time). One cuDNN handle per device, its
stream set only when the device's choice of stream changes. Its workspace is the claim's
scratch buffer, from the device's pool. An execution that fails raises ``BackendError``
with cuDNN's message. Launched again with the same buffers and numbers (a cached plan of
the front end's, whose allocator hands back the same memory), the execution is a CUDA graph
replayed (zyx-cuda's ``LibraryProgram`` with ``replay``).
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
from zyx.search import fill_for_timing
from zyx.tuning import Identity
from zyx_cudnn import tuning
from zyx_cudnn.graphs import OPERANDS, OUT, A, B, Unsupported, build
from zyx_cudnn.spec import OUTPUT, Layout, Scalar, Spec
from zyx_cudnn.tuning import Choice

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
_plans: dict[tuple[int, Spec, bool], Plan | str] = {}
"""Per device, spec and tuning: the plan, or cuDNN's refusal (its message)."""
_handles: dict[int, Any] = {}


def plan_for(spec: Spec, device: CudaDevice, tune: bool = True, disk: bool = True) -> Plan:
    """``spec``'s fastest plan on ``device``, tuned on first use (``tune`` false, as
    ``autotune.enabled = false`` has it: the first plan that builds, untimed); ``disk``
    (``autotune.cache``): the tuning cache on disk too. ``Unsupported`` (cached too) where
    cuDNN cannot run it."""
    key = (id(device), spec, tune)
    with _lock:
        found = _plans.get(key)
        if found is None:
            try:
                found = _tune(spec, device, tune, disk)
            except Unsupported as refusal:
                found = refusal.context
            _plans[key] = found
    if isinstance(found, str):
        # A new error each time: a kept one's traceback would keep the frames it was raised
        # through alive, zyx_match_graph's with its graph, their nodes and buffers.
        raise Unsupported(found)
    return found


FAST_PATH = ("_execute_with_raw_ptrs", "_prepare_variant_pack_template",
             "_get_variant_pack_uids_sorted")  # fmt: skip
"""What the launches use of the frontend's backend graph (1.32's; not its public API)."""


def _tune(spec: Spec, device: CudaDevice, tune: bool, disk: bool) -> Plan:
    import cudnn

    missing = [name for name in FAST_PATH if not hasattr(cudnn._pybind_module.backend_graph, name)]
    if missing:
        raise Unsupported(f"nvidia-cudnn-frontend {cudnn.__version__} has no {', '.join(missing)}")
    handle = _handle(cudnn, device)
    if not tune:
        return _first(cudnn, spec, device, handle)
    key = tuning.key(spec, Identity.of(device), tuning.libraries(cudnn), RUNS)
    choice = tuning.lookup(key, disk)
    if choice is not None:
        plan = _replay(cudnn, choice, spec, device, handle)
        if plan is not None:
            return plan
    started = time.perf_counter()
    plan, winner, times = _search(cudnn, spec, device, handle)
    seconds = time.perf_counter() - started
    tuning.store(key, winner, times, spec.describe(), device.name, seconds, disk)
    return plan


def _first(cudnn: Any, spec: Spec, device: CudaDevice, handle: Any) -> Plan:
    """The first candidate plan that builds, untimed."""
    graph = build(cudnn, spec, handle)
    failures: list[str] = []
    for index in range(graph.get_execution_plan_count()):
        plan = _plan(cudnn, graph, index, spec, device, handle, failures)
        if plan is not None:
            return plan
    raise _none_built(spec, failures)


def _replay(cudnn: Any, choice: Choice, spec: Spec, device: CudaDevice, handle: Any) -> Plan | None:
    """The plan of ``choice`` built alone; ``None`` (logged) where it no longer builds."""
    failures: list[str] = []
    try:
        graph = build(cudnn, spec, handle, (choice.engine, choice.knob_map(cudnn.knob_type)))
    except (Unsupported, ValueError) as error:  # ValueError: a knob this frontend lacks
        failures.append(str(error))
    else:
        plan = _plan(cudnn, graph, 0, spec, device, handle, failures)
        if plan is not None:
            log.debug("%s on %s: the tuning cache's plan %s built (%s), none timed",
                      spec.describe(), device.name, choice.text(),
                      graph.get_plan_name_at_index(0))  # fmt: skip
            return plan
    log.debug("%s on %s: the tuning cache's plan %s does not build (%s): every plan is timed",
              spec.describe(), device.name, choice.text(), "; ".join(failures))  # fmt: skip
    return None


def _search(
    cudnn: Any, spec: Spec, device: CudaDevice, handle: Any
) -> tuple[Plan, Choice, dict[Choice, int]]:
    """Every candidate plan built and timed: the fastest, its choice, and the time of each
    plan timed."""
    graph = build(cudnn, spec, handle)
    count = graph.get_execution_plan_count()
    inputs = _timing_inputs(spec, device)
    best: tuple[int, Choice, Plan] | None = None
    times: dict[Choice, int] = {}
    failures: list[str] = []
    try:
        for index in range(count):
            started = time.perf_counter()
            plan = _plan(cudnn, graph, index, spec, device, handle, failures)
            if plan is None:
                continue
            try:
                ns = _time(plan, spec, device, inputs)
            except BackendError as error:  # a plan that fails to run is no candidate
                failures.append(f"plan {index}: {error}")
                device.release(plan.program)
                continue
            choice = Choice.of(*graph.get_engine_and_knobs_at_index(index))
            times[choice] = ns
            log.debug("%s on %s: plan %d (%s) %d ns, built and timed in %.0f ms", spec.describe(),
                      device.name, index, graph.get_plan_name_at_index(index), ns,
                      (time.perf_counter() - started) * 1e3)  # fmt: skip
            if best is not None and best[0] <= ns:
                device.release(plan.program)
                continue
            if best is not None:
                device.release(best[2].program)
            best = (ns, choice, plan)
    finally:
        _release(device, inputs)
    if best is None:
        raise _none_built(spec, failures)
    log.debug("%s on %s: %d ns, the fastest of %d plans built", spec.describe(), device.name,
              best[0], len(times))  # fmt: skip
    return best[2], best[1], times


def _timing_inputs(spec: Spec, device: CudaDevice) -> list[Arg]:
    """Inputs to time ``spec``'s plans on: its numbers 1.0, its tensors filled with values
    of their dtype (``search.fill_for_timing``), never left as allocated (zeros, as a
    fresh allocation often is: a product of zeros draws less power, and runs at higher
    clocks, than one of real data)."""
    dtypes = {t.source: t.dtype for t in spec.layouts if t.source != OUTPUT}
    inputs: list[Arg] = []
    try:
        for source, needed in enumerate(spec.inputs):
            if needed.number is not None:
                inputs.append(1.0)
                continue
            buf = device.pool.allocate(max(needed.nbytes, 1))
            inputs.append(buf)
            fill_for_timing(device.pool, buf, dtypes[source])
    except BaseException:  # out of memory, say: none of them is kept
        _release(device, inputs)
        raise
    return inputs


def _release(device: CudaDevice, inputs: list[Arg]) -> None:
    for value in inputs:
        if isinstance(value, Buffer):
            device.pool.release(value)


def _none_built(spec: Spec, failures: list[str]) -> Unsupported:
    return Unsupported(f"cuDNN built no plan for {spec.describe()}: " + "; ".join(failures))


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
    return Plan(LibraryProgram(device, name, params, run, replay=True), args, workspace)


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
