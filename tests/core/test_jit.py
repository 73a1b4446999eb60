"""``zyx.jit``: a replay computes what the eager run does (against numpy in float64, on
random data, new data at every call), and does no scheduling, compiling or plan building;
signatures, the cache's bound, bad arguments, results never overwritten, memory given
back, functions that cannot be replayed, and threads. On every installed device."""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from array_support import settled

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.tensor import Tensor
from zyx.testing.numerics import assert_close

Array = np.ndarray[Any, Any]


def _chain(x: Tensor) -> Tensor:
    y = x
    for i in range(6):
        y = zyx.tanh(y * 0.75 + 0.1 * i) - zyx.abs(x) * 0.5
    return y


def _chain_ref(x: Array) -> Array:
    y = x
    for i in range(6):
        y = np.tanh(y * 0.75 + 0.1 * i) - np.abs(x) * 0.5
    return y


def _softmax(x: Tensor) -> Tensor:
    e = zyx.exp(x - zyx.max(x, axis=-1, keepdims=True))
    return e / zyx.sum(e, axis=-1, keepdims=True)


def _softmax_ref(x: Array) -> Array:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _mlp(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor) -> Tensor:
    return zyx.matmul(zyx.maximum(zyx.matmul(x, w1) + b1, 0.0), w2)


def _mlp_ref(x: Array, w1: Array, b1: Array, w2: Array) -> Array:
    return np.maximum(x @ w1 + b1, 0.0) @ w2


PROGRAMS: dict[str, tuple[Callable[..., Any], Callable[..., Any], list[tuple[int, ...]]]] = {
    "elementwise chain": (_chain, _chain_ref, [(5, 33)]),
    "sums over each axis": (
        lambda x: (zyx.sum(x * x, axis=0), zyx.sum(x, axis=1), zyx.max(x)),
        lambda x: ((x * x).sum(axis=0), x.sum(axis=1), x.max()),
        [(17, 12)],
    ),
    "softmax": (_softmax, _softmax_ref, [(9, 40)]),
    "2-layer MLP": (_mlp, _mlp_ref, [(8, 16), (16, 32), (32,), (32, 4)]),
}


def _inputs(device: Device, rng: np.random.Generator, shapes: list[tuple[int, ...]]) -> Any:
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    return values, [zyx.asarray(v, device=device) for v in values]


def _check(out: Any, ref: Any, what: str) -> None:
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    assert len(outs) == len(refs), what
    for k, (o, r) in enumerate(zip(outs, refs)):
        assert isinstance(o, Tensor) and o.dtype is DType.F32, f"{what}: result {k}"
        assert_close(o.numpy(), np.asarray(r), DType.F32, f"{what}: result {k}")


@pytest.mark.parametrize("name", PROGRAMS)
def test_replay_equals_eager_and_schedules_nothing(array_device: Device, name: str) -> None:
    """The first call runs eagerly and captures; every later call (new data each time)
    replays: the same launches, and no realize, plan, schedule or compile."""
    fn, ref, shapes = PROGRAMS[name]
    jitted = zyx.jit(fn)
    rng = np.random.default_rng(1)
    runs = []
    for call in range(4):
        values, arrays = _inputs(array_device, rng, shapes)
        before = zyx.stats()
        out = jitted(*arrays)
        runs.append(zyx.stats() - before)
        _check(out, ref(*(v.astype(np.float64) for v in values)), f"{name}, call {call}")
    eager = runs[0]
    assert eager.replays == 0 and eager.launches >= 1, eager
    for again in runs[1:]:
        assert (again.replays, again.launches) == (1, eager.launches), again
        assert (again.realizes, again.plans_built, again.plans_reused) == (0, 0, 0), again
        assert (again.kernels_scheduled, again.kernels_compiled, again.searches) == (0, 0, 0)


