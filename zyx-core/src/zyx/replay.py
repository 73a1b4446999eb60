"""``zyx.jit``: run a function once, then replay the kernels it ran as one batch.

``f = zyx.jit(fn)``; the first call of ``f`` with a new *signature* runs ``fn`` eagerly
and captures every plan the runtime realizes meanwhile (``zyx.runtime.capturing``), down
to the realization of ``fn``'s results. From those plans it builds, per device, one
``Recording`` (``Device.record``) of all their launches (of those between two copies,
where the program moves data between devices): a CUDA graph on CUDA, launches enqueued
together in the OpenCL scheduler's windows (``opencl.window`` launches each), one pass
over the launches on the host. Later calls with the same signature replay it: no
tracing, scheduling, lowering or plan building; the input buffers are rebound where they
changed (``Recording.set_arg``), and the results come back as new arrays, in the
structure ``fn`` returned them in.

The signature of a call is, per argument (positional and keyword):

- a zyx array: its shape, dtype and device, and which other arguments are the same array
  (``f(x, x)`` is another signature than ``f(x, y)``). A lazy array is realized first.
- a Python scalar (``bool``, ``int``, ``float``, ``str``, ``None``; a numpy scalar counts
  as the number it holds): its type and value. Scalars are *static*, as JAX's
  ``static_argnums``: ``fn`` may branch on them or build shapes from them, and each value
  is captured once. Pass a 0-D array for a number that changes from call to call.
- a tuple, list or dict (exactly those types) of these, nested: its type and length (a
  dict's keys, in order), and each item's part.

Anything else is a ``TypeError`` that names the argument. The signatures of one jitted
function are kept in an LRU cache of ``cache_size`` entries (``CACHE_SIZE``): a call with
another one captures again, and the least recently used capture is dropped, its buffers
given back.

What a replay repeats is what ``fn`` computed with zyx arrays; everything else ``fn``
did at capture is fixed from then on, as in a JAX trace: arrays ``fn`` reads from outside
its arguments (weights in a closure, ``zyx.asarray`` of numpy data, random numbers drawn
inside ``fn``) are constants of the capture, Python side effects happen once.

What cannot be replayed: a function that reads values back to Python while it runs
(``float(x)``, ``bool(x)``, ``x.numpy()``, ``nonzero``, ``unique_*``, boolean-mask
indexing, ``print``) decides on data a replay would not see; one that changes an argument
in place (``x += 1``) rebinds an array the replay would not. For such a signature ``jit``
does what ``torch.compile`` does at a graph break: it logs a warning on ``zyx.jit`` with
the reason, and runs ``fn`` eagerly at that call and every later call of the signature.

Results are never overwritten by later calls: each result buffer belongs to the capture
and is handed out to the result array; the next replay writes it again only if that
array is gone (dropped, or read into numpy and dropped), and otherwise writes a fresh
buffer (rebinding the launches that write it). Buffers between kernels are allocated
once per capture and kept, reused across kernels where their lives do not overlap. A
kernel no result depends on (a value ``fn`` realized and did not use) is not replayed.

A jitted function may be called from any thread: replays run under the runtime's lock
(one at a time, each whole), captures of different threads see only their own realizes.
A jitted function called while another captures runs eagerly, so that the outer capture
holds its kernels too.
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Generic, ParamSpec, TypeVar

from zyx import runtime as rt
from zyx.allocator import allocator
from zyx.backend import Arg, Buffer, Device, MemoryPool, Recording
from zyx.graph.nodes import Node, leaf
from zyx.ir.ops import ParamKind
from zyx.tensor import Tensor

log = logging.getLogger("zyx.jit")

CACHE_SIZE = 8
"""Captures a jitted function keeps by default (``torch.compile``'s recompile limit)."""

P = ParamSpec("P")
R = TypeVar("R")

Ref = tuple[str, Any]
"""What a launch argument or a result is bound to: ``("input", i)`` (the call's array
``i``), ``("buffer", k)`` (the capture's buffer ``k``), ``("node", node)`` (a constant of
the capture) or ``("value", number)``."""

Use = tuple[Recording, int, int]
"""A recorded launch argument: the recording, the launch's index in it, the position."""

STATIC = (bool, int, float, str, type(None))
GLOBAL_MUT = ParamKind.GLOBAL_MUT
CONTAINERS = (tuple, list, dict)
"""What arguments and results may nest arrays in (exactly these types)."""


class Jit(Generic[P, R]):
    """``fn`` captured per signature and replayed (``zyx.jit``)."""

    def __init__(self, fn: Callable[P, R], cache_size: int = CACHE_SIZE) -> None:
        if not callable(fn):
            raise TypeError(f"jit takes a function, got {type(fn).__name__}")
        if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 1:
            raise ValueError(f"jit: cache_size must be an int of 1 or more, got {cache_size!r}")
        self.fn = fn
        self.cache_size = cache_size
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self._names = _parameter_names(fn)
        self._lock = threading.Lock()
        self._cache: OrderedDict[Hashable, _Batch | str] = OrderedDict()
        """Per signature: its batch, or why it runs eagerly."""
        self._warned = False
        """Whether the cache's overflow was logged (once per jitted function)."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if rt.capturing.get() is not None:  # inside another capture: its kernels are ours
            return self.fn(*args, **kwargs)
        key, arrays = self._signature(args, kwargs)
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None:
                self._cache.move_to_end(key)
        if entry is None:
            return self._capture(key, arrays, args, kwargs)
        if isinstance(entry, str):
            return self.fn(*args, **kwargs)
        return entry.replay(arrays)  # type: ignore[no-any-return]

    def cached(self) -> int:
        """Signatures captured (or found unreplayable) and kept."""
        with self._lock:
            return len(self._cache)

    def clear(self) -> None:
        """Drop every capture (their buffers go back once no replay uses them)."""
        with self._lock:
            self._cache.clear()

    def _signature(
        self, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[Hashable, list[Tensor]]:
        arrays: list[Tensor] = []
        first: dict[int, int] = {}
        parts: list[Hashable] = []
        named: Iterable[tuple[int | str, Any]] = enumerate(args)
        if kwargs:
            named = [*enumerate(args), *sorted(kwargs.items())]
        for where, value in named:
            self._walk(value, (where,), parts, arrays, first)
        if kwargs:  # a keyword's name is part of its signature; a position is its place
            parts.append(tuple(sorted(kwargs)))
        return tuple(parts), arrays

    def _walk(
        self,
        value: Any,
        where: tuple[Any, ...],
        parts: list[Hashable],
        arrays: list[Tensor],
        first: dict[int, int],
    ) -> None:
        """Add ``value``'s part of the signature (its arrays to ``arrays``): an array, a
        static scalar, or a tuple, list or dict of them (its type, length or keys, then
        each item's part)."""
        if isinstance(value, Tensor):
            node = value.node
            index = first.setdefault(id(node), len(arrays))
            if index == len(arrays):
                arrays.append(value)
            parts.append((node.dtype, node.shape, node.device, index))
        elif type(value) in CONTAINERS:
            items = value.items() if type(value) is dict else enumerate(value)
            parts.append((type(value), tuple(value) if type(value) is dict else len(value)))
            for key, item in items:
                self._walk(item, (*where, key), parts, arrays, first)
        else:
            parts.append(self._static(where, value))

    def _static(self, where: tuple[Any, ...], value: Any) -> tuple[type, Hashable]:
        if not isinstance(value, STATIC):
            numpy = sys.modules.get("numpy")
            if numpy is None or not isinstance(value, numpy.generic) or value.ndim:
                item = "".join(f"[{key!r}]" for key in where[1:])
                raise TypeError(
                    f"jit({self.__name__}): {self._describe(where[0])}{item and f', item {item},'}"
                    f" is a {type(value).__module__}.{type(value).__qualname__}; pass a zyx array "
                    "(zyx.asarray), a Python scalar (bool, int, float, str, None: static, part "
                    "of the signature), or a tuple, list or dict of them"
                )
            value = value.item()
        # 1 == 1.0 == True and 0.0 == -0.0: the type and a float's bits tell them apart
        return type(value), value.hex() if isinstance(value, float) else value

    def _describe(self, where: int | str) -> str:
        if isinstance(where, str):
            return f"keyword argument {where!r}"
        name = self._names[where] if where < len(self._names) else None
        return f"argument {name!r} (position {where})" if name else f"argument {where}"

    def _capture(self, key: Hashable, arrays: list[Tensor], args: Any, kwargs: Any) -> R:
        rt.runtime.realize(a.node for a in arrays)
        stand_ins = _StandIns(arrays)
        capture = rt.Capture()
        token = rt.capturing.set(capture)
        try:
            result = self.fn(*_tree_map(args, stand_ins.of), **_tree_map(kwargs, stand_ins.of))
            outputs, pack = _results(self.__name__, result)
            rt.runtime.realize(t.node for t in outputs)
        finally:
            rt.capturing.reset(token)
        inputs = stand_ins.nodes
        reason = _unreplayable(capture, stand_ins.changed(), self._describe, args, kwargs)
        entry: _Batch | str
        if reason is not None:
            log.warning("jit(%s) runs eagerly for this signature: %s", self.__name__, reason)
            entry = reason
        else:
            entry = _Batch(capture, inputs, [t.node for t in outputs], pack)
        del capture  # the eager run's intermediates: given back now
        with self._lock:
            self._cache[key] = entry
            self._cache.move_to_end(key)
            evicted = len(self._cache) > self.cache_size
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            warn, self._warned = evicted and not self._warned, self._warned or evicted
        if warn:
            log.warning(
                "jit(%s): more signatures than its cache holds (%d): each new one captures "
                "again and drops the least recently used; a Python scalar argument is static "
                "(each value a signature): pass a 0-D array for one that changes",
                self.__name__,
                self.cache_size,
            )
        return result

    def __repr__(self) -> str:
        return f"<zyx.jit of {self.__name__}, {self.cached()} captured>"


def jit(fn: Callable[P, R], *, cache_size: int = CACHE_SIZE) -> Jit[P, R]:
    """``fn`` captured on its first call per signature and replayed as one batch of
    kernels afterwards (``zyx.replay``'s docstring says what is captured, when it captures again
    and what cannot be replayed). ``fn`` takes zyx arrays and Python scalars (static), and
    tuples, lists and dicts of them, and returns arrays: one, or a tuple, list or dict of
    them (nested too)."""
    return Jit(fn, cache_size)


def _parameter_names(fn: Callable[..., Any]) -> list[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in positional]


def _results(name: str, result: Any) -> tuple[list[Tensor], Any]:
    """The arrays ``fn`` returned, in order, and their structure: ``result`` with each
    array replaced by its index (what ``_tree_map`` rebuilds it from)."""
    outputs: list[Tensor] = []

    def index(value: Any) -> int:
        if not isinstance(value, Tensor):
            raise TypeError(
                f"jit({name}): the function must return zyx arrays (one, or a tuple, list or "
                f"dict of them), got {type(value).__name__}"
                + (f" in a {type(result).__name__}" if value is not result else "")
            )
        outputs.append(value)
        return len(outputs) - 1

    return outputs, _tree_map(result, index)


def _tree_map(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with each item that is not a tuple, list or dict replaced by ``leaf`` of
    it, the same tuples, lists and dicts around them."""
    kind = type(value)
    if kind is tuple or kind is list:
        return kind(_tree_map(v, leaf) for v in value)
    if kind is dict:
        return {k: _tree_map(v, leaf) for k, v in value.items()}
    return leaf(value)


def _unreplayable(
    capture: rt.Capture,
    changed: list[Tensor],
    describe: Callable[[int | str], str],
    args: Sequence[Any],
    kwargs: dict[str, Any],
) -> str | None:
    """Why the captured run cannot be replayed (it read values, or changed the arguments
    ``changed`` in place), or ``None``."""
    if capture.reads:
        return (
            f"it read values back to Python {capture.reads} time(s) (float(x), x.numpy(), "
            "nonzero, ...): a replay cannot repeat a decision made on data"
        )
    if changed:
        named: list[tuple[int | str, Any]] = [*enumerate(args), *kwargs.items()]
        which = ", ".join(describe(w) for w, v in named if any(v is t for t in changed))
        which = which or "an array inside an argument"
        return f"it changed {which} in place, which a replay would not"
    return None


class _StandIns:
    """What ``fn`` gets at capture in place of each array argument: a new array over the
    same buffer, so that the capture tells an argument from the same array reached
    another way (a closure's constant, which a replay must not rebind). An argument that
    ``fn`` changes in place is changed in the caller's array too, as an eager call would."""

    def __init__(self, arrays: list[Tensor]) -> None:
        with allocator.held:
            self.nodes = [_share(a.node) for a in arrays]
        self._by_node = {id(a.node): n for a, n in zip(arrays, self.nodes)}
        self._pairs: dict[int, tuple[Tensor, Tensor, Node]] = {}

    def of(self, value: Any) -> Any:
        """``value``'s stand-in (one per array object), or ``value`` if it is no array."""
        if not isinstance(value, Tensor):
            return value
        pair = self._pairs.get(id(value))
        if pair is None:
            node = self._by_node[id(value.node)]
            pair = self._pairs[id(value)] = (value, Tensor(node), node)
        return pair[1]

    def changed(self) -> list[Tensor]:
        """The caller's arrays whose stand-ins ``fn`` changed in place, now changed too."""
        changed = []
        for array, stand_in, node in self._pairs.values():
            if stand_in.node is not node:
                array.node = stand_in.node
                changed.append(array)
        return changed


def _share(node: Node) -> Node:
    """A new leaf over realized ``node``'s buffer (retained: it holds a reference)."""
    buf = node.buffer
    assert buf is not None
    buf.pool.retain(buf)
    return leaf(buf, node.dtype, node.shape, node.device)


class _Batch:
    """One capture, replayable: recordings per device (copies between devices between
    them), the buffers they use, and where each input and result is bound."""

    def __init__(
        self, capture: rt.Capture, inputs: list[Node], outputs: list[Node], pack: Any
    ) -> None:
        self.structure = pack
        """The results as ``fn`` returned them, each array replaced by its index."""
        self.meta = [(n.dtype, n.shape, n.device) for n in outputs]
        flat = _Flat(capture, inputs, outputs)
        with allocator.held:
            try:
                self.buffers = [allocator.allocate(pool, n) for pool, n in flat.buffers]
                self._record(flat, inputs)
            except BaseException:
                for buf in [*getattr(self, "buffers", ()), *getattr(self, "bound", ())]:
                    allocator.free(buf)
                raise
        weakref.finalize(self, _give_back, self.buffers, self.bound)

    def _record(self, flat: _Flat, inputs: list[Node]) -> None:
        self.segments: list[list[Recording] | tuple[Ref, Ref]] = []
        self.input_uses: list[list[Use]] = [[] for _ in inputs]
        self.bound: list[Buffer] = []
        """Each input's buffer at the last replay, retained: a launch rebound at one
        input is checked with its other arguments, which must still be live."""
        for node in inputs:
            assert node.buffer is not None
            node.buffer.pool.retain(node.buffer)
            self.bound.append(node.buffer)
        self.output_uses: dict[int, list[Use]] = {k: [] for k in flat.result_buffers}
        self.outputs = flat.outputs
        self.constants = flat.constants
        self.launches = 0
        recordings: dict[Device, Recording] = {}
        for op in flat.ops:
            if op[0] == "copy":
                self._flush(recordings)
                self.segments.append((op[1], op[2]))
                continue
            _, device, program, refs = op
            recording = recordings.get(device)
            if recording is None:
                recording = recordings[device] = device.record()
            index = len(recording.launches)
            args: list[Arg] = []
            for position, (kind, value) in enumerate(refs):
                if kind == "input":
                    self.input_uses[value].append((recording, index, position))
                elif kind == "buffer" and value in self.output_uses:
                    self.output_uses[value].append((recording, index, position))
                args.append(self._resolve((kind, value), inputs))
            recording.launch(program, args)
            self.launches += 1
        self._flush(recordings)

    def _flush(self, recordings: dict[Device, Recording]) -> None:
        if recordings:
            self.segments.append(list(recordings.values()))
            recordings.clear()

    def _resolve(self, ref: Ref, inputs: Sequence[Node]) -> Any:
        kind, value = ref
        if kind == "input":
            return inputs[value].buffer
        if kind == "buffer":
            return self.buffers[value]
        if kind == "node":
            return value.buffer
        return value

    def replay(self, arrays: list[Tensor]) -> Any:
        inputs = [a.node for a in arrays]
        lazy = [n for n in inputs if n.buffer is None]
        if lazy:
            rt.runtime.realize(lazy)
        with allocator.held:
            self._bind(inputs)
            for segment in self.segments:
                if isinstance(segment, list):
                    for recording in segment:
                        recording.replay()
                else:
                    self._copy(segment, inputs)
            rt._stats.replays += 1
            rt._stats.launches += self.launches
            results = self._hand_out(inputs)
        return _tree_map(self.structure, results.__getitem__)

    def _bind(self, inputs: list[Node]) -> None:
        """Rebind the inputs whose buffers changed since the last replay, and give each
        result buffer that an earlier result array still holds a fresh one."""
        stale = []
        for i, uses in enumerate(self.input_uses):
            buf = inputs[i].buffer
            assert buf is not None
            if buf is not self.bound[i]:
                buf.pool.retain(buf)
                stale.append(self.bound[i])
                self.bound[i] = buf
                for recording, launch, position in uses:
                    recording.set_arg(launch, position, buf)
        for buf in stale:
            allocator.free(buf)
        for k, uses in self.output_uses.items():
            held = self.buffers[k]
            if held.refcount > 1:  # an earlier result's: never written again
                fresh = allocator.allocate(held.pool, held.nbytes)
                for recording, launch, position in uses:
                    recording.set_arg(launch, position, fresh)
                self.buffers[k] = fresh
                allocator.free(held)

    def _copy(self, segment: tuple[Ref, Ref], inputs: list[Node]) -> None:
        dst, src = (self._resolve(ref, inputs) for ref in segment)
        dst.pool.copy_from(src.pool, src, dst)
        rt._stats.copies += 1

    def _hand_out(self, inputs: list[Node]) -> list[Tensor]:
        made: dict[int, Node] = {}
        results = []
        for (kind, value), (dtype, shape, device) in zip(self.outputs, self.meta):
            if kind == "buffer":
                node = made.get(value)
                if node is None:
                    buf = self.buffers[value]
                    buf.pool.retain(buf)
                    node = made[value] = leaf(buf, dtype, shape, device)
            else:
                node = inputs[value] if kind == "input" else value
            results.append(Tensor(node))
        return results


def _give_back(*buffers: list[Buffer]) -> None:
    """A dropped capture's buffers, freed as a dead node's are (from any thread)."""
    for bufs in buffers:
        for buf in bufs:
            allocator.dead(buf)


class _Flat:
    """The captured plans as one list of launches and copies over the capture's buffers:
    each plan's slots renumbered into buffers, a buffer reused by a later one of its pool
    and size once its last reader ran (each result keeps its own)."""

    def __init__(self, capture: rt.Capture, inputs: list[Node], outputs: list[Node]) -> None:
        self.inputs = {id(n): i for i, n in enumerate(inputs)}
        self.produced: dict[int, int] = {}
        """Per node a captured plan realized: its virtual buffer."""
        self.constants: dict[int, Node] = {}
        self.virtual: list[tuple[MemoryPool, int]] = []
        ops: list[tuple[Any, ...]] = []
        for plan, leaves, targets in capture.plans:
            ops.extend(self._plan(plan, leaves, targets))
        results = [self.produced[id(n)] for n in outputs if id(n) in self.produced]
        ops = _needed(ops, set(results))
        physical = self._assign(ops, set(results))
        self.buffers = [self.virtual[v] for v in physical.order]
        self.result_buffers = {physical.of[v] for v in results}
        self.ops = [_renumber(op, physical.of) for op in ops]
        self.outputs = [self._result(n, physical.of) for n in outputs]

    def _plan(
        self, plan: rt.ExecPlan, leaves: list[Node], targets: list[Node]
    ) -> list[tuple[Any, ...]]:
        slots: dict[int, int] = {}

        def ref(arg: tuple[str, Any]) -> Ref:
            kind, value = arg
            if kind == "slot":
                return ("virtual", slots[value])
            if kind == "leaf":
                return self._leaf(leaves[value])
            return ("value", value)

        ops: list[tuple[Any, ...]] = []
        for step in plan.steps:
            if isinstance(step, rt.Alloc):
                slots[step.slot] = len(self.virtual)
                self.virtual.append((step.device.pool, step.nbytes))
            elif isinstance(step, rt.Launch):
                ops.append(("launch", step.device, step.program, [ref(a) for a in step.args]))
            elif isinstance(step, rt.Copy):
                ops.append(("copy", ("virtual", slots[step.slot]), ref(step.source)))
        for position, slot in plan.targets:
            self.produced[id(targets[position])] = slots[slot]
        return ops

    def _leaf(self, node: Node) -> Ref:
        found = self.inputs.get(id(node))
        if found is not None:
            return ("input", found)
        virtual = self.produced.get(id(node))
        if virtual is not None:
            return ("virtual", virtual)
        if node.buffer is None:  # a Python scalar the kernel takes as an argument
            return ("value", node.arg)
        self.constants[id(node)] = node
        return ("node", node)

    def _assign(self, ops: list[tuple[Any, ...]], results: set[int]) -> _Physical:
        last: dict[int, int] = {}
        for i, op in enumerate(ops):
            for v in _virtual(op):
                last[v] = i
        physical = _Physical()
        free: dict[tuple[MemoryPool, int], list[int]] = {}
        for v in sorted(results):
            physical.new(v)
        for i, op in enumerate(ops):
            for v in _virtual(op):
                if v not in physical.of:
                    spare = free.get(self.virtual[v])
                    physical.of[v] = spare.pop() if spare else physical.new(v)
            for v in dict.fromkeys(_virtual(op)):
                if last[v] == i and v not in results:
                    free.setdefault(self.virtual[v], []).append(physical.of[v])
        return physical

    def _result(self, node: Node, of: dict[int, int]) -> Ref:
        found = self.inputs.get(id(node))
        if found is not None:
            return ("input", found)
        virtual = self.produced.get(id(node))
        if virtual is not None:
            return ("buffer", of[virtual])
        self.constants[id(node)] = node
        return ("node", node)


class _Physical:
    """Virtual buffers to the capture's buffers (``of``), and for each buffer the first
    virtual one given it (``order``: its pool and size)."""

    def __init__(self) -> None:
        self.of: dict[int, int] = {}
        self.order: list[int] = []

    def new(self, virtual: int) -> int:
        k = self.of[virtual] = len(self.order)
        self.order.append(virtual)
        return k


def _needed(ops: list[tuple[Any, ...]], results: set[int]) -> list[tuple[Any, ...]]:
    """The ops a result depends on: each that writes a buffer a later needed op reads, or
    a result (a value ``fn`` realized and never used again is not computed again)."""
    needed = set(results)
    kept = []
    for op in reversed(ops):
        if not needed.isdisjoint(_written(op)):
            kept.append(op)
            needed.update(_virtual(op))
    return kept[::-1]


def _written(op: tuple[Any, ...]) -> list[int]:
    """The virtual buffers ``op`` writes: a launch's ``GlobalMut`` params, a copy's
    destination."""
    if op[0] == "copy":
        return _virtual(op[:2])
    kinds = op[2].param_kinds
    return [v for (kind, v), k in zip(op[3], kinds) if kind == "virtual" and k is GLOBAL_MUT]


def _virtual(op: tuple[Any, ...]) -> list[int]:
    refs = op[3] if op[0] == "launch" else op[1:]
    return [value for kind, value in refs if kind == "virtual"]


def _renumber(op: tuple[Any, ...], of: dict[int, int]) -> tuple[Any, ...]:
    def ref(r: Ref) -> Ref:
        return ("buffer", of[r[1]]) if r[0] == "virtual" else r

    if op[0] == "launch":
        return (*op[:3], [ref(r) for r in op[3]])
    return ("copy", ref(op[1]), ref(op[2]))
