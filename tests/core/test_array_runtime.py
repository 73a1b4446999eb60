"""The front end's runtime (``zyx.runtime``, ``zyx.allocator``): plans reused, kernels
compiled once across shapes, buffers cached and given back, and several threads at once;
counted through ``zyx.stats()`` and the pool. Views that cost no copy are tested in
test_array_manipulation.py (a chain of every kind of view read by one kernel); a graph
over two devices, and threads on PoCL, in tests/opencl/test_opencl_array_runtime.py.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from array_support import exact_pool, settled

import zyx
from zyx.allocator import allocator
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.tensor import Tensor
from zyx.testing import array_stress
from zyx.testing.numerics import assert_close

Array = np.ndarray[Any, Any]


class Calls:
    """Counts the calls of one method of an object (through monkeypatch)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
        self.count = 0
        method = getattr(owner, name)

        def counted(*args: Any) -> Any:
            self.count += 1
            return method(*args)

        monkeypatch.setattr(owner, name, counted)


# ---- the same computation again: no scheduling, no compiling -----------------------------


def _program(x: Tensor, w: Tensor, c: float) -> tuple[Tensor, Tensor]:
    """A softmax over rows, a reduction of it against a reversed view of ``w``, and a
    second target sharing the softmax: several kernels in one plan."""
    m = zyx.max(x, axis=1, keepdims=True)
    e = zyx.exp(x - m)
    soft = e / zyx.sum(e, axis=1, keepdims=True)
    return zyx.sum(soft * w[::-1, :] + c, axis=0), zyx.matrix_transpose(soft)[::2] * c


def _program_ref(x: Array, w: Array, c: float) -> tuple[Array, Array]:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    soft = e / e.sum(axis=1, keepdims=True)
    return (soft * w[::-1, :] + c).sum(axis=0), soft.T[::2] * c


def test_the_same_computation_again_schedules_and_compiles_nothing(array_device: Device) -> None:
    """A second realize of the same structure (new arrays, new scalars, same shapes) finds
    its plan: it binds the new buffers and launches what the first launched."""
    rng = np.random.default_rng(3)
    runs = []
    for c in (0.5, -2.0, 3.0):
        x, w = (rng.standard_normal((13, 9)).astype(np.float32) for _ in range(2))
        before = zyx.stats()
        a, b = _program(zyx.asarray(x, device=array_device), zyx.asarray(w, device=array_device), c)
        zyx.realize(a, b)
        runs.append(zyx.stats() - before)
        want_a, want_b = _program_ref(x.astype(np.float64), w.astype(np.float64), c)
        assert_close(a.numpy(), want_a, DType.F32, "sum")
        assert_close(b.numpy(), want_b, DType.F32, "transposed")
    first = runs[0]
    assert first.realizes == 1 and first.launches >= 2, first
    for again in runs[1:]:
        assert (again.realizes, again.plans_reused, again.plans_built) == (1, 1, 0), again
        assert (again.kernels_scheduled, again.kernels_compiled) == (0, 0), again
        assert (again.launches, again.copies) == (first.launches, 0), again