def test_the_same_input_again_and_realizes_inside(array_device: Device) -> None:
    """A function that realizes an intermediate itself (two plans, the second reading the
    first's target) replays both; calling again with the very same input array (nothing
    to rebind) gives the same values."""

    def two_plans(x: Tensor) -> Tensor:
        y = (zyx.exp(x) * 2.0).realize()
        return zyx.sum(y * x, axis=1) + y[:, 0]

    jitted = zyx.jit(two_plans)
    values = np.random.default_rng(2).standard_normal((6, 7)).astype(np.float32)
    x = zyx.asarray(values, device=array_device)
    v = values.astype(np.float64)
    want = (np.exp(v) * 2.0 * v).sum(axis=1) + np.exp(v[:, 0]) * 2.0
    for _ in range(3):
        before = zyx.stats()
        assert_close(jitted(x).numpy(), want, DType.F32)
    ran = zyx.stats() - before
    assert (ran.replays, ran.plans_built, ran.realizes) == (1, 0, 0), ran


def test_buffers_between_kernels_are_reused_only_once_dead(array_device: Device) -> None:
    """Intermediates of one size, realized one by one (a kernel each), some read long
    after they were made: a buffer serves a later intermediate only after its last
    reader."""

    def stages(x: Tensor) -> Tensor:
        a = (x * 2.0).realize()
        b = (a + 1.0).realize()
        c = zyx.exp(b).realize()
        d = (c - a).realize()
        e = (d * c).realize()
        return e + b * a

    def stages_ref(x: Array) -> Array:
        a = x * 2.0
        b = a + 1.0
        c = np.exp(b)
        d = c - a
        return d * c + b * a

    jitted = zyx.jit(stages)
    rng = np.random.default_rng(10)
    for call in range(3):
        values = rng.standard_normal(64).astype(np.float32)
        out = jitted(zyx.asarray(values, device=array_device))
        assert_close(out.numpy(), stages_ref(values.astype(np.float64)), DType.F32, str(call))


def test_a_value_no_result_depends_on_is_not_computed_again(array_device: Device) -> None:
    def wasteful(x: Tensor) -> Tensor:
        zyx.cos(x).realize()  # realized, never used
        return zyx.sin(x).realize() * 2.0

    jitted = zyx.jit(wasteful)
    runs = []
    for seed in range(3):
        values = np.random.default_rng(seed).standard_normal(40).astype(np.float32)
        before = zyx.stats()
        out = jitted(zyx.asarray(values, device=array_device))
        runs.append((zyx.stats() - before).launches)
        assert_close(out.numpy(), np.sin(values.astype(np.float64)) * 2.0, DType.F32)
    assert runs == [3, 2, 2], runs


def test_results_of_earlier_calls_are_never_overwritten(array_device: Device) -> None:
    """Results kept across calls keep their values; dropped ones give their buffer back to
    the capture, which writes it again."""
    jitted = zyx.jit(lambda x: (zyx.sin(x) * 3.0, x + 1.0))
    rng = np.random.default_rng(3)
    kept = []
    for _ in range(5):
        values = rng.standard_normal(100).astype(np.float32)
        kept.append((values, jitted(zyx.asarray(values, device=array_device))))
        jitted(zyx.asarray(rng.standard_normal(100).astype(np.float32), device=array_device))
    for values, (a, b) in kept:
        v = values.astype(np.float64)
        assert_close(a.numpy(), np.sin(v) * 3.0, DType.F32, "kept sin")
        assert_close(b.numpy(), v + 1.0, DType.F32, "kept sum")


def test_a_result_fed_back_as_the_next_input(array_device: Device) -> None:
    """``x = step(x)``: each call reads the buffer the last one wrote and writes another;
    an argument changed outside (a lazy array) is realized before the replay."""
    step = zyx.jit(lambda x, b: zyx.tanh(x * 0.9 + b))
    rng = np.random.default_rng(11)
    xv, bv = rng.standard_normal((2, 30)).astype(np.float32)
    x, b = zyx.asarray(xv, device=array_device), zyx.asarray(bv, device=array_device)
    want = xv.astype(np.float64)
    for i in range(6):
        if i == 3:
            x = x + 1.0
            want = want + 1.0
        x = step(x, b)
        want = np.tanh(want * 0.9 + bv)
        assert_close(x.numpy(), want, DType.F32, f"step {i}")
    assert step.cached() == 1


