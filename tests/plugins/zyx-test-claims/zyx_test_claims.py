"""A plugin with no backend that claims every matmul (``zyx_match_graph``) with its own
kernel, as zyx-cudnn claims them with cuDNN's.

``ZYX_TEST_CLAIMS`` picks how: ``tiled`` (default: each work-item computes a 4 x 4 block of
the product, strides baked in: faster than zyx's generated kernel on the host),
``repeated`` (the same kernel launched 16 times: slower), ``raise`` (the hook raises) or
``junk`` (it returns something that is not a claim). ``calls`` records each call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from math import prod
from typing import Any

from zyx.backend import Device
from zyx.graph.claims import Claim, Matmul, Operand, matmuls
from zyx.graph.nodes import CustomLaunch
from zyx.hookspecs import hookimpl
from zyx.ir import Kernel
from zyx.ir.builder import KernelBuilder, Value
from zyx.ir.ops import ParamKind

ZYX_PLUGIN_API = "1.0"

BLOCK = 4
REPEATS = 16

calls: list[tuple[int, str]] = []
"""(number of nodes in the graph, device name) per call."""


@hookimpl
def zyx_match_graph(graph: Any, device: Device) -> Sequence[Any] | None:
    calls.append((len(graph.order), device.name))
    mode = os.environ.get("ZYX_TEST_CLAIMS", "tiled")
    if mode == "raise":
        raise RuntimeError("the test plugin's hook failed")
    if mode == "junk":
        return ["not a claim"]
    found = [m for m in matmuls(graph) if m.output.device is device]
    return [_claim(m, REPEATS if mode == "repeated" else 1) for m in found]


def _claim(m: Matmul, repeats: int) -> Claim:
    launch = CustomLaunch(_kernel(m), (("src", 0), ("src", 1), ("out", 0)))
    key = ("matmul", m.batch, m.n, m.m, m.k, m.a.offset, m.a.strides, m.b.offset, m.b.strides,
           m.output.dtype, repeats)  # fmt: skip
    return Claim(m.output, (m.a.node, m.b.node), key, lambda device: [launch] * repeats)


def _kernel(m: Matmul) -> Kernel:
    """One work-item per ``BLOCK`` x ``BLOCK`` block of each batch's product (the batch
    dims flattened into the group count)."""
    kb = KernelBuilder(f"test_claims_matmul_{m.n}x{m.m}x{m.k}")
    dtype = m.output.dtype
    a, b = kb.param(m.a.node.dtype), kb.param(m.b.node.dtype)
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    row_blocks, col_blocks = -(-m.n // BLOCK), -(-m.m // BLOCK)
    item = kb.group(0, prod(m.batch) * row_blocks * col_blocks)
    batch, block = item / (row_blocks * col_blocks), item % (row_blocks * col_blocks)
    i0, j0 = block / col_blocks * BLOCK, block % col_blocks * BLOCK
    a_base = _batch_offset(kb, m.a, m.batch, batch)
    b_base = _batch_offset(kb, m.b, m.batch, batch)
    acc = kb.define(dtype, BLOCK * BLOCK)
    for r in range(BLOCK * BLOCK):
        acc[r] = kb.const(0, dtype)
    with kb.loop(m.k) as t:
        for r in range(BLOCK):
            i = kb.minimum(i0 + r, m.n - 1)  # clamped: the store below skips the edge
            x = a[a_base + i * m.a.strides[-2] + t * m.a.strides[-1]]
            for c in range(BLOCK):
                j = kb.minimum(j0 + c, m.m - 1)
                y = b[b_base + t * m.b.strides[-2] + j * m.b.strides[-1]]
                acc[r * BLOCK + c] = acc[r * BLOCK + c] + x * y
    for r in range(BLOCK):
        for c in range(BLOCK):
            with kb.if_((i0 + r < m.n) & (j0 + c < m.m)):
                out[batch * (m.n * m.m) + (i0 + r) * m.m + j0 + c] = acc[r * BLOCK + c]
    return kb.build()


def _batch_offset(kb: KernelBuilder, x: Operand, batch: tuple[int, ...], flat: Value) -> Value:
    offset = flat * 0 + x.offset
    rest = flat
    for size, stride in zip(reversed(batch), reversed(x.strides[:-2]), strict=True):
        offset = offset + rest % size * stride
        rest = rest / size
    return offset
