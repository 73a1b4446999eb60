"""Views: movement ops as index arithmetic, never a copy.

A ``View`` maps an index of its own shape to an index of its source's shape, one source
dim at a time: ``src[j] = offset + scale * out[dim]`` (a ``Term``; ``dim`` is ``None`` for a
source dim that a broadcast or an integer index pins to a constant). Permute, broadcast,
slices with any step, flip, pad and the reshapes that only add or drop size-1 dims are
each a substitution of one output dim by ``a + b * new_dim``, so any chain of them is
again one ``View``. Pad makes some output indices fall outside the source; those read as
zero, and the view keeps the conditions (``checks``) that say where the source is valid.

A general reshape mixes dims through the flat index and is a separate graph op
(``Op.RESHAPE``); it is free over a contiguous buffer.
"""

from __future__ import annotations

from functools import lru_cache
from math import prod
from typing import NamedTuple

# Named tuples, not dataclasses: every array op makes views, and a frozen dataclass costs
# several times a tuple to build. The view operations are memoized: a program makes the
# same views of the same shapes again each call (a matmul records eight), and a lookup
# costs a fraction of building the terms anew. A View is a value of ints, so the caches
# keep nothing else alive.
_MEMO = 4096

MAX_ELEMENTS = 2**63 - 1
"""The most elements of an array: its kernels index it with 64-bit integers."""


def indexable(shape: tuple[int, ...], what: str = "shape") -> tuple[int, ...]:
    """``shape``, where an array of it can be indexed; else a ``ValueError``. Creation
    checks its shapes; so do the views that can outgrow their sources (a broadcast, a pad:
    ``tile``, ``concat``, outer products) and gathers (integer indexing, ``take``)."""
    if prod(shape) > MAX_ELEMENTS:
        raise ValueError(
            f"{what} {shape} has {prod(shape)} elements, more than an array can hold "
            f"(2**63 - 1: kernels index it with 64-bit integers)"
        )
    return shape


class Term(NamedTuple):
    """``offset + scale * index[dim]``; a constant ``offset`` where ``dim`` is None."""

    dim: int | None
    scale: int = 1
    offset: int = 0

    def substitute(self, dim: int, offset: int, scale: int) -> Term:
        """This term after ``index[dim]`` became ``offset + scale * index[dim]``."""
        if self.dim != dim:
            return self
        new = self.offset + self.scale * offset
        return Term(dim, self.scale * scale, new) if scale else Term(None, 0, new)

    def renumber(self, dims: dict[int, int | None]) -> Term:
        """This term with its dim renamed (``None``: the dim is gone, its index is 0)."""
        if self.dim is None:
            return self
        new = dims[self.dim]
        return Term(None, 0, self.offset) if new is None else Term(new, self.scale, self.offset)

    def bounds(self, shape: tuple[int, ...]) -> tuple[int, int]:
        """The smallest and largest value over every index of ``shape``."""
        if self.dim is None:
            return self.offset, self.offset
        last = self.offset + self.scale * (shape[self.dim] - 1)
        return min(self.offset, last), max(self.offset, last)


