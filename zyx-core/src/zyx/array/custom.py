"""What the namespace's custom ops share: hand-written kernels (``zyx.graph.nodes.Custom``)
for the functions no fused kernel computes (scans, sorting, searching, compaction).

Each kernel is built once per dtype and work-group size (``functools.cache`` on its
builder) and is shape-generic: sizes reach it as ``Variable`` params, so the compile cache
serves every shape. Values are ordered as ``sort`` orders them: numbers by value, and NaN
after every number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zyx.dtypes import DType
from zyx.ir.builder import KernelBuilder, Value, ceil_div
from zyx.ir.ops import BOp

if TYPE_CHECKING:
    from zyx.backend import Device


def group_size(device: Device) -> int:
    """Work-items per group of a custom kernel: a power of two, the runtime's choice for
    generated kernels (256, or less where the device allows less)."""
    from zyx.runtime import local_size

    return local_size(device)


def flat_item(kb: KernelBuilder, count: Value, local: int) -> Value:
    """The work-item's flat index, over ``ceil(count / local)`` groups of ``local``
    (``count`` a Variable); indices past ``count`` are the caller's to skip."""
    return kb.group(0, ceil_div(count, local)) * local + kb.local(0, local)


def is_nan(kb: KernelBuilder, v: Value) -> Value:
    return v.ne(v) if v.dtype.is_float else kb.const(False, DType.BOOL)


def both(kb: KernelBuilder, a: Value, b: Value) -> Value:
    return kb.binary(BOp.AND, a, b)


def either(kb: KernelBuilder, a: Value, b: Value) -> Value:
    return kb.binary(BOp.OR, a, b)


def before(kb: KernelBuilder, a: Value, b: Value, descending: Value | None = None) -> Value:
    """Whether ``a`` sorts strictly before ``b``: by value (larger first where
    ``descending``, a bool Variable), and NaN after every number in either order."""
    less = a < b if descending is None else kb.where(descending, b < a, a < b)
    if not a.dtype.is_float:
        return less
    return either(kb, less, both(kb, is_nan(kb, b), ~is_nan(kb, a)))
