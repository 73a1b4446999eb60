"""Lowering the graph to the IR: costs that must stay linear in the graph's size."""

from __future__ import annotations

import numpy as np

import zyx


def test_a_reduction_over_shared_operands_lowers_in_linear_time() -> None:
    # Each doubling reads the one before twice: 64 levels are 2**64 paths, but 65 nodes.
    # Hoisting a reduction's loop-invariant operands walked the paths (it never ended).
    a = zyx.arange(8, device="host")
    for _ in range(64):
        a = a + a
    assert int(a.sum()) == 0  # 28 * 2**64 wraps to 0 in int64
    b = zyx.asarray(np.ones(4, np.float32), device="host")
    for _ in range(40):
        b = (b + b) * 0.5
    assert float(b.sum()) == 4.0
