"""Kernel search (``zyx.search``): the measured winner is taken, cached, and never searched
again; the config turns it off, bounds it and keeps it off the disk; generated kernels are
searched at a plan's first build only, and compute what numpy computes."""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import zyx
from zyx import search, tuning
from zyx.allocator import allocator
from zyx.backend import Device
from zyx.config import AutotuneSection
from zyx.dtypes import DType
from zyx.errors import BackendError
from zyx.graph.cpu import cpu_layout
from zyx.graph.lower import UNROLL, UNROLLS, KernelSpec, resident
from zyx.graph.schedule import Graph, schedule
from zyx.ir.builder import KernelBuilder
from zyx.ir.ops import Kernel, ParamKind
from zyx.runtime import Runtime, local_size
from zyx.testing.devices import GpuShapedHost, checked_host
from zyx.testing.numerics import assert_close
from zyx.tuning import TuningCache

N = 1 << 14
"""Elements of the test space's kernels."""

FAST = AutotuneSection(budget=30.0, runs=2, min_time=0.0)
"""Every variant timed, however fast the default."""


@pytest.fixture(autouse=True)
def cache(zyx_tuning_cache: TuningCache) -> TuningCache:
    """An empty tuning cache of its own (``zyx.testing``'s fixture), for every test here."""
    return zyx_tuning_cache