def test_the_plan_cache_drops_the_least_recently_used_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Full, the cache drops the plan run longest ago, never the one just built; a plan run
    again is recent again."""
    from zyx import runtime

    monkeypatch.setattr(runtime, "PLAN_CACHE_SIZE", 2)
    monkeypatch.setattr(runtime.runtime, "plans", {})
    x = zyx.asarray(np.arange(6, dtype=np.float32), device="host")

    def built(fn: Callable[[], Tensor]) -> int:
        before = zyx.stats()
        zyx.realize(fn())
        return (zyx.stats() - before).plans_built

    def add() -> Tensor:
        return x + x

    def mul() -> Tensor:
        return x * x

    def sub() -> Tensor:
        return x - x

    assert [built(add), built(mul), built(add), built(sub)] == [1, 1, 0, 1]
    assert [built(add), built(sub), built(mul)] == [0, 0, 1]  # mul was the oldest


# ---- many shapes, each kernel compiled once -------------------------------------------------


def _chain(x: Tensor) -> Tensor:
    return zyx.tanh(x * 0.5 + 1.0) - zyx.abs(x)


def _chain_ref(x: Array) -> Array:
    return np.tanh(x * 0.5 + 1.0) - np.abs(x)


def _softmax(x: Tensor) -> Tensor:
    e = zyx.exp(x - zyx.max(x, axis=-1, keepdims=True))
    return e / zyx.sum(e, axis=-1, keepdims=True)


def _softmax_ref(x: Array) -> Array:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


PROGRAMS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[Array], Array]]] = {
    "elementwise chain": (_chain, _chain_ref),
    "sum over axis 1": (lambda x: zyx.sum(x * x, axis=1), lambda x: (x * x).sum(axis=1)),
    "softmax": (_softmax, _softmax_ref),
}


def _strided(t: Tensor) -> Tensor:
    """Its last two dims transposed, the first of them every other element, the last
    backwards: strides of 2 and -1 and an offset."""
    return zyx.matrix_transpose(t)[..., ::2, ::-1]


def _strided_ref(x: Array) -> Array:
    return np.swapaxes(x, -1, -2)[..., ::2, ::-1]


def _shapes(rng: np.random.Generator, count: int) -> list[tuple[str, tuple[int, ...]]]:
    """``count`` shapes, 2-D and 3-D, contiguous and strided, in random order. Every dim
    the program sees is 2 or more (a dim of 1 is a broadcast: another kernel)."""
    out = []
    for i in range(count):
        layout, ndim = ("contiguous", "strided")[i % 2], 2 + (i // 2) % 2
        shape = [int(n) for n in rng.integers(2, 40, ndim)]
        if layout == "strided":  # the source of _strided's view
            shape[-1] = max(shape[-1], 4)  # every other element: 2 or more
        out.append((layout, tuple(shape)))
    return out


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_hundred_shapes_compile_each_kernel_once(array_device: Device, name: str) -> None:
    """Kernels are shape-generic: across 100 shapes of one computation, each of its
    kernels (one per rank and layout) is compiled at the first shape that needs it, and
    every result matches numpy's in float64."""
    program, reference = PROGRAMS[name]
    rng = np.random.default_rng(11)
    compiled: dict[tuple[str, int], list[int]] = {}
    for layout, shape in _shapes(rng, 100):
        values = rng.standard_normal(shape).astype(np.float32)
        x = zyx.asarray(values, device=array_device)
        ref = values.astype(np.float64)
        if layout == "strided":
            x, ref = _strided(x), _strided_ref(ref)
        before = zyx.stats()
        out = program(x).numpy()
        ran = zyx.stats() - before
        compiled.setdefault((layout, len(shape)), []).append(ran.kernels_compiled)
        assert_close(out, reference(ref), DType.F32, f"{name} of {layout} {shape}")
    assert len(compiled) == 4 and all(len(counts) >= 20 for counts in compiled.values())
    again = {kind: counts for kind, counts in compiled.items() if any(counts[1:])}
    assert not again, f"compiled again at a later shape (per shape, in order): {again}"


def test_a_reversed_dim_of_two_reuses_the_kernel_of_other_sizes(array_device: Device) -> None:
    rng = np.random.default_rng(5)
    counts = []
    for n in (7, 5, 2, 9):
        values = rng.standard_normal((6, n)).astype(np.float32)
        before = zyx.stats()
        out = zyx.atan(zyx.asarray(values, device=array_device)[:, ::-1] * 3.0).numpy()
        counts.append((zyx.stats() - before).kernels_compiled)
        assert_close(out, np.arctan(values.astype(np.float64)[:, ::-1] * 3.0), DType.F32)
    assert counts[1:] == [0, 0, 0], f"kernels compiled per size (7, 5, 2, 9): {counts}"


# ---- memory: the caching allocator -------------------------------------------------------


def _compute(device: Device, values: Array) -> Array:
    """An input, an intermediate read by two reductions, a result: all dropped on return."""
    x = zyx.asarray(values, device=device)
    y = zyx.exp(x) * 2.0
    z = zyx.sum(y, axis=1) + zyx.max(y, axis=1)
    zyx.realize(y, z)
    return z.numpy()


def _compute_ref(values: Array) -> Array:
    y = np.exp(values.astype(np.float64)) * 2.0
    return y.sum(axis=1) + y.max(axis=1)


