"""Sample kernels written by hand, with their launch arguments: what ``zyx check`` runs.

Each covers a part of the IR a backend must get right:

- ``broadcast``: 2-D elementwise with row and column broadcasting, ``max``, bounds masks;
- ``row_sum``: a reduction into register accumulators (``lanes`` partial sums, so a CPU
  compiler can vectorize it without reassociating float adds);
- ``matmul``: tiles in local memory, barriers inside a loop, sizes that are not multiples
  of the tile;
- ``saxpy``: a Variable-dependent number of groups and a Variable scalar;
- ``tree_sum_f16``: a tree reduction in local memory, f16 in and out;
- ``int_mix``: integer division, remainder and shifts with C's semantics.

The conformance suite and the benchmarks reuse them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zyx.dtypes import DType
from zyx.ir.builder import KernelBuilder, ceil_div
from zyx.ir.ops import Kernel, ParamKind, Storage
from zyx.testing.numerics import poisoned, random

Arguments = Callable[[np.random.Generator], list[Any]]


@dataclass(frozen=True)
class Example:
    """A kernel and a way to make its arguments."""

    name: str
    kernel: Kernel
    arguments: Arguments
    """Fresh launch arguments in param order: random inputs (never zero), poisoned outputs."""
    nbytes: int
    """Bytes the kernel reads and writes at least: its memory traffic, for GB/s."""

    @property
    def outputs(self) -> list[int]:
        """Positions of the params the kernel writes."""
        return [i for i, p in enumerate(self.kernel.params) if p.kind is ParamKind.GLOBAL_MUT]

    @property
    def dtypes(self) -> set[DType]:
        """Every dtype its params use."""
        return {p.dtype for p in self.kernel.params}


def examples() -> list[Example]:
    """The sample kernels at the sizes ``zyx check`` uses."""
    return [
        broadcast(1000, 777),
        row_sum(1024, 1000, lanes=8),
        matmul(100, 72, 90),
        saxpy(1_000_003),
        tree_sum_f16(64),
        int_mix(100_000),
    ]


def broadcast(rows: int, cols: int, local: int = 64) -> Example:
    """``out[r, c] = max(a[r, c] * scale[c] + bias[r], 0)``, all f32, row-major."""
    kb = KernelBuilder("broadcast")
    a, scale, bias = (kb.param(DType.F32) for _ in range(3))
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    c = kb.group(0, -(-cols // local)) * local + kb.local(0, local)
    r = kb.group(1, rows)
    with kb.if_(c < cols):
        i = r * cols + c
        out[i] = kb.maximum(a[i] * scale[c] + bias[r], 0.0)

    def arguments(rng: np.random.Generator) -> list[Any]:
        return [
            random(rng, DType.F32, rows * cols),
            random(rng, DType.F32, cols),
            random(rng, DType.F32, rows),
            poisoned(DType.F32, rows * cols),
        ]

    return Example("broadcast", kb.build(), arguments, 4 * (2 * rows * cols + rows + cols))


def row_sum(rows: int, cols: int, lanes: int = 1, local: int = 64) -> Example:
    """``out[r] = sum(x[r, :])`` in f32, one work-item per row.

    Each work-item keeps ``lanes`` partial sums (``acc[k]`` adds columns ``k, k + lanes,
    ...``) and adds them up at the end.
    """
    kb = KernelBuilder("row_sum")
    x = kb.param(DType.F32)
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    r = kb.group(0, -(-rows // local)) * local + kb.local(0, local)
    with kb.if_(r < rows):
        acc = kb.define(DType.F32, lanes)
        with kb.loop(lanes) as k:
            acc[k] = 0.0
        start = r * cols
        with kb.loop(cols // lanes) as j:
            with kb.loop(lanes) as k:
                acc[k] = acc[k] + x[start + j * lanes + k]
        with kb.loop(cols % lanes) as k:
            acc[k] = acc[k] + x[start + (cols - cols % lanes) + k]
        total = kb.define(DType.F32)
        total[0] = 0.0
        with kb.loop(lanes) as k:
            total[0] = total[0] + acc[k]
        out[r] = total[0]

    def arguments(rng: np.random.Generator) -> list[Any]:
        return [random(rng, DType.F32, rows * cols), poisoned(DType.F32, rows)]

    return Example("row_sum", kb.build(), arguments, 4 * (rows * cols + rows))


def matmul(m: int, n: int, k: int, tile: int = 16) -> Example:
    """``c = a @ b`` in f32 (row-major ``[m, k] @ [k, n]``), ``tile x tile`` tiles of both
    operands staged in local memory; out-of-range tile elements are zero."""
    kb = KernelBuilder("matmul")
    a, b = kb.param(DType.F32), kb.param(DType.F32)
    c = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    tx, ty = kb.local(0, tile), kb.local(1, tile)
    col = kb.group(0, -(-n // tile)) * tile + tx
    row = kb.group(1, -(-m // tile)) * tile + ty
    a_tile = kb.define(DType.F32, tile * tile, Storage.LOCAL)
    b_tile = kb.define(DType.F32, tile * tile, Storage.LOCAL)
    acc = kb.define(DType.F32)
    acc[0] = 0.0
    slot = ty * tile + tx
    with kb.loop(-(-k // tile)) as t:
        a_col, b_row = t * tile + tx, t * tile + ty
        _stage(kb, a_tile, slot, (row < m) & (a_col < k), a, row * k + a_col)
        _stage(kb, b_tile, slot, (b_row < k) & (col < n), b, b_row * n + col)
        kb.barrier()
        with kb.loop(tile) as i:
            acc[0] = acc[0] + a_tile[ty * tile + i] * b_tile[i * tile + tx]
        kb.barrier()
    with kb.if_((row < m) & (col < n)):
        c[row * n + col] = acc[0]

    def arguments(rng: np.random.Generator) -> list[Any]:
        return [
            random(rng, DType.F32, m * k),
            random(rng, DType.F32, k * n),
            poisoned(DType.F32, m * n),
        ]

    return Example("matmul", kb.build(), arguments, 4 * (m * k + k * n + m * n))


def _stage(kb: KernelBuilder, tile: Any, slot: Any, inside: Any, src: Any, index: Any) -> None:
    """``tile[slot] = src[index]`` where ``inside``, else 0."""
    with kb.if_(inside):
        tile[slot] = src[index]
    with kb.if_(~inside):
        tile[slot] = 0.0


def saxpy(n: int, local: int = 256) -> Example:
    """``y = alpha * x + y`` in f32; ``alpha`` and ``n`` are Variables, the groups
    ``ceil(n / local)``."""
    kb = KernelBuilder("saxpy")
    x = kb.param(DType.F32)
    y = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    alpha = kb.variable(DType.F32)
    count = kb.variable(DType.I64)
    i = kb.group(0, ceil_div(count, local)) * local + kb.local(0, local)
    with kb.if_(i < count):
        y[i] = alpha * x[i] + y[i]

    def arguments(rng: np.random.Generator) -> list[Any]:
        return [random(rng, DType.F32, n), random(rng, DType.F32, n), 1.5, n]

    return Example("saxpy", kb.build(), arguments, 12 * n)


def tree_sum_f16(groups: int, local: int = 256) -> Example:
    """``out[g] = sum(x[g * local : (g + 1) * local])``: f16 in and out, summed in f32 by
    halving steps in local memory with a barrier after each."""
    if local & (local - 1):
        raise ValueError(f"local must be a power of two, got {local}")
    kb = KernelBuilder("tree_sum_f16")
    x = kb.param(DType.F16)
    out = kb.param(DType.F16, ParamKind.GLOBAL_MUT)
    g, item = kb.group(0, groups), kb.local(0, local)
    partial = kb.define(DType.F32, local, Storage.LOCAL)
    partial[item] = x[g * local + item].cast(DType.F32)
    kb.barrier()
    with kb.loop(local.bit_length() - 1) as step:
        half = kb.const(local // 2, DType.I64) >> step
        with kb.if_(item < half):
            partial[item] = partial[item] + partial[item + half]
        kb.barrier()
    with kb.if_(item.eq(0)):
        out[g] = partial[0].cast(DType.F16)

    def arguments(rng: np.random.Generator) -> list[Any]:
        return [random(rng, DType.F16, groups * local, -1.0, 1.0), poisoned(DType.F16, groups)]

    return Example("tree_sum_f16", kb.build(), arguments, 2 * (groups * local + groups))


def int_mix(n: int, local: int = 64) -> Example:
    """``out = a / b + a % b + (a >> 3) ^ (b << 2)`` in i32 (C's truncating division);
    ``|a|, |b| < 2^20`` keeps every term in range."""
    kb = KernelBuilder("int_mix")
    a, b = kb.param(DType.I32), kb.param(DType.I32)
    out = kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    i = kb.group(0, -(-n // local)) * local + kb.local(0, local)
    with kb.if_(i < n):
        x, y = a[i], b[i]
        out[i] = x / y + x % y + ((x >> 3) ^ (y << 2))

    def arguments(rng: np.random.Generator) -> list[Any]:
        return [
            random(rng, DType.I32, n, -(2**20), 2**20),
            random(rng, DType.I32, n, -(2**10), 2**10),
            poisoned(DType.I32, n),
        ]

    return Example("int_mix", kb.build(), arguments, 12 * n)
