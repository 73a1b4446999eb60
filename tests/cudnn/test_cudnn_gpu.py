"""cuDNN on the GPU: each claim's plan run on its own (the output poisoned first) and
compared with numpy in float64 under the dtype's bound (f32 1e-5, TF32 1e-3, f16 and bf16
1e-2), for 2-D, batched, broadcast and transposed matmuls and each epilogue; then through
zyx's runtime, where the claim races the generated kernels, and the fastest plan kept in the
tuning cache for the next process. Skipped, with the reason, without a GPU or without
cuDNN."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cudnn_support import clean_environ, stand_in

import zyx
from zyx.dtypes import DType
from zyx.graph.nodes import Op
from zyx.graph.schedule import Graph
from zyx.testing.numerics import BOUNDS, assert_close, poisoned
from zyx_cudnn.graphs import Unsupported
from zyx_cudnn.match import Candidate, candidates
from zyx_cudnn.plans import plan_for
from zyx_cudnn.tuning import Choice

pytestmark = [pytest.mark.cudnn, pytest.mark.gpu]

F32, BF16, F16 = zyx.float32, zyx.bfloat16, zyx.float16
DTYPES = {F32: DType.F32, BF16: DType.BF16, F16: DType.F16}


def arrays(
    rng: np.random.Generator, device: Any, dtype: Any, *shapes: tuple[int, ...]
) -> list[tuple[zyx.Tensor, np.ndarray[Any, Any]]]:
    """Random arrays on ``device`` and their values (as rounded to ``dtype``) in float64."""
    out = []
    for shape in shapes:
        t = zyx.asarray(rng.standard_normal(shape), dtype=dtype, device=device)
        out.append((t, np.asarray(t.to_device("host").astype(zyx.float64).numpy())))
    return out


def run(
    device: Any, result: zyx.Tensor, tf32: bool = False, tune: bool = False
) -> tuple[Candidate, Any]:
    """The longest claim of ``result``'s matmul, run alone on its plan (the first that
    builds; ``tune``: the fastest of all, timed here: the tuning cache on disk is not read):
    the output read back as float64."""
    (options,) = candidates(Graph([result.node]), device, tf32)
    option = options[0]
    plan = plan_for(option.spec, device, tune, disk=False)  # raises Unsupported, cuDNN's message
    assert plan_for(option.spec, device, tune) is plan  # built once
    pool = device.pool
    out = pool.allocate(math.prod(option.output.shape) * option.output.dtype.itemsize)
    pool.write(out, poisoned(option.output.dtype, math.prod(option.output.shape)))
    scratch = [pool.allocate(n) for n in plan.scratch]
    args = [n.arg if n.op is Op.SCALAR else n.buffer for n in option.inputs]
    device.launch(plan.program, [*args, out, *scratch])
    got = np.empty(option.output.shape, option.output.dtype.numpy)
    pool.read(out, got)
    for buf in (out, *scratch):
        pool.release(buf)
    return option, got.astype(np.float64).reshape(result.shape)


def check(
    device: Any, result: zyx.Tensor, want: Any, dtype: Any, tf32: bool = False, tune: bool = False
) -> Candidate:
    """``result``'s claim run alone, within the dtype's bound of ``want``. Where cuDNN has
    no true-fp32 plan, zyx-cudnn does not claim an f32 matmul: the test says so and skips."""
    try:
        option, got = run(device, result, tf32, tune)
    except Unsupported as refusal:
        if dtype is not F32 or tf32:
            raise
        pytest.skip(f"not claimed, as it must not be: {refusal}")
    bounds = {**BOUNDS, DType.F32: 1e-3} if tf32 else BOUNDS
    assert_close(got, want, DTYPES[dtype], option.spec.describe(), bounds)
    return option


@pytest.mark.parametrize("dtype", [F32, BF16, F16])
@pytest.mark.parametrize("nmk", [(256, 192, 320), (8, 8, 8), (1000, 24, 136)])
def test_2d(cuda: Any, rng: np.random.Generator, dtype: Any, nmk: tuple[int, int, int]) -> None:
    n, m, k = nmk
    (x, a), (y, b) = arrays(rng, cuda, dtype, (n, k), (k, m))
    check(cuda, x @ y, a @ b, dtype)


def test_a_plan_launched_again_replays_its_graph_on_the_data_of_the_moment(
    cuda: Any, rng: np.random.Generator
) -> None:
    """The second launch with the same buffers is captured into a CUDA graph and later ones
    replay it (zyx-cuda's ``LibraryProgram`` replay): each launch, replayed or not, computes
    what its inputs hold then, with other buffers as with the first again."""
    (x1, a1), (y1, b1), (x2, a2), (y2, b2) = arrays(
        rng, cuda, BF16, (256, 192), (192, 320), (256, 192), (192, 320)
    )
    (options,) = candidates(Graph([(x1 @ y1).node]), cuda, False)
    plan = plan_for(options[0].spec, cuda, tune=False, disk=False)
    pool, count = cuda.pool, 256 * 320
    out = pool.allocate(count * 2)
    scratch = [pool.allocate(n) for n in plan.scratch]
    for x, y, want in [(x1, y1, a1 @ b1)] * 3 + [(x2, y2, a2 @ b2)] * 3 + [(x1, y1, a1 @ b1)]:
        pool.write(out, poisoned(DType.BF16, count))
        cuda.launch(plan.program, [x.node.buffer, y.node.buffer, out, *scratch])
        got = np.empty(count, DType.BF16.numpy)
        pool.read(out, got)
        assert_close(got.astype(np.float64).reshape(256, 320), want, DType.BF16, "replayed")
    captured = {pointers[:2] for pointers, _ in plan.program._graphs}
    pairs = {(x.node.buffer.handle, y.node.buffer.handle) for x, y in [(x1, y1), (x2, y2)]}
    assert plan.program.replay and pairs <= captured, "both captured, kept"
    for buf in (out, *scratch):
        pool.release(buf)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize(
    ("left", "right"),
    [((8, 128, 64), (8, 64, 96)), ((8, 128, 64), (64, 96)), ((128, 64), (4, 64, 96)),
     ((2, 3, 64, 32), (32, 48))],
)  # fmt: skip
def test_batched_and_broadcast(
    cuda: Any, rng: np.random.Generator, dtype: Any, left: Any, right: Any
) -> None:
    (x, a), (y, b) = arrays(rng, cuda, dtype, left, right)
    check(cuda, x @ y, a @ b, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("which", ["a", "b", "both", "batched"])
def test_transposed_operands_are_read_in_place(
    cuda: Any, rng: np.random.Generator, dtype: Any, which: str
) -> None:
    if which == "batched":
        (xt, at), (y, b) = arrays(rng, cuda, dtype, (4, 64, 96), (4, 64, 80))
        option = check(cuda, xt.mT @ y, at.transpose(0, 2, 1) @ b, dtype)
        assert option.inputs[0] is xt.node
        return
    (xt, at), (yt, bt) = arrays(rng, cuda, dtype, (64, 160), (96, 64))
    x, a = (xt.mT, at.T) if which in ("a", "both") else arrays(rng, cuda, dtype, (160, 64))[0]
    y, b = (yt.mT, bt.T) if which in ("b", "both") else arrays(rng, cuda, dtype, (64, 96))[0]
    option = check(cuda, x @ y, a @ b, dtype)
    assert len(option.inputs) == 2 and all(n.realized for n in option.inputs)  # no copies


def gelu(x: Any, tanh: Callable[[Any], Any]) -> Any:
    return 0.5 * x * (1.0 + tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))


EPILOGUES: dict[str, tuple[Callable[..., Any], Callable[..., Any], list[str]]] = {
    "bias": (lambda v, c, r: v + c, lambda v, c, r: v + c, ["add"]),
    "scale": (lambda v, c, r: v * 2.5, lambda v, c, r: v * 2.5, ["mul"]),
    "relu": (lambda v, c, r: zyx.maximum(v, 0.0), lambda v, c, r: np.maximum(v, 0), ["relu"]),
    "bias+relu": (lambda v, c, r: zyx.maximum(v + c, 0.0), lambda v, c, r: np.maximum(v + c, 0),
                  ["add", "relu"]),
    "max(v, 0.5)": (lambda v, c, r: zyx.maximum(v, 0.5), lambda v, c, r: np.maximum(v, 0.5),
                    ["cmp_neq", "max", "sub", "binary_select"]),
    "gelu": (lambda v, c, r: gelu(v, zyx.tanh), lambda v, c, r: gelu(v, np.tanh),
             ["mul", "mul", "mul", "mul", "add", "mul", "tanh", "add", "mul"]),
    "sigmoid": (lambda v, c, r: 1.0 / (1.0 + zyx.exp(-v)), lambda v, c, r: 1 / (1 + np.exp(-v)),
                ["neg", "exp", "add", "reciprocal", "mul"]),
    "tanh": (lambda v, c, r: zyx.tanh(v), lambda v, c, r: np.tanh(v), ["tanh"]),
    "residual*scale-bias": (lambda v, c, r: (v + r) * 0.5 - c, lambda v, c, r: (v + r) * 0.5 - c,
                            ["add", "mul", "sub"]),
}  # fmt: skip


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("name", list(EPILOGUES))
def test_each_epilogue_is_fused(cuda: Any, rng: np.random.Generator, dtype: Any, name: str) -> None:
    ours, reference, ops = EPILOGUES[name]
    (x, a), (y, b), (c, bias), (r, residual) = arrays(
        rng, cuda, dtype, (128, 64), (64, 96), (96,), (128, 96)
    )
    option = check(cuda, ours(x @ y, c, r), reference(a @ b, bias, residual), dtype)
    assert [s.op for s in option.spec.steps] == ops


def test_relu_propagates_nan_as_maximum_does(cuda: Any, rng: np.random.Generator) -> None:
    """The standard's maximum is NaN where either side is: cuDNN's relu keeps that."""
    data = rng.standard_normal((64, 32))
    data[3] = np.nan
    x = zyx.asarray(data, dtype=BF16, device=cuda)  # bf16: f32 is claimed only with TF32
    a = x.to_device("host").astype(zyx.float64).numpy()
    (y, b), (c, bias) = arrays(rng, cuda, BF16, (32, 48), (48,))
    _, got = run(cuda, zyx.maximum(x @ y + c, 0.0))
    want = np.maximum(a @ b + bias, 0)
    assert np.isnan(got[3]).all() and not np.isnan(got[np.arange(64) != 3]).any()
    assert_close(got[4:], want[4:], DType.BF16)


def test_f32_is_claimed_only_where_tf32_is_allowed(cuda: Any, rng: np.random.Generator) -> None:
    """cuDNN's f32 plans computed in TF32 on the H200, those without tensor-core notes too
    (3e-4 against float64): true fp32 is the generated kernels', TF32 cuDNN's on request."""
    (x, a), (y, b) = arrays(rng, cuda, F32, (512, 2048), (2048, 256))
    with pytest.raises(Unsupported, match="set cudnn.allow_tf32"):
        run(cuda, x @ y)
    tf32 = check(cuda, x @ y, a @ b, F32, tf32=True)
    assert tf32.spec.tf32


@pytest.mark.parametrize(("dtype", "epilogue"), [(BF16, "bias+relu"), (F32, "bias"), (F16, "gelu")])
def test_the_fastest_plan_is_right_too(
    cuda: Any, rng: np.random.Generator, dtype: Any, epilogue: str
) -> None:
    """Every candidate built and timed (``plans._tune``), the winner checked."""
    ours, reference, _ = EPILOGUES[epilogue]
    (x, a), (y, b), (c, bias) = arrays(rng, cuda, dtype, (384, 256), (256, 192), (192,))
    check(cuda, ours(x @ y, c, None), reference(a @ b, bias, None), dtype, tune=True)


PROGRAM = """
import logging, sys, numpy as np, zyx
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("zyx.sched").addHandler(handler)
logging.getLogger("zyx.sched").setLevel(logging.DEBUG)
rng = np.random.default_rng(5)
a, b, c = rng.standard_normal((512, 384)), rng.standard_normal((384, 256)), rng.standard_normal(256)
x, y, bias = (zyx.asarray(v, dtype=zyx.bfloat16, device="cuda") for v in (a, b, c))
ref = [np.asarray(t.to_device("host").astype(zyx.float64).numpy()) for t in (x, y, bias)]
before = zyx.stats()
got = zyx.maximum(x @ y + bias, 0.0).astype(zyx.float32).numpy()
spent = zyx.stats() - before
want = np.maximum(ref[0] @ ref[1] + ref[2], 0)
error = np.linalg.norm(got - want) / np.linalg.norm(want)
print(error, spent.claims_taken, sum("claimed bf16" in r for r in records))
print("\\n".join(r for r in records if "cudnn" in r or "claim" in r), file=sys.stderr)
"""


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_through_zyx_the_claim_races_and_runs(cuda: Any, tmp_path: Path, enabled: str) -> None:
    environ = clean_environ(tmp_path, ZYX_CUDA__CUDNN=enabled)
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=environ, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    error, taken, claimed = done.stdout.split()
    assert float(error) < 1e-2, done.stderr
    if enabled == "true":
        # The fused claim and the bare product's: one of them, or core's matmul with the
        # fused one lost, runs (each faster than the generated kernels).
        assert int(claimed) == 2 and int(taken) == 1, done.stderr
    else:
        assert int(claimed) == 0, done.stderr


QUARANTINED = """
import numpy as np, zyx
from zyx.plugins import registry
(cudnn,) = [b for b in registry().backends() if b.name == "cudnn"]
rng = np.random.default_rng(9)
a, b = rng.standard_normal((96, 64)), rng.standard_normal((64, 80))
x, y = (zyx.asarray(v, dtype=zyx.float32, device="cuda") for v in (a, b))
got = (x @ y).numpy()
print(cudnn.state.value, float(np.abs(got - a @ b).max()))
print(cudnn.reason)
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH")
def test_cuda_works_while_cudnn_is_quarantined(cuda: Any, tmp_path: Path) -> None:
    """A libcudnn too old (a stand-in reporting 8.9.7, first on LD_LIBRARY_PATH, where the
    frontend would look first too) quarantines the backend; CUDA computes as without it."""
    old = stand_in(tmp_path / "old", 8907)
    paths = [str(old.parent), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]
    environ = clean_environ(tmp_path, LD_LIBRARY_PATH=os.pathsep.join(paths))
    done = subprocess.run(
        [sys.executable, "-c", QUARANTINED], env=environ, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, reason = done.stdout.splitlines()
    state, error = first.split()
    assert state == "quarantined" and float(error) < 1e-4
    assert reason == f"{old} is cuDNN 8907; zyx-cudnn needs 9.0 or newer"


TUNED = """
import json, logging, sys, numpy as np, zyx
from zyx import tuning
from zyx.dtypes import DType
from zyx.testing.numerics import assert_close
from zyx_cudnn.tuning import VARIANTS
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("zyx.tune.cudnn").addHandler(handler)
logging.getLogger("zyx.tune.cudnn").setLevel(logging.DEBUG)
rng = np.random.default_rng(11)
a, b, c = rng.standard_normal((768, 320)), rng.standard_normal((320, 448)), rng.standard_normal(448)
x, y, bias = (zyx.asarray(v, dtype=zyx.bfloat16, device="cuda") for v in (a, b, c))
ref = [np.asarray(t.to_device("host").astype(zyx.float64).numpy()) for t in (x, y, bias)]
got = zyx.maximum(x @ y + bias, 0.0).astype(zyx.float32).numpy()
assert_close(got.astype(np.float64), np.maximum(ref[0] @ ref[1] + ref[2], 0), DType.BF16)
stored = [s for s in tuning.cache.entries() if s.parts.get("variants") == list(VARIANTS)]
print(json.dumps({
    "timed": sum("built and timed" in r for r in records),
    "rebuilt": sum("none timed" in r for r in records),
    "refused": sum("does not build" in r for r in records),
    "stored": [s.entry.variant for s in stored if s.entry is not None],
    "paths": [str(s.path) for s in stored],
}))
print("\\n".join(records), file=sys.stderr)
"""


def tuned(environ: dict[str, str]) -> dict[str, Any]:
    """``TUNED`` run in a process of its own: what it logged on ``zyx.tune.cudnn`` and the
    cuDNN plans the tuning cache holds after it."""
    done = subprocess.run(
        [sys.executable, "-c", TUNED], env=environ, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    found["log"] = done.stderr
    return found


def test_a_second_process_builds_the_cached_plan_and_times_none(cuda: Any, tmp_path: Path) -> None:
    """The first process times every plan and stores the fastest's engine and knobs, a spec
    each (the race offers the bare product beside the fused epilogue: two); the next builds
    those plans from the tuning cache on disk, timing none; entries whose engine this cuDNN
    does not have are logged, every plan timed anew, and replaced."""
    environ = clean_environ(tmp_path, ZYX_CACHE_DIR=str(tmp_path / "cache"), ZYX_CUDA__CUDNN="true")
    first = tuned(environ)
    assert first["timed"] >= 1 and first["rebuilt"] == 0, first["log"]
    winners = sorted(first["stored"])
    assert winners, first["log"]
    second = tuned(environ)
    assert second["timed"] == 0 and 1 <= second["rebuilt"] <= len(winners), second["log"]
    assert sorted(second["stored"]) == winners
    for path in second["paths"]:
        document = json.loads(Path(path).read_text())
        document["entry"]["variant"] = Choice(9999, ()).text()  # no cuDNN engine has that id
        Path(path).write_text(json.dumps(document))
    stale = tuned(environ)
    assert stale["refused"] >= 1 and stale["timed"] >= 1 and stale["rebuilt"] == 0, stale["log"]
    for replaced in stale["stored"]:
        choice = Choice.parse(replaced)
        assert choice is not None and choice.engine != 9999, stale["stored"]


@pytest.mark.parametrize("setting", ["ZYX_AUTOTUNE__CACHE", "ZYX_AUTOTUNE__ENABLED"])
def test_without_the_cache_nothing_is_stored(cuda: Any, tmp_path: Path, setting: str) -> None:
    """``autotune.cache`` off: the plans are timed, and nothing is left on disk for the next
    process; ``autotune.enabled`` off: the first plan that builds, nothing timed or stored."""
    environ = clean_environ(tmp_path, ZYX_CACHE_DIR=str(tmp_path / "cache"), ZYX_CUDA__CUDNN="true",
                            **{setting: "false"})  # fmt: skip
    found = tuned(environ)
    assert found["stored"] == [] and found["rebuilt"] == 0, found["log"]
    assert (found["timed"] >= 1) == (setting == "ZYX_AUTOTUNE__CACHE"), found["log"]