def test_dropped_arrays_are_cached_reused_and_given_back(
    array_device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What dropped arrays held stays in the allocator's cache (the pool's free bytes less
    exactly the cached bytes); the same sizes again take those buffers (no allocation
    from the pool); ``zyx.empty_cache()`` gives them all back."""
    pool = exact_pool(array_device)
    start = settled(array_device)
    allocations = Calls(monkeypatch, pool, "allocate")
    rng = np.random.default_rng(8)
    values = [rng.standard_normal((37, 21)).astype(np.float32) for _ in range(3)]

    assert_close(_compute(array_device, values[0]), _compute_ref(values[0]), DType.F32)
    gc.collect()
    array_device.synchronize()
    made, cached = allocations.count, allocator.cached_bytes()
    assert made >= 3, "the input, the intermediate and the result"
    assert cached >= 2 * values[0].nbytes, "the input's and the intermediate's buffers"
    assert pool.free_bytes() == start - cached, "every byte not free is in the cache"

    for more in values[1:]:
        assert_close(_compute(array_device, more), _compute_ref(more), DType.F32)
        gc.collect()
        assert allocations.count == made, "the same sizes again came from the pool"
        assert allocator.cached_bytes() == cached

    zyx.empty_cache()
    array_device.synchronize()
    assert allocator.cached_bytes() == 0
    assert pool.free_bytes() == start, "empty_cache gave back what the cache held"


def test_an_array_dying_at_interpreter_exit_raises_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At exit Python sets a module's globals to None before the last arrays die (those a
    stand-in driver's closures held printed "Exception ignored in Node.__del__" twice): a
    realized node dying then leaves its buffer to the process, silently."""
    import zyx.graph.nodes

    x = zyx.asarray(np.arange(4.0), device="host")
    zyx.realize(x)
    raised: list[Any] = []
    monkeypatch.setattr("sys.unraisablehook", raised.append)
    monkeypatch.setattr(zyx.graph.nodes, "allocator", None)
    del x
    gc.collect()
    assert raised == []


def test_a_live_arrays_buffer_is_never_handed_out(array_device: Device) -> None:
    """Buffers of arrays still alive stay theirs while the cache serves other arrays of
    the same size; dropping them later returns the pool to where it was."""
    pool = exact_pool(array_device)
    start = settled(array_device)
    rng = np.random.default_rng(4)
    values = [rng.standard_normal((29, 16)).astype(np.float32) for _ in range(6)]
    kept = []
    for v in values:
        x = zyx.asarray(v, device=array_device)
        kept.append((zyx.exp(x) * 2.0).realize())
        del x  # its buffer (of the same size as every result) goes to the cache
        gc.collect()
    for k, v in zip(kept, values):
        assert_close(k.numpy(), np.exp(v.astype(np.float64)) * 2.0, DType.F32)
    assert pool.free_bytes() < start
    del kept, k
    assert settled(array_device) == start


def test_a_reshaped_result_of_a_plan_step_shares_its_buffer(array_device: Device) -> None:
    """A target that only reshapes (or squeezes) a buffer the plan makes, here a sort's
    output, costs no copy kernel; two such targets of one buffer each own theirs; the pool
    is exact once they are dropped."""
    exact_pool(array_device)
    start = settled(array_device)
    v = np.random.default_rng(12).standard_normal((6, 8)).astype(np.float32)
    x = zyx.asarray(v, device=array_device)
    before = zyx.stats()
    flat = zyx.reshape(zyx.sort(x, axis=1), (48,))
    zyx.realize(flat)
    assert (zyx.stats() - before).kernels_scheduled == 0, "the sort's launches only"
    assert_close(flat.numpy(), np.sort(v, axis=1).reshape(48), DType.F32)
    s = zyx.sort(x, axis=0)
    a, b = zyx.reshape(s, (48,)), zyx.expand_dims(s, axis=0)
    zyx.realize(a, b)
    del s, x
    gc.collect()
    assert_close(b.numpy(), np.sort(v, axis=0)[None], DType.F32)
    del b
    gc.collect()
    assert_close(a.numpy(), np.sort(v, axis=0).reshape(48), DType.F32)
    del a, flat
    assert settled(array_device) == start


# ---- threads ----------------------------------------------------------------------------------


def test_threads_build_and_realize_their_own_programs_and_shared_arrays(
    array_device: Device,
) -> None:
    """Six threads switching every microsecond, each realizing programs of its own and
    reading arrays made before they started (realized, and lazy ones that they realize
    while others build on them): every result right, nothing raised, no thread left
    running after 20 s, and the pool's free bytes exact once the cache is emptied."""
    report = array_stress.run(array_device, threads=6, rounds=60, timeout=20.0)
    assert report.ok, str(report)
    assert sum(report.checked) >= 6 * 60
