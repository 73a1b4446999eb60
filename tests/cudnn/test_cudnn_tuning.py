"""The tuning cache's cuDNN entries (``zyx_cudnn.tuning``), without cuDNN or a GPU: the key
holds everything a plan's choice depends on (a change of any part misses), a choice comes
back from disk as it was stored, and an entry that holds no choice is a miss with a log line.
The GPU tests (``test_cudnn_gpu``) replay a stored plan with cuDNN."""

from __future__ import annotations

import enum
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zyx.cli import app
from zyx.dtypes import DType
from zyx.tuning import Entry, Identity, Key, TuningCache
from zyx_cudnn import tuning as cudnn_tuning
from zyx_cudnn.spec import OUTPUT, Layout, Scalar, Spec, Step
from zyx_cudnn.tuning import VARIANTS, Choice, key, lookup, store

pytestmark = pytest.mark.cudnn


class Knob(enum.IntEnum):
    """Knob types as numbers, as ``cudnn.knob_type``'s are."""

    SWIZZLE = 1
    TILE_SIZE = 2
    SPLIT_K = 4


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TuningCache:
    """An empty tuning cache in a cache root of its own."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path / "cache"))
    return TuningCache()


def _layout(dims: tuple[int, int, int], source: int, dtype: DType = DType.BF16) -> Layout:
    strides = (dims[1] * dims[2], dims[2], 1)
    return Layout(dims, strides, 0, dtype, source)


SPEC = Spec(
    _layout((1, 512, 384), 0),
    _layout((1, 384, 256), 1),
    _layout((1, 512, 256), OUTPUT),
    (Layout((1, 1, 256), (0, 0, 1), 0, DType.BF16, 2), Scalar(DType.F32, value=0.0)),
    (Step("add", (("value", 0), ("operand", 0)), DType.F32),
     Step("max", (("value", 1), ("operand", 1)), DType.F32)),
)  # fmt: skip
F16 = DType.F16
IDENTITY = Identity("cuda", "NVIDIA H200", (9, 0), ("driver 13000", "nvrtc 13.0", "sm_90"), "0.1.0")
LIBRARIES = ("cudnn 91900", "cudnn-frontend 1.32.0", "zyx-cudnn 0.1.0")
CHOICE = Choice.of(17, {Knob.TILE_SIZE: 3, Knob.SWIZZLE: 0})


def _key(spec: Spec = SPEC, identity: Identity = IDENTITY, libraries: tuple[str, ...] = LIBRARIES,
         runs: int = 3) -> Key:  # fmt: skip
    return key(spec, identity, libraries, runs)


def _store(cache: TuningCache, under: Key, choice: Choice = CHOICE) -> None:
    times = {choice: 900, Choice.of(3, {}): 1400}
    store(under, choice, times, SPEC.describe(), IDENTITY.name, 1.5, cache=cache)


def _changed_keys() -> dict[str, Key]:
    """The key with each of its parts changed, one at a time."""
    a, b, out, (bias, zero), steps = SPEC.a, SPEC.b, SPEC.out, SPEC.operands, SPEC.steps
    assert isinstance(bias, Layout)
    spec = {
        "operand dims": replace(SPEC, a=replace(a, dims=(1, 512, 385))),
        "operand strides": replace(SPEC, a=replace(a, strides=(1, 1, 512))),
        "operand offset": replace(SPEC, a=replace(a, offset=8)),
        "operand dtype": replace(SPEC, a=replace(a, dtype=F16), b=replace(b, dtype=F16)),
        "output dtype": replace(SPEC, out=replace(out, dtype=DType.F32)),
        "output strides": replace(SPEC, out=replace(out, strides=(512 * 256, 1, 512))),
        "batch": replace(SPEC, out=replace(out, dims=(2, 512, 256))),
        "epilogue operand": replace(SPEC, operands=(replace(bias, strides=(0, 1, 0)), zero)),
        "a number passed by value": replace(SPEC, operands=(bias, Scalar(DType.F32, 0))),
        "epilogue step": replace(SPEC, steps=steps[:1]),
        "epilogue op": replace(SPEC, steps=(replace(steps[0], op="sub"), steps[1])),
        "tf32": replace(SPEC, tf32=True),
    }
    identity = {
        "backend": replace(IDENTITY, backend="opencl"),
        "device name": replace(IDENTITY, name="NVIDIA H100 80GB HBM3"),
        "compute capability": replace(IDENTITY, compute_capability=(8, 0)),
        "driver version": replace(IDENTITY, versions=("driver 12080", *IDENTITY.versions[1:])),
        "zyx version": replace(IDENTITY, zyx="0.2.0"),
    }
    libraries = {
        "cudnn version": ("cudnn 92000", *LIBRARIES[1:]),
        "frontend version": (LIBRARIES[0], "cudnn-frontend 1.33.0", LIBRARIES[2]),
        "zyx-cudnn version": (*LIBRARIES[:2], "zyx-cudnn 0.2.0"),
    }
    return {
        **{part: _key(changed) for part, changed in spec.items()},
        **{part: _key(identity=changed) for part, changed in identity.items()},
        **{part: _key(libraries=changed) for part, changed in libraries.items()},
        "runs": _key(runs=5),
        "timing data": _timed_on("zeros"),
    }


def _timed_on(data: str) -> Key:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cudnn_tuning, "TIMED_ON", data)
        return _key()


@pytest.mark.parametrize("part", list(_changed_keys()))
def test_a_change_of_any_part_of_the_key_misses(cache: TuningCache, part: str) -> None:
    _store(cache, _key())
    changed = _changed_keys()[part]
    assert changed.name != _key().name
    assert lookup(changed, cache=cache) is None
    assert lookup(changed, cache=TuningCache()) is None  # not on disk either
    assert lookup(_key(), cache=TuningCache()) == CHOICE


def test_the_key_names_the_heuristics_as_its_variants() -> None:
    assert _key().variants == VARIANTS == ("cudnn heuristics A", "cudnn heuristics FALLBACK")
    assert "cudnn 91900" in _key().identity.versions  # the libraries join the device's own


def test_a_choice_comes_back_from_disk_as_it_was_stored(cache: TuningCache) -> None:
    _store(cache, _key())
    fresh = TuningCache()  # a new process's: its memory empty, the entry read from disk
    found = lookup(_key(), cache=fresh)
    assert found == CHOICE and found.engine == 17
    assert found.knob_map(Knob) == {Knob.SWIZZLE: 0, Knob.TILE_SIZE: 3}
    (stored,) = fresh.entries()
    assert stored.entry is not None
    assert stored.entry.kernel == "bf16 [1, 512, 384] @ [1, 384, 256] -> add, max"
    assert stored.entry.times == {CHOICE.text(): 900, Choice.of(3, {}).text(): 1400}


def test_a_stored_plan_is_replaced_by_the_next_winner(cache: TuningCache) -> None:
    _store(cache, _key(), Choice.of(99999, {}))  # one a newer cuDNN would refuse to build
    _store(TuningCache(), _key())  # what plans._tune stores after timing every plan anew
    assert lookup(_key(), cache=TuningCache()) == CHOICE


def test_knobs_are_kept_sorted_so_one_plan_has_one_text() -> None:
    again = Choice.of(17, {Knob.SWIZZLE: 0, Knob.TILE_SIZE: 3})
    assert again == CHOICE and again.text() == CHOICE.text()
    assert Choice.parse(CHOICE.text()) == CHOICE
    assert Choice.of(5, {}).knob_map(Knob) == {}


def test_a_knob_type_the_frontend_lacks_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Choice.of(17, {8: 1}).knob_map(Knob)


NOT_CHOICES = {
    "not json": "fast",
    "a list": "[17, []]",
    "no knobs": json.dumps({"engine": 17}),
    "a string engine": json.dumps({"engine": "17", "knobs": []}),
    "a bool engine": json.dumps({"engine": True, "knobs": []}),
    "a float knob": json.dumps({"engine": 17, "knobs": [[2, 3.5]]}),
    "knobs as an object": json.dumps({"engine": 17, "knobs": {"2": 3}}),
    "a knob of three": json.dumps({"engine": 17, "knobs": [[2, 3, 4]]}),
    "a generated kernel's variant": "128",
}


@pytest.mark.parametrize("damage", list(NOT_CHOICES))
def test_an_entry_that_holds_no_plan_is_a_miss_with_a_log_line(
    cache: TuningCache, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    cache.put(_key(), Entry(NOT_CHOICES[damage], {}, SPEC.describe(), IDENTITY.name, 0.0))
    with caplog.at_level("WARNING", logger="zyx.tune.cudnn"):
        assert lookup(_key(), cache=TuningCache()) is None
    assert "not a cuDNN plan: ignored" in caplog.text


def test_a_damaged_file_is_a_miss(cache: TuningCache) -> None:
    _store(cache, _key())
    (cache.folder / _key().name).write_bytes(b'{"format": 1, "key": ')
    assert lookup(_key(), cache=TuningCache()) is None


def test_without_disk_nothing_is_written(cache: TuningCache) -> None:
    store(_key(), CHOICE, {CHOICE: 900}, SPEC.describe(), IDENTITY.name, 0.1, False, cache)
    assert lookup(_key(), disk=False, cache=cache) == CHOICE
    assert not cache.folder.exists() and lookup(_key(), cache=TuningCache()) is None


MATCHED = """
import numpy as np, zyx
from zyx.graph.schedule import Graph
from zyx.tuning import Identity
from zyx_cudnn.match import candidates
from zyx_cudnn.tuning import key
rng = np.random.default_rng(3)
x, y, c = (zyx.asarray(rng.standard_normal(s), dtype=zyx.bfloat16, device="host")
           for s in ((64, 32), (32, 48), (48,)))
