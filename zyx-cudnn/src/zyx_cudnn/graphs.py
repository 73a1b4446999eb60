"""A ``Spec`` as a cuDNN graph (``cudnn.pygraph``), for its exact shapes, strides and
dtypes, with its candidate plans listed (the heuristics' ``HEURISTICS``), or with the one
plan a tuning cache names (``create_execution_plan`` of its engine id and knobs).

Tensors get fixed uids: the operands of the product 1 and 2, the output 3, the epilogue's
operands ``OPERANDS + j``. The product and every step's value are virtual f32 tensors (a
comparison's bool), so the epilogue computes in f32 and rounds once, into the output.
Numbers are pass-by-value tensors of dims (1, 1, 1): their variant-pack entries are host
addresses holding an f32 (``zyx_cudnn.plans``).

f32 is built only with ``tf32`` (``cudnn.allow_tf32``): on the H200 (cuDNN 9.19, 2026-12-03)
every f32 plan, those without the TENSOR_CORE and DOWN_CONVERT_INPUTS numerical notes too,
gave TF32's error (3e-4 of the norm against float64, for 1e-5 the true-fp32 bound), so
there is no plan zyx-cudnn can tell is true fp32, and it claims none (the generated kernels
run f32). f16/bf16 keep only plans without REDUCED_PRECISION_REDUCTION: their products
accumulate in f32.
"""

from __future__ import annotations

from typing import Any

from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx_cudnn.spec import Layout, Spec

A, B, OUT = 1, 2, 3
OPERANDS = 10
"""The uid of the epilogue's operand 0."""

HEURISTICS = ("A", "FALLBACK")
"""The heuristic modes (``cudnn.heur_mode``) whose plans are the candidates, in order."""


class Unsupported(BackendError):
    """cuDNN could not build this spec (its own message; KernelCompilation): the claim is
    not made, or a shorter one is, and the generated kernels run the rest."""

    def __init__(self, context: str) -> None:
        super().__init__(ErrorStatus.KERNEL_COMPILATION, context)


def build(
    cudnn: Any, spec: Spec, handle: Any, replay: tuple[int, dict[Any, int]] | None = None
) -> Any:
    """The graph of ``spec`` on ``handle``'s device with its candidate plans created, not
    built; with ``replay``, an engine id and its knobs, that one plan only. ``Unsupported``
    with cuDNN's message where it cannot run it."""
    if spec.dtype is DType.F32 and not spec.tf32:
        raise Unsupported(
            f"{spec.describe()}: cuDNN's f32 plans compute in TF32 (no plan is known to be true "
            "fp32); set cudnn.allow_tf32 to claim f32 matmuls"
        )
    types = _types(cudnn)
    graph = cudnn.pygraph(
        io_data_type=types[spec.dtype],
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
        handle=handle,
    )
    a, b = _tensor(graph, types, spec.a, A), _tensor(graph, types, spec.b, B)
    operands = [
        _tensor(graph, types, o, OPERANDS + j)
        if isinstance(o, Layout)
        else _number(graph, cudnn, OPERANDS + j)
        for j, o in enumerate(spec.operands)
    ]
    values = [graph.matmul(a, b, compute_data_type=cudnn.data_type.FLOAT)]
    for step in spec.steps:
        args = [values[i] if kind == "value" else operands[i] for kind, i in step.args]
        value = getattr(graph, step.op)(*args, compute_data_type=cudnn.data_type.FLOAT)
        if step.dtype is DType.BOOL:
            value.set_data_type(cudnn.data_type.BOOLEAN)
        values.append(value)
    out = values[-1]
    out.set_output(True).set_uid(OUT).set_data_type(types[spec.out.dtype])
    out.set_dim(list(spec.out.dims)).set_stride(list(spec.out.strides))
    if spec.dtype is not DType.F32:
        graph.deselect_numeric_notes([cudnn.numerical_note.REDUCED_PRECISION_REDUCTION])
    try:
        graph.validate()
        graph.build_operation_graph()
        if replay is None:
            graph.create_execution_plans([getattr(cudnn.heur_mode, m) for m in HEURISTICS])
        else:
            graph.create_execution_plan(*replay)
        graph.check_support()
    except (cudnn.cudnnGraphNotSupportedError, RuntimeError, ValueError) as error:
        raise Unsupported(f"cuDNN cannot run {spec.describe()}: {error}") from error
    return graph


def _types(cudnn: Any) -> dict[DType, Any]:
    t = cudnn.data_type
    return {DType.F16: t.HALF, DType.BF16: t.BFLOAT16, DType.F32: t.FLOAT}


def _tensor(graph: Any, types: dict[DType, Any], layout: Layout, uid: int) -> Any:
    return graph.tensor(
        dim=list(layout.dims), stride=list(layout.strides), data_type=types[layout.dtype],
        uid=uid, name=f"t{uid}",
    )  # fmt: skip


def _number(graph: Any, cudnn: Any, uid: int) -> Any:
    return graph.tensor(
        dim=[1, 1, 1], stride=[1, 1, 1], data_type=cudnn.data_type.FLOAT,
        is_pass_by_value=True, uid=uid, name=f"s{uid}",
    )  # fmt: skip
