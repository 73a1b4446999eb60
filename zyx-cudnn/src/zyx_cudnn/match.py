"""The matcher: which parts of a graph zyx-cudnn offers to run, as ``Spec``s, and why not
the rest (logged on ``zyx.sched.cudnn`` at DEBUG, ``ZYX_DEBUG=4``). Pure Python: it needs
neither cuDNN nor a GPU.

A matmul (``zyx.graph.claims.matmuls``) is claimed with its operands read in place through
their strides: each must have its rows or its columns contiguous, and its batch dims must
merge into one (or all broadcast: cuDNN broadcasts a batch of 1). Its dtype is f16, bf16 or
f32; the product accumulates in f32.

The elementwise ops that follow it in the graph are its epilogue, translated op by op into
cuDNN's pointwise ops, so bias adds, scales, relu, gelu, sigmoid and tanh come out as zyx
records them (a sigmoid is a negation, an exp, an add and a division; ``maximum(x, s)`` a
max inside the standard's NaN guards; but ``maximum(x, 0)`` is cuDNN's relu, which keeps
NaN as the guards do: bias + relu, bf16 8192³ on an H100, 724 TFLOP/s where the guards
ran 664), with their operands: broadcast tensors read through their strides, and numbers
passed by value at each launch (an ``Op.SCALAR``'s value is not part of the graph's
structure, so a plan must not bake it in). The epilogue stops at the first op cuDNN has no
pointwise op for, or that changes the shape, and never swallows a value something outside
it reads. ``candidates`` gives every place the claim may end, longest first: cuDNN decides
at build time which it can run (``zyx_cudnn.plans``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from zyx.dtypes import DType
from zyx.graph.claims import Matmul, Operand, matmuls, strided
from zyx.graph.nodes import Node, Op
from zyx.ir.ops import BOp, UOp
from zyx_cudnn.spec import OUTPUT, Layout, Ref, Scalar, Spec, Step

if TYPE_CHECKING:
    from zyx.backend import Device
    from zyx.graph.schedule import Graph

log = logging.getLogger("zyx.sched.cudnn")

DTYPES = frozenset({DType.F16, DType.BF16, DType.F32})
"""The dtypes cuDNN multiplies (with f32 accumulation) and reads as epilogue operands."""

ALIGNMENT = 16
"""Bytes: where an operand starts inside its buffer (a slice's offset) must be a multiple
of it; cuDNN's engines load operands in 16-byte vectors (buffers themselves are aligned)."""

MAX_STEPS = 32
"""The longest epilogue offered; beyond it the rest runs as generated kernels."""

UNARY = {
    UOp.NEG: "neg", UOp.EXP: "exp", UOp.TANH: "tanh", UOp.RECIPROCAL: "reciprocal",
    UOp.SQRT: "sqrt", UOp.LN: "log", UOp.ABS: "abs", UOp.SIN: "sin", UOp.COS: "cos",
    UOp.FLOOR: "floor", UOp.CEIL: "ceil",
}  # fmt: skip
"""zyx's unary ops that cuDNN's pointwise ops compute alike."""

BINARY = {BOp.ADD: "add", BOp.SUB: "sub", BOp.MUL: "mul", BOp.DIV: "div", BOp.MAX: "max",
          BOp.MIN: "min"}  # fmt: skip
COMPARE = {BOp.NOTEQ: "cmp_neq", BOp.EQ: "cmp_eq", BOp.CMPLT: "cmp_lt", BOp.CMPGT: "cmp_gt",
           BOp.CMPGE: "cmp_ge"}  # fmt: skip
MIRRORED = {"add": "add", "mul": "mul", "max": "max", "min": "min", "cmp_neq": "cmp_neq",
            "cmp_eq": "cmp_eq", "cmp_lt": "cmp_gt", "cmp_gt": "cmp_lt",
            "cmp_ge": "cmp_le"}  # fmt: skip
"""``op(x, y) == MIRRORED[op](y, x)``: an operand first becomes an operand second."""

SCALARS = frozenset({Op.SCALAR, Op.CONST})


@dataclass(frozen=True)
class Candidate:
    """A claim zyx-cudnn may make: ``output`` computed by ``spec`` from ``inputs``."""

    output: Node
    inputs: tuple[Node, ...]
    spec: Spec


def candidates(graph: Graph, device: Device, tf32: bool = False) -> list[list[Candidate]]:
    """Per matmul of ``graph`` on ``device`` that cuDNN can multiply: where its claim may
    end, the longest epilogue first. ``tf32`` lets f32 products use TF32."""
    found = []
    for m in matmuls(graph):
        if m.output.device is device:
            options = _candidates(graph, m, tf32)
            if options:
                found.append(options)
    return found


def _candidates(graph: Graph, m: Matmul, tf32: bool) -> list[Candidate]:
    shape = f"{m.output.dtype.value} {(*m.batch, m.n, m.k)} @ {(*m.batch, m.k, m.m)}"
    inputs = _Inputs()
    a = _matrix(m.a, m.batch, (m.n, m.k), inputs)
    b = _matrix(m.b, m.batch, (m.k, m.m), inputs) if isinstance(a, Layout) else a
    if isinstance(a, str) or isinstance(b, str):
        log.debug("matmul %s not claimed: %s", shape, b)
        return []
    epilogue = _Epilogue(graph, m, inputs)
    epilogue.grow()
    tf32 = tf32 and m.output.dtype is DType.F32
    out = (prod(m.batch), m.n, m.m)
    options: list[Candidate] = []
    last = -1
    for node, steps, operands, count in reversed(epilogue.cuts):
        if steps == last:
            continue  # the same product and epilogue, ending a view earlier
        last = steps
        layout = Layout(out, (m.n * m.m, m.m, 1), 0, node.dtype, OUTPUT)
        live, read = _live(epilogue.steps[:steps], epilogue.operands[:operands])
        spec = Spec(a, b, layout, read, live, tf32)
        options.append(Candidate(node, tuple(inputs.nodes[:count]), spec))
    log.debug("matmul %s: cuDNN may claim it as %s", shape,
              " or ".join(c.spec.describe() for c in options))  # fmt: skip
    return options


def _live(
    steps: list[Step], operands: list[Scalar | Layout]
) -> tuple[tuple[Step, ...], tuple[Scalar | Layout, ...]]:
    """The steps the last value needs and the operands they read, renumbered: a step
    nothing reads (the comparison and the max a relu replaced) is not built."""
    needed = {len(steps)}
    for i in reversed(range(len(steps))):
        if i + 1 in needed:
            needed.update(v for kind, v in steps[i].args if kind == "value")
    kept = [i for i in range(len(steps)) if i + 1 in needed]
    value = {0: 0} | {i + 1: n + 1 for n, i in enumerate(kept)}
    used = sorted({v for i in kept for kind, v in steps[i].args if kind == "operand"})
    operand = {j: n for n, j in enumerate(used)}
    renamed = tuple(
        Step(steps[i].op, tuple((k, (value if k == "value" else operand)[v])
                                for k, v in steps[i].args), steps[i].dtype)
        for i in kept
    )  # fmt: skip
    return renamed, tuple(operands[j] for j in used)


class _Inputs:
    """A claim's input nodes, each once, by identity."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._index: dict[int, int] = {}

    def add(self, node: Node) -> int:
        found = self._index.get(id(node))
        if found is None:
            found = self._index[id(node)] = len(self.nodes)
            self.nodes.append(node)
        return found


def _matrix(
    x: Operand, batch: tuple[int, ...], size: tuple[int, int], inputs: _Inputs
) -> Layout | str:
    """``x`` as a (batch, rows, columns) tensor read in place, or why cuDNN cannot read it."""
    merged = _readable(x, batch)
    if isinstance(merged, str):
        return merged
    oriented = _orient(*size, *x.strides[-2:])
    if oriented is None:
        return "an operand has neither its rows nor its columns contiguous"
    count, stride = merged
    rows, cols = size
    extent = (rows - 1) * oriented[0] + (cols - 1) * oriented[1] + 1
    strides = (stride if count > 1 else extent, *oriented)
    return Layout((count, rows, cols), strides, x.offset, x.node.dtype, inputs.add(x.node))


def _readable(x: Operand, batch: tuple[int, ...]) -> tuple[int, int] | str:
    """``x``'s batch dims merged into one (``_merge``), or why cuDNN cannot read ``x``."""
    dtype = x.node.dtype
    if dtype not in DTYPES:
        return f"an operand is {dtype.value}; cuDNN reads f16, bf16 and f32"
    if any(s < 0 for s in x.strides):
        return "an operand is read backwards (a negative stride)"
    if x.offset * dtype.itemsize % ALIGNMENT:
        return f"an operand starts {x.offset} elements into its buffer: not {ALIGNMENT}-aligned"
    merged = _merge(batch, x.strides[:-2])
    if merged is None:
        return "an operand's batch dims do not merge into one (a copy would be needed)"
    return merged


def _merge(sizes: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int] | None:
    """Batch dims as one (count, stride): all broadcast is a batch of 1; ``None`` where
    they do not merge (a copy would be needed)."""
    dims = [(n, s) for n, s in zip(sizes, strides, strict=True) if n != 1]
    if all(s == 0 for _, s in dims):
        return (1, 0)
    if any(s == 0 for _, s in dims):
        return None
    for (_, outer), (n, inner) in zip(dims, dims[1:]):
        if outer != n * inner:
            return None
    return (prod(n for n, _ in dims), dims[-1][1])


def _orient(rows: int, cols: int, row: int, col: int) -> tuple[int, int] | None:
    """Strides of a matrix read in place, rows or columns contiguous and not overlapping; a
    dim of 1 has no stride of its own and gets the one a packed matrix would have."""
    r, c = (cols if rows == 1 else row), (1 if cols == 1 else col)
    if c == 1 and r >= cols:
        return (r, c)
    r, c = (1 if rows == 1 else row), (rows if cols == 1 else col)
    if r == 1 and c >= rows:
        return (r, c)
    return None


class _Epilogue:
    """The elementwise ops after a matmul, as steps, and the places a claim may end."""

    def __init__(self, graph: Graph, m: Matmul, inputs: _Inputs) -> None:
        self.graph = graph
        self.m = m
        self.inputs = inputs
        self.shape = (*m.batch, m.n, m.m)
        self.steps: list[Step] = []
        self.operands: list[Scalar | Layout] = []
        self.values: dict[int, int] = {id(m.output): 0}
        """Absorbed nodes: the value each one is."""
        self.cuts: list[tuple[Node, int, int, int]] = [(m.output, 0, 0, len(inputs.nodes))]
        """Where a claim may end: its output, and how many steps, operands and inputs."""

    def grow(self) -> None:
        order = self.graph.order
        below = {id(self.m.output)}  # the nodes that read the product, absorbed or not
        start = next(i for i, n in enumerate(order) if n is self.m.output)
        for node in order[start + 1 :]:
            if not any(id(s) in below for s in node.srcs):
                continue
            below.add(id(node))
            problem = self._absorb(node) if len(self.steps) < MAX_STEPS else "too long"
            if problem:
                log.debug("epilogue of matmul %s ends before %s: %s", self.shape, node, problem)
                return
            if node.dtype.is_float and self._closed(node):
                cut = (node, len(self.steps), len(self.operands), len(self.inputs.nodes))
                self.cuts.append(cut)

    def _closed(self, last: Node) -> bool:
        """Whether the absorbed nodes up to ``last`` are read by nothing outside them."""
        targets = {id(t) for t in self.graph.targets}
        for node_id in self.values:
            if node_id == id(last):
                continue
            if node_id in targets:
                return False
            if any(id(c) not in self.values for c in self.graph.consumers[node_id]):
                return False
        return True

    def _absorb(self, node: Node) -> str:
        """Translate ``node`` into steps; why not, where it cannot be."""
        if node.device is not self.m.output.device:
            return "it is on another device"
        if node.op in (Op.VIEW, Op.RESHAPE) and self._same_elements(node):
            self.values[id(node)] = self.values[id(node.srcs[0])]
            return ""
        if node.shape != self.shape:
            return f"it is {node.shape}, not the product's {self.shape}"
        handler = self._HANDLERS.get(node.op)
        if handler is None:
            return f"cuDNN's epilogue has no {node.op.value} op"
        return handler(self, node)

    def _same_elements(self, node: Node) -> bool:
        """A reshape or view of the product that only drops its reduced dim of 1."""
        if node.shape != self.shape:
            return False
        if node.op is Op.RESHAPE:
            return True
        view = strided(node)
        return not node.arg.masked and view.offset == 0 and view.strides == _packed(self.shape)

    def _cast(self, node: Node) -> str:
        (src,) = node.srcs
        if not (node.dtype.is_float and src.dtype.is_float):
            return f"a cast from {src.dtype.value} to {node.dtype.value}"
        self.values[id(node)] = self.values[id(src)]  # in f32 throughout
        return ""

    def _unary(self, node: Node) -> str:
        op = UNARY.get(node.arg)
        if op is None:
            return f"cuDNN has no pointwise {node.arg.value}"
        return self._step(node, op, node.srcs)

    def _binary(self, node: Node) -> str:
        op = BINARY.get(node.arg) or COMPARE.get(node.arg)
        if op is None:
            return f"cuDNN has no pointwise {node.arg.value}"
        x, y = node.srcs
        if id(x) in self.values:
            return self._step(node, op, (x, y))
        if op in MIRRORED:  # cuDNN's pointwise ops take the product's side first
            return self._step(node, MIRRORED[op], (y, x))
        # An operand less or over the product: the product's negation or reciprocal first.
        turned = self._push("neg" if op == "sub" else "reciprocal", (self._value(y),), node.dtype)
        return self._step(node, "add" if op == "sub" else "mul", (turned, x))

    def _where(self, node: Node) -> str:
        cond, x, y = node.srcs
        if _relu(cond, x, y) and id(x) in self.values:
            # cuDNN's relu keeps NaN, as the standard's maximum does: the comparison and
            # the max before it, read by nothing else, are left out of the spec (``_live``).
            return self._step(node, "relu", (x,))
        if _nan_guard(cond, x):
            # where(s != s, s, y) for a number s: y - (NaN if s is NaN else 0), exact.
            guard = self._operand(_scalar(x.srcs[0], self.inputs, nan=True))
            return self._step(node, "sub", (y, guard))
        if id(cond) not in self.values:
            return "its mask is not computed from the product"
        return self._step(node, "binary_select", (x, y, cond))

    _HANDLERS: dict[Op, Callable[[_Epilogue, Node], str]] = {
        Op.CAST: _cast, Op.UNARY: _unary, Op.BINARY: _binary, Op.WHERE: _where,
    }  # fmt: skip

    def _step(self, node: Node, op: str, srcs: tuple[Node | Ref, ...]) -> str:
        """The step ``op`` of ``srcs`` (nodes, or arguments already made) computing ``node``."""
        args: list[Ref] = []
        for src in srcs:
            ref = src if isinstance(src, tuple) else self._arg(src)
            if isinstance(ref, str):
                return ref
            args.append(ref)
        self.values[id(node)] = self._push(op, tuple(args), node.dtype)[1]
        return ""

    def _push(self, op: str, args: tuple[Ref, ...], dtype: DType) -> Ref:
        self.steps.append(Step(op, args, dtype))
        return ("value", len(self.steps))

    def _value(self, node: Node) -> Ref:
        return ("value", self.values[id(node)])

    def _arg(self, src: Node) -> Ref | str:
        """``src`` as a step's argument: a value, or a new operand; or why not."""
        found = self.values.get(id(src))
        if found is not None:
            return ("value", found)
        if src.op is Op.VIEW and src.srcs[0].op in SCALARS and not src.srcs[0].realized:
            return self._operand(_scalar(src.srcs[0], self.inputs, nan=False))
        read = strided(src) if src.op is Op.VIEW else Operand(src, 0, _packed(src.shape))
        if src.op is Op.VIEW and src.arg.masked:
            return "an operand is padded (a masked view)"
        layout = _tensor(read, self.shape, self.inputs)
        return layout if isinstance(layout, str) else self._operand(layout)

    def _operand(self, operand: Scalar | Layout) -> Ref:
        self.operands.append(operand)
        return ("operand", len(self.operands) - 1)


def _relu(cond: Node, x: Node, y: Node) -> bool:
    """Whether ``where(cond, x, y)`` is ``where(x != x, x, max(x, 0))``: ``maximum(x, 0)``
    as the front end records it."""
    if cond.op is not Op.BINARY or cond.arg is not BOp.NOTEQ or cond.srcs != (x, x):
        return False
    if y.op is not Op.BINARY or y.arg is not BOp.MAX or not any(s is x for s in y.srcs):
        return False
    zero = y.srcs[1] if y.srcs[0] is x else y.srcs[0]
    return zero.op is Op.VIEW and zero.srcs[0].op is Op.CONST and zero.srcs[0].arg == 0


def _nan_guard(cond: Node, x: Node) -> bool:
    """Whether ``where(cond, x, ...)`` is ``where(s != s, s, ...)`` of a broadcast number
    ``s``: the standard's NaN rule in ``maximum`` and ``minimum``."""
    if cond.op is not Op.BINARY or cond.arg is not BOp.NOTEQ or cond.srcs != (x, x):
        return False
    return x.op is Op.VIEW and x.srcs[0].op in SCALARS and not x.srcs[0].realized


def _scalar(node: Node, inputs: _Inputs, nan: bool) -> Scalar:
    if node.op is Op.CONST:
        return Scalar(node.dtype, value=float(node.arg), nan=nan)
    return Scalar(node.dtype, source=inputs.add(node), nan=nan)


def _tensor(x: Operand, shape: tuple[int, ...], inputs: _Inputs) -> Layout | str:
    """An epilogue operand over the product's ``shape`` (a dim it broadcasts along, of
    stride 0, is a dim of 1 to cuDNN), or why cuDNN cannot read it."""
    merged = _readable(x, shape[:-2])
    if isinstance(merged, str):
        return merged
    count, stride = merged
    row, col = x.strides[-2:]
    dims = (count, shape[-2] if row else 1, shape[-1] if col else 1)
    strides = _filled(dims, (stride, row, col))
    return Layout(dims, strides, x.offset, x.node.dtype, inputs.add(x.node))


def _filled(dims: tuple[int, int, int], strides: tuple[int, int, int]) -> tuple[int, int, int]:
    """``strides`` with each dim of 1 given the extent of the dims inside it (its stride
    addresses nothing; cuDNN wants it as a packed tensor would have it)."""
    out = list(strides)
    extent = 1
    for i in reversed(range(3)):
        if dims[i] == 1:
            out[i] = extent
        extent = max(extent, (dims[i] - 1) * out[i] + extent)
    return (out[0], out[1], out[2])


def _packed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))