((option, *_),) = candidates(Graph([zyx.maximum(x @ y + c, 0.0).node]), zyx.device("host"), False)
print(key(option.spec, Identity(*{identity!r}), {libraries!r}, 3).name)
"""


def test_a_matched_spec_has_one_key_in_every_process() -> None:
    """The key holds the spec's ``repr``: the same in a process of its own, hash seed and
    all."""
    program = MATCHED.format(identity=tuple(vars(IDENTITY).values()), libraries=LIBRARIES)
    names = [
        subprocess.run(
            [sys.executable, "-c", program], env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, check=True, timeout=120,
        ).stdout.strip()
        for seed in ("1", "2")
    ]  # fmt: skip
    assert names[0] == names[1] and len(names[0]) == 64


def test_zyx_tune_lists_and_clears_the_cudnn_plans(cache: TuningCache) -> None:
    _store(cache, _key())  # the fixture's folder: the process's cache resolves it at each call
    shown = CliRunner().invoke(app, ["tune"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "1 entries" in shown.output and SPEC.describe() in shown.output
    assert '"engine": 17' in shown.output
    cleared = CliRunner().invoke(app, ["tune", "--clear"])
    assert cleared.exit_code == 0 and "removed 1 entries" in cleared.output


def test_plans_are_timed_on_a_normal_sample() -> None:
    """Every tensor a plan reads holds values of its dtype, not what an allocation left."""
    import numpy as np

    import zyx
    from zyx_cudnn.plans import _timing_inputs

    device = zyx.device("host")
    bias = SPEC.operands[0]
    assert isinstance(bias, Layout)
    inputs = _timing_inputs(SPEC, device)  # type: ignore[arg-type]  # its pool is all it uses
    try:
        assert len(inputs) == 3  # a, b and the bias; the 0.0 is a constant
        for buf, layout in zip(inputs, (SPEC.a, SPEC.b, bias), strict=True):
            assert isinstance(buf, zyx.backend.Buffer) and buf.nbytes == layout.nbytes
            got = np.empty(layout.nbytes // 2, layout.dtype.numpy)
            device.pool.read(buf, got)
            values = got.astype(np.float64)
            assert np.isfinite(values).all() and 0.9 < values.std() < 1.1
    finally:
        for buf in inputs:
            if isinstance(buf, zyx.backend.Buffer):
                device.pool.release(buf)


def test_timing_inputs_that_run_out_of_memory_keep_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import zyx
    from zyx.errors import BackendError, ErrorStatus
    from zyx_cudnn.plans import _timing_inputs

    pool = zyx.device("host").pool
    made: list[zyx.backend.Buffer] = []
    allocate = pool.allocate

    def failing(nbytes: int) -> zyx.backend.Buffer:
        if len(made) == 2:  # the bias
            raise BackendError(ErrorStatus.MEMORY_ALLOCATION, "out of memory (test)")
        made.append(allocate(nbytes))
        return made[-1]

    monkeypatch.setattr(pool, "allocate", failing)
    with pytest.raises(BackendError, match="out of memory"):
        _timing_inputs(SPEC, zyx.device("host"))  # type: ignore[arg-type]
    assert len(made) == 2 and all(buf.refcount == 0 for buf in made)


def test_a_remembered_refusal_keeps_none_of_its_callers_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``plan_for`` remembers that cuDNN refused a spec and raises the refusal again, as a
    new error each time: a kept error's traceback held the frames it went through, so a
    refused f32 matmul's graph (``zyx_match_graph``'s), its nodes and their buffers lived
    as long as the cache (on the GPU machine the next realize found its output's buffer
    missing from the allocator's cache)."""
    import gc
    import weakref

    from zyx_cudnn import plans
    from zyx_cudnn.graphs import Unsupported

    def refuse(*args: object) -> plans.Plan:
        raise Unsupported("f32: set cudnn.allow_tf32")

    class Graph:
        """Stands in for what the caller's frame holds."""

    monkeypatch.setattr(plans, "_plans", {})
    monkeypatch.setattr(plans, "_tune", refuse)

    def match(device: object) -> tuple[weakref.ref[Graph], str]:
        graph = Graph()
        with pytest.raises(Unsupported) as caught:
            plans.plan_for(SPEC, device)  # type: ignore[arg-type]  # its id is all it uses
        return weakref.ref(graph), str(caught.value)  # not the error: its frames hold graph

    device = object()
    (first, message), (second, again) = match(device), match(device)
    gc.collect()
    assert first() is None and second() is None
    assert message == again and "set cudnn.allow_tf32" in again
