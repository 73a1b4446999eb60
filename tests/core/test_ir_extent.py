"""``zyx.ir.extent``: what a kernel's accesses reach, against the interpreter that runs them.

A launch is refused only where the kernel would go out of bounds (the interpreter, which
checks every load and store, says it does), and, for a kernel whose every access is known,
whenever it would. Random ``Variable`` values and buffer sizes around the edges, for
kernels of the forms the analysis follows and of forms it does not.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from zyx.dtypes import DType
from zyx.errors import IRError
from zyx.ir import INDEX, BOp, Kernel, KernelBuilder, ParamKind, ceil_div
from zyx.ir.extent import NEGATIVE, extents, run
from zyx.ir.interpreter import interpret

L = 8


def guarded_copy() -> Kernel:
    """``out[i] = x[i]`` for ``i < n``, two elements a work-item, ``L`` apart."""
    kb = KernelBuilder("guarded_copy")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable(INDEX, "n")
    base = kb.group(0, ceil_div(n, 2 * L)) * (2 * L) + kb.local(0, L)
    with kb.loop(2) as j:
        i = base + j * L
        with kb.if_(i < n):
            out[i] = x[i]
    return kb.build()


def static_grid() -> Kernel:
    """No guard: every one of 3 x ``L`` work-items writes its element."""
    kb = KernelBuilder("static_grid")
    out = kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    i = kb.group(0, 3) * L + kb.local(0, L)
    out[i] = i.cast(DType.I32)
    return kb.build()


def rows() -> Kernel:
    """``out[r] = sum(x[r * k + j] for j < k)`` for rows ``r < m``: a loop of a Variable."""
    kb = KernelBuilder("rows")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    m, k = kb.variable(INDEX, "m"), kb.variable(INDEX, "k")
    r = kb.group(0, ceil_div(m, L)) * L + kb.local(0, L)
    with kb.if_(r < m):
        acc = kb.define(DType.F32)
        acc[0] = 0.0
        with kb.loop(k) as j:
            acc[0] = acc[0] + x[r * k + j]
        out[r] = acc[0]
    return kb.build()


def grid_2d() -> Kernel:
    """``out[y * w + x]`` for ``x < w and y < h`` on a 2-D grid, ``a[x]`` read as a row."""
    kb = KernelBuilder("grid_2d")
    a, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    w, h = kb.variable(INDEX, "w"), kb.variable(INDEX, "h")
    x = kb.group(0, ceil_div(w, 4)) * 4 + kb.local(0, 4)
    y = kb.group(1, ceil_div(h, 2)) * 2 + kb.local(1, 2)
    with kb.if_(kb.binary(BOp.AND, x < w, y < h)):
        out[y * w + x] = a[x]
    return kb.build()


def reversed_offset() -> Kernel:
    """``out[i] = x[n - 1 - i + off]``: a negative ``off`` reaches below 0."""
    kb = KernelBuilder("reversed_offset")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n, off = kb.variable(INDEX, "n"), kb.variable(INDEX, "off")
    i = kb.group(0, ceil_div(n, L)) * L + kb.local(0, L)
    with kb.if_(i < n):
        out[i] = x[n - 1 - i + off]
    return kb.build()


def strided() -> Kernel:
    """``out[i] = x[i * s + o]`` for ``i < n``, ``s`` of either sign (a flip)."""
    kb = KernelBuilder("strided")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n, s, o = kb.variable(INDEX, "n"), kb.variable(INDEX, "s"), kb.variable(DType.I32, "o")
    i = kb.group(0, ceil_div(n, L)) * L + kb.local(0, L)
    with kb.if_(i < n):
        out[i] = x[i * s + o.cast(INDEX)]
    return kb.build()


def clamped_and_halved() -> Kernel:
    """``out[i] = x[min(i, c)] + x[i / 2] + x[i << 1]``, and a store under ``if (n >= 3)``."""
    kb = KernelBuilder("clamped_and_halved")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n, c = kb.variable(INDEX, "n"), kb.variable(INDEX, "c")
    i = kb.group(0, ceil_div(n, L)) * L + kb.local(0, L)
    with kb.if_(i < n):
        out[i] = x[kb.minimum(i, c)] + x[i / 2] + x[i << 1]
        with kb.if_(n >= 3):
            out[i + 1] = x[i]
    return kb.build()


def gather() -> Kernel:
    """``out[i] = x[idx[i]]``: the index of ``x`` is loaded, unknown."""
    kb = KernelBuilder("gather")
    x, idx = kb.param(DType.F32), kb.param(INDEX)
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable(INDEX, "n")
    i = kb.group(0, ceil_div(n, L)) * L + kb.local(0, L)
    with kb.if_(i < n):
        out[i] = x[idx[i]]
    return kb.build()


def gapped_guard() -> Kernel:
    """Work-items ``L`` apart in groups of ``4 * L`` (a gap): the guard is not followed."""
    kb = KernelBuilder("gapped_guard")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable(INDEX, "n")
    i = kb.group(0, ceil_div(n, 4 * L)) * (4 * L) + kb.local(0, L)
    with kb.if_(i < n):
        out[i] = 1.0
    return kb.build()


def transposed() -> Kernel:
    """``out[i] = x[i % r * c + i / r]``: the range is used twice, not followed."""
    kb = KernelBuilder("transposed")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n, r, c = (kb.variable(INDEX, name) for name in "nrc")
    i = kb.group(0, ceil_div(n, L)) * L + kb.local(0, L)
    with kb.if_(i < n):
        out[i] = x[i % r * c + i / r]
    return kb.build()


KERNELS: dict[str, tuple[Callable[[], Kernel], Callable[[random.Random], list[int]], bool]] = {
    # name: (kernel, its Variables drawn, whether every access is known)
    "guarded_copy": (guarded_copy, lambda g: [g.randrange(0, 70)], True),
    "static_grid": (static_grid, lambda g: [], True),
    "rows": (rows, lambda g: [g.randrange(0, 20), g.randrange(-1, 6)], True),
    "grid_2d": (grid_2d, lambda g: [g.randrange(0, 12), g.randrange(0, 7)], True),
    "reversed_offset": (reversed_offset, lambda g: [g.randrange(0, 30), g.randrange(-3, 4)], True),
    "strided": (
        strided,
        lambda g: [g.randrange(0, 20), g.randrange(-3, 4), g.randrange(-5, 60)],
        True,
    ),
    "clamped_and_halved": (
        clamped_and_halved,
        lambda g: [g.randrange(0, 30), g.randrange(-2, 40)],
        True,
    ),
    "gather": (gather, lambda g: [g.randrange(0, 30)], False),
    "gapped_guard": (gapped_guard, lambda g: [g.randrange(0, 70)], False),
    "transposed": (
        transposed,
        lambda g: [g.randrange(0, 30), g.randrange(1, 6), g.randrange(1, 6)],
        False,
    ),
}


def arguments(
    kernel: Kernel, variables: list[int], g: random.Random, lengths: list[int]
) -> list[Any]:
    """Arrays of ``lengths`` at the buffer params (an index buffer of valid indices into
    the first param), ``variables`` at the Variables, in param order."""
    args: list[Any] = []
    values = iter(variables)
    buffers = iter(lengths)
    for p in kernel.params:
        if p.kind is ParamKind.VARIABLE:
            args.append(next(values))
        else:
            length = next(buffers)
            if p.dtype is INDEX:
                args.append(np.array([g.randrange(0, 3) for _ in range(length)], np.int64))
            else:
                args.append(np.zeros(length, p.dtype.numpy))
    return args


def out_of_bounds(kernel: Kernel, args: list[Any]) -> bool:
    try:
        interpret(kernel, args)
    except IRError as error:
        assert "out of bounds" in str(error), error
        return True
    return False


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_refused_exactly_where_the_kernel_goes_out_of_bounds(name: str) -> None:
    make, draw, all_known = KERNELS[name]
    kernel = make()
    ext = extents(kernel)
    assert (not ext.unchecked) == all_known, ext.unchecked
    buffers = [i for i, p in enumerate(kernel.params) if p.kind is not ParamKind.VARIABLE]
    g = random.Random(name)
    refusals = oob = 0
    for _ in range(300):
        variables = draw(g)
        probe = arguments(kernel, variables, g, [0] * len(buffers))
        needs = ext.needs_of(probe)
        lengths = []
        for i in buffers:
            need = needs[i] // kernel.params[i].dtype.itemsize
            if needs[i] == NEGATIVE:
                need = 1
            lengths.append(
                max(0, need + g.choice([-2, -1, 0, 0, 0, 1])) if need else g.randrange(0, 70)
            )
        args = arguments(kernel, variables, g, lengths)
        refused = any(args[i].nbytes < needs[i] for i in buffers)
        bad = out_of_bounds(kernel, args)
        refusals += refused
        oob += bad
        # Never a refusal of a launch that stays in bounds; for a kernel whose accesses are
        # all known, never a launch that goes out of bounds unrefused.
        assert bad or not refused, (variables, lengths, needs)
        if all_known:
            assert refused == bad, (variables, lengths, needs)
    assert refusals > 10 if all_known else True
    assert oob > 10 or name == "static_grid" and oob > 0


def test_the_needs_come_from_the_instructions_alone() -> None:
    """``needs_of`` is ``run`` of ``code`` (what tracker.c evaluates), remembered."""
    ext = extents(rows())
    assert ext.variables == (2, 3)
    for m, k in [(5, 3), (0, 3), (5, 0), (5, 3), (17, 4)]:
        r = run(ext.code, [None, None, m, k])
        want = tuple(0 if n < 0 else r[n] for n in ext.needs)
        assert ext.needs_of([None, None, m, k]) == want
    assert ext.needs_of([None, None, 5, 3]) == (4 * 15, 4 * 5, 0, 0)
    assert ext.needs_of([None, None, 0, 3]) == (0, 0, 0, 0)  # no work-group
    assert ext.needs_of([None, None, 5, 0]) == (0, 20, 0, 0)  # the loop runs no trip


def test_a_static_kernel_needs_no_evaluation_per_launch() -> None:
    ext = extents(static_grid())
    assert ext.static == (4 * 3 * L,)
    assert ext.variables == ()


def test_unknown_accesses_say_why() -> None:
    reasons = {a.param: a.reason for a in extents(gather()).accesses}
    assert "loads" in reasons[0], reasons
    assert reasons[1] == "" and reasons[2] == ""
    (gapped,) = extents(gapped_guard()).unchecked
    assert "If" in gapped.reason