def test_results_that_are_inputs_constants_or_the_same_array(array_device: Device) -> None:
    weights = zyx.asarray(np.arange(4, dtype=np.float32), device=array_device)

    def mixed(x: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        s = x * y
        return x, weights, s, s

    jitted = zyx.jit(mixed)
    for seed in range(3):
        xv, yv = np.random.default_rng(seed).standard_normal((2, 4)).astype(np.float32)
        x, y = zyx.asarray(xv, device=array_device), zyx.asarray(yv, device=array_device)
        a, w, s1, s2 = jitted(x, y)
        assert_close(a.numpy(), xv.astype(np.float64), DType.F32)
        assert seed == 0 or a.node is x.node, "a replay hands the input itself back"
        assert_close(w.numpy(), np.arange(4.0), DType.F32)
        assert s1.node is s2.node
        assert_close(s1.numpy(), xv.astype(np.float64) * yv, DType.F32)


def test_arguments_and_results_nest_in_tuples_lists_and_dicts(array_device: Device) -> None:
    """Parameters in a dict and a list, results in a dict holding a tuple: the structure
    comes back as returned; another structure (other keys, another length) captures
    again."""

    def step(params: dict[str, Any], x: Tensor) -> dict[str, Any]:
        (w, b), scale = params["layer"], params["scale"]
        y = zyx.matmul(x, w) + b
        return {"y": y * scale, "stats": (zyx.sum(y), [zyx.max(y)])}

    jitted = zyx.jit(step)
    rng = np.random.default_rng(12)
    wv, bv = rng.standard_normal((6, 3)).astype(np.float32), rng.standard_normal(3)
    bv = bv.astype(np.float32)
    w, b = zyx.asarray(wv, device=array_device), zyx.asarray(bv, device=array_device)
    for call in range(3):
        xv = rng.standard_normal((4, 6)).astype(np.float32)
        out = jitted({"layer": [w, b], "scale": 2.0}, zyx.asarray(xv, device=array_device))
        y = xv.astype(np.float64) @ wv + bv
        assert set(out) == {"y", "stats"} and isinstance(out["stats"], tuple)
        assert isinstance(out["stats"][1], list)
        assert_close(out["y"].numpy(), y * 2.0, DType.F32, f"y, call {call}")
        assert_close(out["stats"][0].numpy(), np.asarray(y.sum()), DType.F32, "sum")
        assert_close(out["stats"][1][0].numpy(), np.asarray(y.max()), DType.F32, "max")
    assert jitted.cached() == 1
    jitted({"layer": (w, b), "scale": 2.0}, zyx.asarray(xv, device=array_device))
    jitted({"scale": 2.0, "layer": [w, b]}, zyx.asarray(xv, device=array_device))
    assert jitted.cached() == 3


def test_the_same_array_twice_is_another_signature(array_device: Device) -> None:
    jitted = zyx.jit(lambda a, b: a * 2.0 + b)
    xv, yv = np.random.default_rng(4).standard_normal((2, 50)).astype(np.float32)
    x, y = zyx.asarray(xv, device=array_device), zyx.asarray(yv, device=array_device)
    for _ in range(2):
        assert_close(jitted(x, x).numpy(), xv.astype(np.float64) * 3.0, DType.F32)
        assert_close(jitted(x, y).numpy(), xv.astype(np.float64) * 2.0 + yv, DType.F32)
    assert jitted.cached() == 2


def test_an_argument_that_is_also_a_closures_constant(array_device: Device) -> None:
    """Captured with an argument that is the very array ``fn`` also reads from its
    closure, a replay with another argument still reads the closure's."""
    wv, zv = np.random.default_rng(8).standard_normal((2, 16)).astype(np.float32)
    w, z = zyx.asarray(wv, device=array_device), zyx.asarray(zv, device=array_device)
    jitted = zyx.jit(lambda x: x + w * 2.0)
    assert_close(jitted(w).numpy(), wv.astype(np.float64) * 3.0, DType.F32)
    assert_close(jitted(z).numpy(), zv.astype(np.float64) + wv * 2.0, DType.F32)


def test_new_shapes_dtypes_and_scalars_capture_again(array_device: Device) -> None:
    """Each shape, dtype, device and Python scalar (static: its type and value) is its
    own signature; calling one seen before replays it."""
    jitted = zyx.jit(lambda x, c: x * c + 1)
    rng = np.random.default_rng(5)
    dtypes = [d for d in (DType.F32, DType.F64) if array_device.info.supports(d)]
    calls: list[tuple[tuple[int, ...], DType, Any]] = [
        ((10,), DType.F32, 2.0),
        ((11,), DType.F32, 2.0),
        ((10,), dtypes[-1], 2.0),
        ((10,), DType.F32, 3.0),
        ((10,), DType.F32, -0.0),
        ((10,), DType.F32, 0.0),
    ]
    seen: set[tuple[Any, ...]] = set()
    for _ in range(2):
        for k, (shape, dtype, c) in enumerate(calls):
            signature = (shape, dtype, c.hex())
            values = rng.standard_normal(shape).astype(dtype.numpy)
            before = zyx.stats()
            out = jitted(zyx.asarray(values, device=array_device), c)
            replays = (zyx.stats() - before).replays
            assert out.dtype is dtype
            assert_close(out.numpy(), values.astype(np.float64) * c + 1, dtype, f"call {k}")
            assert replays == (signature in seen), (k, shape, dtype, c)
            seen.add(signature)
    assert jitted.cached() == len(seen)


def test_the_cache_is_bounded_least_recently_used_first(
    array_device: Device, caplog: pytest.LogCaptureFixture
) -> None:
    """The least recently used capture goes first; the first overflow is logged, once."""
    jitted = zyx.jit(lambda x: x * 2.0, cache_size=2)
    replays = []
    with caplog.at_level(logging.WARNING, logger="zyx.jit"):
        for n in (3, 4, 3, 5, 4, 3):
            before = zyx.stats()
            x = zyx.asarray(np.ones(n, np.float32), device=array_device)
            assert_close(jitted(x).numpy(), np.full(n, 2.0), DType.F32)
            replays.append((zyx.stats() - before).replays)
            assert jitted.cached() <= 2
    # 3 new, 4 new, 3 replay, 5 new (drops 4), 4 new (drops 3), 3 new
    assert replays == [0, 0, 1, 0, 0, 0]
    logged = [r.getMessage() for r in caplog.records if r.name == "zyx.jit"]
    assert len(logged) == 1 and "more signatures than its cache holds (2)" in logged[0]
    jitted.clear()
    assert jitted.cached() == 0
    before = zyx.stats()
    jitted(zyx.asarray(np.ones(3, np.float32), device=array_device))
    assert (zyx.stats() - before).replays == 0, "cleared: captured again"


def test_bad_arguments_raise_naming_them(array_device: Device) -> None:
    def fn(x: Tensor, y: Any = None) -> Tensor:
        return x + 1.0

    jitted = zyx.jit(fn)
    x = zyx.asarray(np.ones(3, np.float32), device=array_device)
    with pytest.raises(TypeError, match=r"argument 'x' \(position 0\) is a numpy.ndarray"):
        jitted(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"argument 'y' \(position 1\) is a builtins.set"):
        jitted(x, {1.0})
    with pytest.raises(
        TypeError, match=r"argument 'y' \(position 1\), item \[1\]\['a'\], is a builtins.object"
    ):
        jitted(x, [1.0, {"a": object()}])
    with pytest.raises(TypeError, match=r"keyword argument 'y', item \['k'\], is a builtins.set"):
        jitted(x, y={"k": set()})
    with pytest.raises(TypeError, match="must return zyx arrays .* got float$"):
        zyx.jit(lambda x: 3.0)(x)
    with pytest.raises(TypeError, match="must return zyx arrays .* got float in a list"):
        zyx.jit(lambda x: [x, 3.0])(x)
    with pytest.raises(ValueError, match="cache_size must be an int of 1 or more"):
        zyx.jit(fn, cache_size=0)
    with pytest.raises(TypeError, match="jit takes a function"):
        zyx.jit(3)  # type: ignore[call-overload]
    assert_close(jitted(x, y=2).numpy(), np.full(3, 2.0), DType.F32)


def test_reading_values_back_runs_eagerly_with_a_logged_reason(
    array_device: Device, caplog: pytest.LogCaptureFixture
) -> None:
    """A function that decides on data (``float(x)``) or changes an argument in place
    cannot be replayed: each call runs it eagerly (right answers), and the capture logs
    why, once per signature."""

    def decides(x: Tensor) -> Tensor:
        return x * 2.0 if float(zyx.sum(x)) > 0 else x - 1.0

    def mutates(x: Tensor) -> Tensor:
        x += 1.0
        return x * 2.0

    jitted, mutating = zyx.jit(decides), zyx.jit(mutates)
    with caplog.at_level(logging.WARNING, logger="zyx.jit"):
        for sign in (1.0, -1.0, 1.0):
            x = zyx.asarray(np.full(4, sign, np.float32), device=array_device)
            before = zyx.stats()
            want = np.full(4, 2.0) if sign > 0 else np.full(4, -2.0)
            assert_close(jitted(x).numpy(), want, DType.F32)
            assert (zyx.stats() - before).replays == 0
            y = zyx.asarray(np.full(4, sign, np.float32), device=array_device)
            assert_close(mutating(y).numpy(), np.full(4, (sign + 1) * 2), DType.F32)
            assert_close(y.numpy(), np.full(4, sign + 1), DType.F32)
    reasons = [r.getMessage() for r in caplog.records if r.name == "zyx.jit"]
    assert len(reasons) == 2, reasons
    assert "read values back to Python" in reasons[0]
    assert "changed argument 'x' (position 0) in place" in reasons[1]


def test_a_jitted_function_inside_a_capture_is_captured_with_it(array_device: Device) -> None:
    inner = zyx.jit(lambda x: zyx.exp(x) + 1.0)
    inner(zyx.asarray(np.zeros(8, np.float32), device=array_device))  # captured on its own
    outer = zyx.jit(lambda x: inner(x) * 3.0)
    rng = np.random.default_rng(6)
    for _ in range(3):
        values = rng.standard_normal(8).astype(np.float32)
        out = outer(zyx.asarray(values, device=array_device))
        assert_close(out.numpy(), (np.exp(values.astype(np.float64)) + 1.0) * 3.0, DType.F32)


def test_every_buffer_is_given_back_once_the_jit_is_dropped(array_device: Device) -> None:
    if not array_device.pool.exact_free_bytes:
        pytest.skip(f"{array_device.name}'s pool reports the driver's approximate free memory")
    weights = zyx.asarray(np.ones((16, 16), np.float32), device=array_device)
    start = settled(array_device)
    jitted = zyx.jit(lambda x: _softmax(zyx.matmul(x, weights)) * 2.0)
    rng = np.random.default_rng(7)
    kept = []
    for _ in range(4):
        values = rng.standard_normal((8, 16)).astype(np.float32)
        kept.append((values, jitted(zyx.asarray(values, device=array_device))))
    assert settled(array_device) < start
    del jitted
    gc.collect()
    for values, out in kept:  # results outlive the jit
        want = _softmax_ref(values.astype(np.float64) @ np.ones((16, 16))) * 2.0
        assert_close(out.numpy(), want, DType.F32)
    del kept, out
    assert settled(array_device) == start


def test_threads_share_a_jitted_function(array_device: Device) -> None:
    """Four threads call one jitted function with their own data, each result right; the
    first calls of each thread may capture at once."""
    jitted = zyx.jit(_softmax)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            for call in range(15):
                values = rng.standard_normal((3, 20 + seed % 2)).astype(np.float32)
                out = jitted(zyx.asarray(values, device=array_device))
                want = _softmax_ref(values.astype(np.float64))
                assert_close(out.numpy(), want, DType.F32, f"thread {seed}, call {call}")
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert jitted.cached() == 2


def test_a_program_over_two_devices_replays_its_copies() -> None:
    """Kernels on two devices with copies between them: recordings on each, the copies
    in between, in order."""
    devices = zyx.devices()
    if len(devices) < 2:
        pytest.skip("needs two devices")
    home, other = devices[0], devices[1]

    def there_and_back(x: Tensor) -> Tensor:
        y = zyx.exp(x.to_device(other)) * 2.0
        return zyx.sum(y.to_device(home) - x, axis=0)

    jitted = zyx.jit(there_and_back)
    rng = np.random.default_rng(9)
    for call in range(3):
        values = rng.standard_normal((5, 6)).astype(np.float32)
        before = zyx.stats()
        out = jitted(zyx.asarray(values, device=home))
        ran = zyx.stats() - before
        v = values.astype(np.float64)
        assert_close(out.numpy(), (np.exp(v) * 2.0 - v).sum(axis=0), DType.F32, f"call {call}")
        assert out.device is home
        if call:
            assert (ran.replays, ran.copies, ran.plans_built) == (1, 2, 0), ran