def _chain(trips: int, local: int = 64) -> Kernel:
    """``out[i] = a[i]`` through ``trips`` dependent multiply-adds: time grows with trips."""
    kb = KernelBuilder(f"chain{trips}")
    a = kb.param(DType.F32)
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    i = kb.group(0, N // local) * local + kb.local(0, local)
    acc = kb.define(DType.F32)
    acc[0] = a[i]
    with kb.loop(trips):
        acc[0] = acc[0] * 0.999 + 0.5
    out[i] = acc[0]
    return kb.build()


@dataclass
class Chains:
    """A space of hand-written kernels whose times differ by design: variant ``t`` runs
    ``t`` trips (negative: a local size past the device's limit, which fails to compile)."""

    device: Device
    trips: tuple[int, ...] = (64, 1, 512, 32)
    name: str = "chains"
    timed: list[int] = field(default_factory=list)
    """The variants whose timers were asked for: those timed."""

    def __post_init__(self) -> None:
        self.a = self.device.pool.allocate(4 * N)
        self.device.pool.write(self.a, np.ones(N, np.float32))
        self.out = self.device.pool.allocate(4 * N)

    def key(self) -> str:
        return f"chains of {N}"

    def variants(self) -> tuple[int, ...]:
        return self.trips

    def timer(self, variant: int) -> search.Timer:
        self.timed.append(variant)
        too_many = 2 * self.device.info.max_local_threads
        kernel = _chain(1, too_many) if variant < 0 else _chain(variant)
        return search.timed(self.device, [(self.device.compile(kernel), [self.a, self.out])])


@pytest.fixture
def host() -> Device:
    return zyx.device("host")


def test_the_measured_winner_is_taken(host: Device) -> None:
    space = Chains(host)
    result = search.search(space, FAST)
    assert set(result.times) == {64, 1, 512, 32} and space.timed == [64, 1, 512, 32]
    assert result.winner == min(result.times, key=result.times.__getitem__)
    assert result.winner == 1, result.times  # 1 trip against 32, 64 and 512
    assert result.times[512] > result.times[1]


def test_a_winner_is_cached_and_never_searched_again(host: Device) -> None:
    space = Chains(host)
    assert search.choose(space, FAST) == (1, True)
    again = Chains(host)
    assert search.choose(again, FAST) == (1, False) and again.timed == []
    tuning.cache = TuningCache()  # a new process: the entry comes from disk
    assert search.choose(again, FAST) == (1, False) and again.timed == []


def test_a_change_of_options_searches_again(host: Device) -> None:
    search.choose(Chains(host), FAST)
    other = Chains(host)
    assert search.choose(other, FAST.model_copy(update={"runs": 3})) == (1, True)
    assert len(other.timed) == 4


def test_an_entry_naming_a_variant_the_space_lacks_is_not_used(host: Device) -> None:
    """A forged or damaged entry under the right key: searched again, never run."""
    space = Chains(host)
    search.choose(space, FAST)
    (path,) = tuning.cache.folder.iterdir()
    path.write_text(path.read_text().replace('"variant": "1"', '"variant": "7"'))
    tuning.cache = TuningCache()
    again = Chains(host)
    assert search.choose(again, FAST) == (1, True) and len(again.timed) == 4


def test_disabled_runs_the_default_and_times_nothing(host: Device) -> None:
    space = Chains(host)
    assert search.choose(space, AutotuneSection(enabled=False)) == (64, False)
    assert space.timed == [] and not tuning.cache.folder.exists()


def test_without_the_cache_nothing_is_written(host: Device) -> None:
    options = FAST.model_copy(update={"cache": False})
    assert search.choose(Chains(host), options) == (1, True)
    assert not tuning.cache.folder.exists()
    again = Chains(host)  # remembered in this process all the same
    assert search.choose(again, options) == (1, False) and again.timed == []


def test_a_spent_budget_times_the_default_alone(host: Device) -> None:
    space = Chains(host)
    assert search.choose(space, FAST.model_copy(update={"budget": 0.0})) == (64, True)
    assert space.timed == [64]


def test_a_default_under_min_time_ends_the_search_and_stays_off_disk(host: Device) -> None:
    space = Chains(host)
    assert search.choose(space, FAST.model_copy(update={"min_time": 10.0})) == (64, True)
    assert space.timed == [64] and not tuning.cache.folder.exists()


def test_a_variant_that_fails_to_compile_drops_out(host: Device) -> None:
    result = search.search(Chains(host, trips=(-1, 32, 1)), FAST)
    assert result.winner == 1 and set(result.times) == {32, 1}
    with pytest.raises(BackendError, match="local"):
        search.search(Chains(host, trips=(-1,)), FAST)


def test_where_no_variant_can_be_timed_the_default_runs_untimed(
    host: Device, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="zyx.tune"):
        assert search.choose(Chains(host, trips=(-1, -2)), FAST) == (-1, False)
    assert "no variant could be timed" in caplog.text
    assert not tuning.cache.folder.exists()


def test_the_interpreter_is_never_searched() -> None:
    space = Chains(checked_host())
    assert search.choose(space, FAST) == (64, False) and space.timed == []


# ---- the progress bar ------------------------------------------------------------------


@pytest.fixture
def quick_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "SHOW_AFTER", 0.0)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_a_long_search_shows_a_bar_on_a_terminal(
    host: Device, quick_bar: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    master, slave = os.openpty()
    shown = bytearray()

    def read() -> None:  # all along: a full terminal would block the bar's writes
        while True:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the terminal closed
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        with os.fdopen(slave, "w") as terminal:
            monkeypatch.setattr(sys, "stderr", terminal)
            assert search.terminal()
            search.search(Chains(host), FAST)
    finally:
        reader.join(timeout=10)
        os.close(master)
    assert "tuning chains" in shown.decode(errors="replace")


@pytest.mark.parametrize("where", ["a file", "CI"])
def test_no_bar_outside_a_terminal(
    host: Device, quick_bar: None, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    if where == "CI":
        monkeypatch.setattr(stderr, "isatty", lambda: True)
        monkeypatch.setenv("CI", "true")
    assert not search.terminal()
    search.search(Chains(host), FAST)
    assert stderr.getvalue() == ""


# ---- generated kernels through the runtime ---------------------------------------------


@pytest.fixture
def autotune(cache: TuningCache) -> Iterator[None]:
    """Search every kernel of enough elements, quickly; the config as it was afterwards."""
    before = search.settings().model_dump()
    zyx.configure(autotune={"budget": 0.2, "runs": 1, "min_time": 0.0})
    try:
        yield
    finally:
        zyx.configure(autotune=before)


def _searched(device: Device) -> None:
    """Skip on the host: its kernels' groups are one work-item each (``zyx.graph.cpu``),
    the local size no variant (``test_host_kernels_have_nothing_to_search``)."""
    if cpu_layout(device):
        pytest.skip(f"{device.name}'s generated kernels have one variant")


def test_host_kernels_have_nothing_to_search() -> None:
    x = zyx.asarray(np.ones((512, 512), np.float32), device="host")
    node = zyx.sum(x, axis=1).node.srcs[0]
    spec = KernelSpec(node, [node], group=True)
    device = zyx.device("host")
    variants = search.Generated(spec, lambda n: False, 256, device.compile).variants()
    assert variants == [search.Layout(256)]


def test_generated_kernels_are_searched_once(array_device: Device, autotune: None) -> None:
    _searched(array_device)
    values = np.random.default_rng(3).standard_normal((384, 300)).astype(np.float32)
    before = zyx.stats()
    out = zyx.sum(zyx.asarray(values, device=array_device), axis=1)
    assert_close(out.numpy(), values.astype(np.float64).sum(axis=1), DType.F32)
    done = zyx.stats() - before
    assert done.searches == done.kernels_scheduled == 1, done
    # A plan built again (another runtime: no plan cache) finds the winner cached.
    before = zyx.stats()
    Runtime().realize([zyx.sum(zyx.asarray(values, device=array_device), axis=1).node])
    assert (zyx.stats() - before).searches == 0


def test_shapes_of_one_power_of_two_bucket_share_a_winner(
    array_device: Device, autotune: None
) -> None:
    _searched(array_device)

    def searches(shape: tuple[int, int]) -> int:
        x = zyx.asarray(np.ones(shape, np.float32), device=array_device)
        before = zyx.stats()
        zyx.sum(x, axis=1).numpy()
        return (zyx.stats() - before).searches

    # Shapes no other test realizes: their plans are built here, not found in the plan cache.
    assert searches((640, 330)) >= 1
    assert searches((700, 350)) == 0  # sizes and strides round up as (640, 330)'s do
    assert searches((640, 700)) >= 1  # rows of 700: another bucket


def _softmax(x: Any) -> Any:
    e = zyx.exp(x - zyx.max(x, axis=1, keepdims=True))
    return e / zyx.sum(e, axis=1, keepdims=True)


def _softmax_ref(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


KINDS = {  # a thread reduce, another, a group reduce, a map
    "row sum": (lambda x: zyx.sum(x, axis=1), lambda x: x.sum(axis=1)),
    "column sum": (lambda x: zyx.sum(x, axis=0), lambda x: x.sum(axis=0)),
    "softmax": (_softmax, _softmax_ref),
    "map": (lambda x: zyx.exp(x) * 2, lambda x: np.exp(x) * 2),
}


def _run_with(device: Device, target: Any, pick: Any) -> None:
    """Run the kernels of ``target``'s schedule in order, each with the local size that
    ``pick`` takes from its variants, each output given its buffer (as a plan does)."""
    sched = schedule(Graph([target]))
    for spec in sched.steps:
        assert isinstance(spec, KernelSpec), spec
        out = spec.output

        def is_input(n: Any, out: Any = out) -> bool:
            return n is not out and (n.realized or id(n) in sched.boundaries)

        with search.Generated(spec, is_input, local_size(device, spec), device.compile) as space:
            local = pick(space.variants())
            ((compiled, args),) = space.launches(local)
            device.launch(compiled, args)
            kinds = [p.kind for p in space.lowered(local).kernel.params]
            result = np.empty(out.nbytes, np.uint8)
            device.pool.read(args[kinds.index(ParamKind.GLOBAL_MUT)], result)
        buf = allocator.allocate(device.pool, max(out.nbytes, 1))
        device.pool.write(buf, result)
        out.realize_with(buf)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("pick", [min, max], ids=["fewest", "most"])
def test_the_extreme_local_sizes_compute_what_numpy_does(
    array_device: Device, kind: str, pick: Any
) -> None:
    """Every kernel of the program (one, or a reduction's stages) at the fewest or the most
    work-items per group its search would try (the default runs in every other test)."""
    program, reference = KINDS[kind]
    values = np.random.default_rng(4).standard_normal((384, 300)).astype(np.float32)
    out = program(zyx.asarray(values, device=array_device))
    _run_with(array_device, out.node, pick)
    expected = reference(values.astype(np.float64))
    assert_close(out.numpy(), expected, DType.F32, f"{kind}, {pick.__name__} per group")


@pytest.mark.parametrize("kind", [*KINDS, "total sum"])
@pytest.mark.parametrize("unroll", UNROLLS)
def test_every_unroll_computes_what_numpy_does(
    array_device: Device, kind: str, unroll: int
) -> None:
    """Every kernel of the program at each unroll a GPU's search tries, on any device:
    rows (and a total's chunks) that end inside a trip of the loop."""
    program, reference = KINDS.get(kind, (zyx.sum, np.sum))
    shape = (700, 300) if kind == "total sum" else (389, 300)
    values = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    out = program(zyx.asarray(values, device=array_device))
    _run_with(array_device, out.node, lambda variants: search.Layout(variants[0].local, unroll))
    expected = reference(values.astype(np.float64))
    assert_close(out.numpy(), expected, DType.F32, f"{kind}, unroll {unroll}")


def test_a_plan_cache_hit_never_reaches_search_or_the_disk(
    array_device: Device, autotune: None
) -> None:
    values = np.ones((384, 300), np.float32)
    zyx.realize(zyx.sum(zyx.asarray(values, device=array_device), axis=1))
    outs = [zyx.sum(zyx.asarray(values, device=array_device), axis=1)]
    called: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            called.add(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        zyx.realize(*outs)
    finally:
        sys.setprofile(None)
    ours = {search.__file__, tuning.__file__, sys.modules["zyx.cache"].__file__}
    assert not called & ours, called & ours
    assert any(f.endswith("runtime.py") for f in called)  # the profile saw the realize


def test_small_kernels_keep_the_default(array_device: Device, autotune: None) -> None:
    x = zyx.asarray(np.ones((30, 40), np.float32), device=array_device)
    before = zyx.stats()
    zyx.realize(*(program(x) for program, _ in KINDS.values()))
    done = zyx.stats() - before
    assert done.kernels_scheduled >= 3 and done.searches == 0


def test_generated_variants_are_powers_of_two_within_the_device_nearest_the_default(
    array_device: Device,
) -> None:
    _searched(array_device)
    x = zyx.asarray(np.ones((512, 512), np.float32), device=array_device)
    node = zyx.sum(x, axis=1).node.srcs[0]  # the reduction under the keepdims view
    spec = KernelSpec(node, [node], group=True)
    variants = search.Generated(spec, lambda n: False, 256, array_device.compile).variants()
    sizes = [v.local for v in variants]
    info = array_device.info
    limit = min(info.max_local_threads, info.max_local_work_dims[0], search.MAX_LOCAL)
    assert variants[0] == search.Layout(256, UNROLL) and len(set(variants)) == len(variants)
    assert all(s & (s - 1) == 0 and search.MIN_LOCAL <= s <= limit for s in sizes)
    assert set(sizes) == {1 << p for p in range(5, limit.bit_length())}
    ratios = [abs(np.log2(v.local / 256)) + abs(np.log2(v.unroll / UNROLL)) for v in variants]
    assert ratios == sorted(ratios)
    # A GPU also tries more elements per trip of the row's loop; a CPU's OpenCL only the one.
    unrolls = set(UNROLLS) if info.warp_size > 1 else {UNROLL}
    assert {v.unroll for v in variants} == unrolls


def _map_space(out: Any) -> search.Generated:
    """The search space of the one map kernel that realizing ``out`` runs."""
    sched = schedule(Graph([out.node]))
    (spec,) = sched.steps
    assert isinstance(spec, KernelSpec) and spec.reduction is None
    device = spec.output.device
    return search.Generated(spec, lambda n: n.realized, local_size(device, spec), device.compile)


def test_a_map_kernel_of_per_dim_indices_runs_along_rows_on_a_gpu() -> None:
    """A broadcast (``x + bias``) has a layout along its rows, no division per element,
    and runs in it by default where a row holds a group's work; a flat output has none;
    rows shorter than a group's work keep the flat default and offer rows only to groups
    whose work is at most twice a row."""
    device = GpuShapedHost()
    rng = np.random.default_rng(13)
    x = zyx.asarray(rng.standard_normal((64, 1200)).astype(np.float32), device=device)
    bias = zyx.asarray(rng.standard_normal(1200).astype(np.float32), device=device)
    broadcast = _map_space(zyx.maximum(x + bias, 0.0))
    variants = broadcast.variants()
    assert variants[0] == search.Layout(256, UNROLL, rows=True)
    assert search.Layout(256, UNROLL) in variants and len(set(variants)) == len(variants)
    assert all(v.local * v.unroll <= 2 * 1200 for v in variants if v.rows)
    flat = _map_space(x * 2.0).variants()
    assert flat[0] == search.Layout(256, UNROLL) and not any(v.rows for v in flat)
    short = zyx.asarray(rng.standard_normal((1024, 100)).astype(np.float32), device=device)
    rows = _map_space(short + bias[:100]).variants()
    assert not rows[0].rows
    assert {(v.local, v.unroll) for v in rows if v.rows} == {(32, 4)}


def test_a_broadcast_along_rows_computes_what_numpy_does(array_device: Device) -> None:
    """Realized through the front end as for a GPU (by default along rows, where a GPU's
    group of 256 x 4 fits in a row), on each device and on the bounds-checked interpreter
    dressed as a GPU, into poisoned outputs, in f32 and bf16."""
    rng = np.random.default_rng(14)
    values = rng.standard_normal((3, 70, 1100))
    bias = rng.standard_normal((70, 1))
    for device in (array_device, GpuShapedHost()):
        for name, dtype in (("float32", DType.F32), ("bfloat16", DType.BF16)):
            x = zyx.asarray(values, dtype=getattr(zyx, name), device=device)
            b = zyx.asarray(bias, dtype=x.dtype, device=device)
            out = zyx.maximum(x + b, 0.0)
            if device.info.warp_size > 1:
                assert _map_space(out).variants()[0].rows
            zyx.realize(zyx.full(out.shape, float("nan"), dtype=x.dtype, device=device))
            want = np.maximum(x.numpy().astype(np.float64) + b.numpy().astype(np.float64), 0)
            assert_close(out.numpy(), want, dtype, f"maximum(x + bias, 0) on {device.name}")


def test_only_a_row_read_in_a_loop_has_an_unroll_to_search() -> None:
    """A softmax row of 16384 that 1024 work-items hold in registers (``RESIDENT``) has no
    loop, so no unroll to search; at 512 work-items the passes loop over the row."""
    x = zyx.asarray(np.ones((4, 16384), np.float32), device="host")
    (spec,) = schedule(Graph([_softmax(x).node])).steps
    assert isinstance(spec, KernelSpec) and spec.group and len(spec.passes) == 2
    assert resident(spec, 1024) and not resident(spec, 512)
    row_sum = zyx.sum(x, axis=1).node
    (single,) = schedule(Graph([row_sum])).steps
    assert isinstance(single, KernelSpec) and not resident(single, 1024)  # read once


def test_gpu_layouts_reduce_empty_rows_to_the_identity() -> None:
    """A reduction over no elements loads nothing (a clamped index had no element 0 to go
    to; a resident row of 0 elements filled no slots): found by the array fuzzer on the
    bounds-checked interpreter dressed as a GPU."""
    device = GpuShapedHost()
    empty = zyx.asarray(np.zeros((0, 4), np.float32), device=device)
    np.testing.assert_array_equal(zyx.sum(empty, axis=0).numpy(), np.zeros(4))
    assert float(zyx.sum(empty)) == 0.0 and float(zyx.prod(empty)) == 1.0
    flat = zyx.asarray(np.zeros(0, np.uint32), device=device)
    assert zyx.count_nonzero(flat, axis=(0,), keepdims=True).numpy().tolist() == [0]
    one = zyx.asarray(np.zeros(0, np.float32), device=device)
    top = zyx.maximum(zyx.prod(one, axis=None, keepdims=True), one)
    assert float(zyx.vecdot(top, one, axis=-1) + 0.5) == 0.5


@pytest.mark.parametrize("dtype", [DType.F32, DType.BF16, DType.F16, DType.I32, DType.U8])
def test_kernels_are_timed_on_a_normal_sample_not_on_zeros(dtype: DType) -> None:
    """A product of zeros draws less power than one of real data, so claims and plans are
    timed on a standard normal sample (repeated past ``TIMING_BLOCK``); other dtypes on
    zeros, which are valid indices and divisors."""
    device = zyx.device("host")
    count = 2 * search.TIMING_BLOCK + 5  # two whole blocks and a part of one
    buf = device.pool.allocate(count * dtype.itemsize)
    try:
        device.pool.write(buf, np.full(count, 7, dtype.numpy))
        search.fill_for_timing(device.pool, buf, dtype)
        got = np.empty(count, dtype.numpy)
        device.pool.read(buf, got)
    finally:
        device.pool.release(buf)
    values = got.astype(np.float64)
    if not dtype.is_float:
        assert not values.any()
        return
    assert np.isfinite(values).all() and abs(values.std() - 1) < 0.01 and abs(values.mean()) < 0.01
    block = search.TIMING_BLOCK
    np.testing.assert_array_equal(values[block : 2 * block], values[:block])
    np.testing.assert_array_equal(values[2 * block :], values[:5])  # no 7 left


def test_an_empty_buffer_is_left_alone() -> None:
    device = zyx.device("host")
    buf = device.pool.allocate(2)  # less than one f32
    try:
        search.fill_for_timing(device.pool, buf, DType.F32)
    finally:
        device.pool.release(buf)