class View(NamedTuple):
    """An index map from ``shape`` to a source of shape ``source``."""

    shape: tuple[int, ...]
    source: tuple[int, ...]
    terms: tuple[Term, ...]
    """One per source dim."""
    checks: tuple[tuple[Term, int], ...] = ()
    """``0 <= term < bound`` for every valid index; elsewhere the view reads zero."""

    @staticmethod
    @lru_cache(maxsize=_MEMO)
    def identity(shape: tuple[int, ...]) -> View:
        return View(shape, shape, tuple(Term(d) for d in range(len(shape))))

    @property
    def is_identity(self) -> bool:
        return (
            self.shape == self.source
            and not self.checks
            and all(t == Term(d) for d, t in enumerate(self.terms))
        )

    @property
    def masked(self) -> bool:
        return bool(self.checks)

    @lru_cache(maxsize=_MEMO)  # noqa: B019 (views are values)
    def _substitute(self, dim: int, offset: int, scale: int, size: int) -> View:
        shape = self.shape[:dim] + (size,) + self.shape[dim + 1 :]
        terms = tuple(t.substitute(dim, offset, scale) for t in self.terms)
        checks = tuple((t.substitute(dim, offset, scale), b) for t, b in self.checks)
        return View(shape, self.source, terms, checks)._pruned()

    def _pruned(self) -> View:
        """Drop the checks that hold for every index (a pad sliced away again)."""
        if any(self.shape) and self.checks:
            kept = tuple(
                (t, b)
                for t, b in self.checks
                if not (0 <= t.bounds(self.shape)[0] and t.bounds(self.shape)[1] < b)
            )
            return self._replace(checks=kept)
        return self

    @lru_cache(maxsize=_MEMO)  # noqa: B019 (views are values)
    def permute(self, order: tuple[int, ...]) -> View:
        inverse = {old: new for new, old in enumerate(order)}
        shape = tuple(self.shape[o] for o in order)
        terms = tuple(t.renumber(inverse) for t in self.terms)  # type: ignore[arg-type]
        checks = tuple((t.renumber(inverse), b) for t, b in self.checks)  # type: ignore[arg-type]
        return View(shape, self.source, terms, checks)

    @lru_cache(maxsize=_MEMO)  # noqa: B019 (views are values)
    def expand(self, shape: tuple[int, ...]) -> View:
        """Broadcast size-1 dims to ``shape`` (same rank)."""
        indexable(shape)
        view = self
        for d, (old, new) in enumerate(zip(self.shape, shape)):
            if old != new:
                view = view._substitute(d, 0, 0, new)
        return view

    def slice(self, dim: int, start: int, step: int, size: int) -> View:
        """Index ``i`` of ``dim`` becomes ``start + step * i``, for ``size`` indices."""
        return self._substitute(dim, start, step, size)

    def flip(self, dim: int) -> View:
        return self._substitute(dim, self.shape[dim] - 1, -1, self.shape[dim])

    def pad(self, dim: int, before: int, after: int) -> View:
        size = self.shape[dim]
        indexable(self.shape[:dim] + (size + before + after,) + self.shape[dim + 1 :])
        view = self._substitute(dim, -before, 1, size + before + after)
        return view._replace(checks=view.checks + ((Term(dim, 1, -before), size),))._pruned()

    @lru_cache(maxsize=_MEMO)  # noqa: B019 (views are values)
    def squeeze_to(self, shape: tuple[int, ...]) -> View | None:
        """This view reshaped to ``shape`` where that only adds or removes size-1 dims;
        ``None`` where the reshape mixes dims."""
        old = [d for d, n in enumerate(self.shape) if n != 1]
        new = [d for d, n in enumerate(shape) if n != 1]
        if [self.shape[d] for d in old] != [shape[d] for d in new]:
            return None
        dims: dict[int, int | None] = {d: None for d in range(len(self.shape))}
        dims.update(zip(old, new))
        terms = tuple(t.renumber(dims) for t in self.terms)
        checks = tuple((t.renumber(dims), b) for t, b in self.checks)
        return View(shape, self.source, terms, checks)._pruned()

    @lru_cache(maxsize=_MEMO)  # noqa: B019 (views are values)
    def after(self, inner: View) -> View:
        """This view applied on top of ``inner`` (whose shape is this view's source)."""
        terms = tuple(_compose(t, self) for t in inner.terms)
        checks = self.checks + tuple((_compose(t, self), b) for t, b in inner.checks)
        return View(self.shape, inner.source, terms, checks)._pruned()

    def expanded_dims(self) -> tuple[int, ...]:
        """Output dims no source dim depends on (broadcast, or size 1)."""
        used = {t.dim for t in self.terms}
        return tuple(d for d in range(len(self.shape)) if d not in used)

    def is_expand_of(self, axes: tuple[int, ...]) -> bool:
        """Whether this view broadcasts exactly ``axes`` of a same-rank source whose size
        along them is 1, and is the identity on every other dim."""
        if len(self.source) != len(self.shape) or self.checks:
            return False
        for d, t in enumerate(self.terms):
            want = Term(None, 0, 0) if d in axes else Term(d)
            if t != want and not (d in axes and self.shape[d] == 1 and t == Term(d)):
                return False
        return all(self.source[d] == 1 for d in axes)

    def numel(self) -> int:
        return prod(self.shape)


def _compose(term: Term, outer: View) -> Term:
    """``term`` (over ``outer``'s source index) as a term over ``outer``'s index."""
    if term.dim is None:
        return term
    inner = outer.terms[term.dim]
    if inner.dim is None:
        return Term(None, 0, term.offset + term.scale * inner.offset)
    return Term(inner.dim, term.scale * inner.scale, term.offset + term.scale * inner.offset)


def strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides, in elements."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))
