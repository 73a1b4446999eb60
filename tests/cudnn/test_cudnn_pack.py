"""A launch's variant pack, without cuDNN: what ``plans.Runner`` hands the backend graph's
raw-pointer execute for the arguments zyx-cuda passes a library program (pointers of its
buffer params, then its scalars, in param order, as ``plans._params`` declares them).

The backend graph and the frontend module are stand-ins that record the call (the GPU tests
run the real ones); the specs are the matcher's own.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.graph.schedule import Graph
from zyx.ir.ops import ParamKind
from zyx_cudnn.graphs import OPERANDS, OUT, A, B
from zyx_cudnn.match import candidates
from zyx_cudnn.plans import Runner, _params
from zyx_cudnn.spec import Scalar, Spec

pytestmark = pytest.mark.cudnn


class Backend:
    """Records each raw-pointer execute: the pack's entries, numbers read through it."""

    def __init__(self, spec: Spec, order: list[int]) -> None:
        self.spec, self.order = spec, order
        self.calls: list[Any] = []

    def _execute_with_raw_ptrs(
        self, address: int, count: int, ws: int, handle: int, index: int
    ) -> None:
        pack = list((ctypes.c_uint64 * count).from_address(address))
        numbers = {
            uid: ctypes.c_float.from_address(pack[i]).value
            for i, uid in enumerate(self.order)
            if uid >= OPERANDS and isinstance(self.spec.operands[uid - OPERANDS], Scalar)
        }
        self.calls.append((dict(zip(self.order, pack, strict=True)), numbers, ws, handle, index))


class Frontend:
    """``cudnn.set_stream`` as the frontend has it, counted."""

    def __init__(self) -> None:
        self.set: list[int] = []

    def set_stream(self, handle: Any, stream: int) -> None:
        handle.stream = stream
        self.set.append(stream)


class Handle:
    backend_handle = 77
    stream = 0


def bf16(shape: tuple[int, ...]) -> zyx.Tensor:
    return zyx.asarray(np.ones(shape), dtype=zyx.bfloat16, device="host")


def test_pointers_offsets_numbers_and_the_stream() -> None:
    x, y, bias = bf16((64, 40)), bf16((32, 16)), bf16((16,))
    result = zyx.maximum(x[:, 8:40] @ y + bias, 0.5) * 2.5
    (options,) = candidates(Graph([result.node]), zyx.device("host"))
    spec = options[0].spec
    params, args = _params(spec, workspace=True)
    kinds = [p.kind for p in params]
    # inputs x, y, bias, 0.5, 2.5; then the output and the workspace
    assert args == (("src", 0), ("src", 1), ("src", 2), ("src", 3), ("src", 4), ("out", 0),
                    ("scratch", 0))  # fmt: skip
    assert kinds == [ParamKind.GLOBAL] * 3 + [ParamKind.VARIABLE] * 2 + [ParamKind.GLOBAL_MUT] * 2
    order = sorted([A, B, OUT, *(OPERANDS + j for j in range(len(spec.operands)))])
    backend, frontend = Backend(spec, order), Frontend()
    run = Runner(frontend, backend, 5, Handle(), spec, order, workspace=True)
    # zyx-cuda's call: the buffer params' pointers in param order, then the scalars
    run(1234, [1000, 2000, 3000, 4000, 5000], [0.5, 2.5])
    run(1234, [1100, 2000, 3000, 4100, 5000], [math.nan, 2.5])
    run(99, [1100, 2000, 3000, 4100, 5000], [math.nan, 2.5])
    (p1, n1, ws, handle, index), (p2, n2, *_), _ = backend.calls
    assert (ws, handle, index) == (5000, 77, 5)
    assert p1[A] == 1000 + 8 * 2 and p1[B] == 2000 and p1[OUT] == 4000  # x read 8 bf16 in
    assert p1[OPERANDS] == 3000  # the bias
    assert (p2[A], p2[OUT]) == (1100 + 16, 4100)  # rewritten in place, launch by launch
    scale = OPERANDS + len(spec.operands) - 1
    assert n1 == {OPERANDS + 1: 0.5, OPERANDS + 2: 0.0, scale: 2.5}  # max's, the guard's
    assert math.isnan(n2[OPERANDS + 1]) and math.isnan(n2[OPERANDS + 2]) and n2[scale] == 2.5
    assert frontend.set == [1234, 99]  # set once per change of stream, not per launch


def test_numbers_are_rounded_to_their_dtype() -> None:
    x, y = bf16((16, 16)), bf16((16, 16))
    (options,) = candidates(Graph([((x @ y) * (1 + 2**-12)).node]), zyx.device("host"))
    spec = options[0].spec
    order = sorted([A, B, OUT, OPERANDS])
    backend = Backend(spec, order)
    run = Runner(Frontend(), backend, 0, Handle(), spec, order, workspace=False)
    run(0, [1, 2, 3], [1 + 2**-12])
    (_, numbers, ws, *_) = backend.calls[0]
    assert numbers == {OPERANDS: 1.0} and ws == 0  # bf16 has 8 bits of mantissa
