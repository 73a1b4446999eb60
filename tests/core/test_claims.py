"""Claims (``zyx_match_graph``): a plugin's own program for part of a graph, raced against
the generated kernels and remembered.

The plugin is ``tests/plugins/zyx-test-claims``, installed as a real entry point in the
plugin venv; it claims every matmul. Its tiled kernel is several times faster than zyx's
generated matmul on the host and its ``repeated`` mode many times slower, so which one
wins is not a close call. The checks on what a claim must be run in this process.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import zyx
from zyx.graph.claims import Claim, matmuls
from zyx.graph.nodes import CustomLaunch
from zyx.graph.schedule import Graph
from zyx.hookspecs import hookimpl
from zyx.ir.ops import BOp
from zyx.plugins import registry

if TYPE_CHECKING:
    from conftest import PluginVenv

PROGRAM = """
import json, logging, numpy as np, zyx, zyx_test_claims
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
for name in ("zyx.sched", "zyx.tune"):
    logging.getLogger(name).addHandler(handler)
    logging.getLogger(name).setLevel(logging.DEBUG)
rng = np.random.default_rng(7)
n, m, k = {shape}
report = {{}}
for run in ("first", "again", "transposed"):
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    # Both transposed: the generic lowering reads b across its rows, where its strips of
    # b's rows want them contiguous (contiguous operands, or b alone transposed: dot
    # products of contiguous rows, it is about as fast as the plugin's tiles).
    x = zyx.asarray(np.ascontiguousarray(a.T), device="host").mT
    y = zyx.asarray(np.ascontiguousarray(b.T), device="host").mT
    if run == "transposed":  # a new structure (b's rows at an offset): raced again
        wider = np.ascontiguousarray(np.vstack([b.T[:1], b.T]))
        y = zyx.asarray(wider, device="host")[1:].mT
    before = zyx.stats()
    got = (x @ y).numpy()
    spent = zyx.stats() - before
    want = a.astype(np.float64) @ b.astype(np.float64)
    report[run] = {{
        "error": float(np.abs(got - want).max() / np.abs(want).max()),
        "stats": spent.__dict__,
        "calls": len(zyx_test_claims.calls),
    }}
report["log"] = [r for r in records if "claim" in r]
print(json.dumps(report))
"""


def run_claims(venv: PluginVenv, mode: str, shape: tuple[int, int, int]) -> dict[str, Any]:
    # One thread: on a loaded 2-core VM a parallel launch may wait a time slice for a
    # descheduled thread, and decide the race.
    program = PROGRAM.format(shape=shape)
    result: dict[str, Any] = venv.json(program, ZYX_TEST_CLAIMS=mode, ZYX_HOST__THREADS="1")
    for run in ("first", "again", "transposed"):
        assert result[run]["error"] < 1e-5, (run, result)  # f32 against float64, k <= 256
    return result


def winners(log: list[str]) -> list[str]:
    """The winner of each claim race in ``log``: the plugin that claimed it, or generated."""
    found = [line.split(": ", 1)[1] for line in log if line.endswith(" runs (raced)")]
    return [w.split("'")[1] for w in found]


def tried(log: list[str]) -> list[str]:
    """The variants each race tried (timed, or dropped out: the generated kernels past twice
    the fastest claim's time), by plugin (or generated), in order."""
    lines = [line for line in log if line.endswith(" ns") or " failed: " in line]
    return [line.split(": ")[1].split("'")[1] for line in lines]


def test_the_claims_of_a_node_race_and_the_choice_is_remembered(
    plugin_venv: PluginVenv,
) -> None:
    """The test plugin's tiles and core's matmul claim the same product: both race the
    generated kernels (a claim, not the generic reduce, wins), each
    layout once."""
    seen = run_claims(plugin_venv, "tiled", (256, 256, 256))
    first, again, transposed = seen["first"], seen["again"], seen["transposed"]
    assert first["calls"] == 1 and first["stats"]["claims_offered"] == 2
    assert first["stats"]["claim_races"] == 1 and first["stats"]["claims_taken"] == 1
    # The claim's (n, m, 1) output reshaped to the target's (n, m) shares its buffer.
    assert first["stats"]["kernels_scheduled"] == 0
    assert first["stats"]["searches"] == 0, "the race times the generated kernels' defaults"
    # The same structure: the plan is reused; the hook is not asked again, nothing is timed.
    assert again["calls"] == 1 and again["stats"]["plans_reused"] == 1
    assert again["stats"]["claim_races"] == 0
    # Another layout is another graph: asked once more, and its claims raced.
    assert transposed["calls"] == 2 and transposed["stats"]["claim_races"] == 1
    assert transposed["stats"]["claims_taken"] == 1
    assert tried(seen["log"])[:3] == ["claims", "zyx", "generated"], seen["log"]
    assert len(winners(seen["log"])) == 2 and "generated" not in winners(seen["log"])


def test_a_slower_claim_loses(plugin_venv: PluginVenv) -> None:
    seen = run_claims(plugin_venv, "repeated", (64, 48, 80))
    first = seen["first"]["stats"]
    assert first["claims_offered"] == 2 and first["claim_races"] == 1
    assert winners(seen["log"])[0] != "claims", seen["log"]
    assert seen["again"]["stats"]["claim_races"] == 0


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("raise", "the test plugin's hook failed"),
        ("junk", "returned 'str', not a zyx.graph.claims.Claim"),
    ],
)
def test_a_failing_plugin_loses_its_claims_not_the_result(
    plugin_venv: PluginVenv, mode: str, message: str
) -> None:
    seen = run_claims(plugin_venv, mode, (32, 16, 24))
    assert seen["first"]["stats"]["claims_offered"] == 0
    assert any(message in line for line in seen["log"]), seen["log"]


class Claimer:
    """A plugin registered in this process for one test: claims what ``make`` returns."""

    def __init__(self, make: Any) -> None:
        self.make = make
        self.seen: list[str] = []

    @hookimpl
    def zyx_match_graph(self, graph: Graph) -> Any:  # pluggy allows fewer arguments
        return self.make(graph)


@pytest.fixture
def claimer(request: pytest.FixtureRequest) -> Any:
    manager = registry().plugin_manager
    plugins: list[Any] = []

    def register(make: Any) -> Claimer:
        plugin = Claimer(make)
        manager.register(plugin, name=f"{request.node.name}-{len(plugins)}")
        plugins.append(plugin)
        return plugin

    yield register
    for plugin in plugins:
        manager.unregister(plugin)


ROWS = itertools.count(12)


def matmul_inputs() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], zyx.Tensor]:
    """A matmul of a shape no earlier test realized: its plan is new, so the hook is asked."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((next(ROWS), 9)), rng.standard_normal((9, 5))
    return a, b, zyx.asarray(a, dtype=zyx.float32) @ zyx.asarray(b, dtype=zyx.float32)


def claim_of(graph: Graph, **change: Any) -> Claim:
    (m,) = matmuls(graph)
    fields = {"output": m.output, "inputs": (m.a.node, m.b.node), "key": "test",
              "launches": lambda device: []}  # fmt: skip
    return Claim(**{**fields, **change})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"inputs": ()}, "which is not among its inputs"),
        ({"inputs": [1, 2]}, "its inputs are not a tuple of this graph's nodes"),
        ({"output": SimpleNamespace()}, "not an op of this graph"),
    ],
)
def test_invalid_claims_are_refused_with_a_reason(
    claimer: Any, caplog: pytest.LogCaptureFixture, change: dict[str, Any], message: str
) -> None:
    claimer(lambda graph: [claim_of(graph, **change)])
    a, b, product = matmul_inputs()
    before = zyx.stats()
    with caplog.at_level("WARNING", logger="zyx.sched"):
        got = product.numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    assert (zyx.stats() - before).claims_offered == 0
    assert message in caplog.text


def broken_claim_realized(claimer: Any, caplog: pytest.LogCaptureFixture, key: str) -> Any:
    """``zyx.stats()`` of realizing a matmul that a plugin claims with launches that raise,
    after checking the result against numpy and the failure's warning on ``zyx.sched``."""

    def broken(device: Any) -> list[CustomLaunch]:
        raise RuntimeError("no program for this device")

    claimer(lambda graph: [claim_of(graph, key=key, launches=broken)])
    a, b, product = matmul_inputs()
    before = zyx.stats()
    with caplog.at_level("WARNING", logger="zyx.sched"):
        got = product.numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    assert "no program for this device" in caplog.text
    return zyx.stats() - before


def test_a_claim_that_fails_to_run_loses_its_race(
    claimer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    spent = broken_claim_realized(claimer, caplog, "broken")
    assert spent.claims_offered == 1 and spent.claims_taken == 0


BROKEN_IN_RACE = """
import gc, json, numpy as np, zyx
from zyx import race
from zyx.graph.claims import Claim, matmuls
from zyx.hookspecs import hookimpl
from zyx.plugins import registry

standins = []
standin = race._standin

def recorded(node):
    made = standin(node)
    if made is not node:
        standins.append(made.buffer)
    return made

def broken(device):
    raise RuntimeError("no program for this device")

class Claimer:
    @hookimpl
    def zyx_match_graph(self, graph):
        (m,) = matmuls(graph)
        return [Claim(m.output, (m.a.node, m.b.node), "broken", broken)]

race._standin = recorded
registry().plugin_manager.register(Claimer(), name="broken")
rng = np.random.default_rng(5)
a, b = rng.standard_normal((13, 9)), rng.standard_normal((9, 5))
x, y = zyx.asarray(a, dtype=zyx.float32), zyx.asarray(b, dtype=zyx.float32)
gc.disable()
got = ((x + 1) @ y).numpy()
zyx.empty_cache()
print(json.dumps({
    "error": float(np.abs(got - (a + 1) @ b).max()),
    "held": [buf.refcount for buf in standins],
}))
"""


def test_a_claim_that_fails_in_its_race_leaves_no_cycle_holding_memory(
    plugin_venv: PluginVenv,
) -> None:
    """The race times a claim over stand-ins of the inputs that other kernels compute (here
    ``a + 1``). The error a broken claim raised is kept, and its traceback's frames held
    those stand-ins in a reference cycle until the cyclic collector ran (for an 8192² bf16
    intermediate on a GPU, 128 MiB): with the collector off, each stand-in's buffer must be
    back in its pool once the realize returns and the cache is emptied. In a process of its
    own: pytest's log capture keeps the failure's record, and with it the error."""
    seen = plugin_venv.json(BROKEN_IN_RACE, ZYX_PLUGINS="host")
    assert seen["error"] < 1e-5
    assert seen["held"] and set(seen["held"]) == {0}, seen


def test_a_broken_claim_taken_untimed_leaves_its_node_to_the_generated_kernels(
    claimer: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With autotune off the first claim is taken without a race: built first, so that one
    that fails costs its plugin the node, not the result."""
    from zyx import search
    from zyx.config import AutotuneSection

    monkeypatch.setattr(search, "settings", lambda: AutotuneSection(enabled=False))
    spent = broken_claim_realized(claimer, caplog, "broken untimed")
    assert spent.claims_offered == 1 and spent.claim_races == 0 and spent.claims_taken == 0


def test_matmuls_finds_operands_with_their_strides() -> None:
    x = zyx.asarray(np.ones((2, 3, 4, 5), np.float32))
    y = zyx.asarray(np.ones((5, 6), np.float32))
    graph = Graph([(x.mT.mT @ y).node, (x[:, :, ::2].mT.mT @ y).node])
    found = matmuls(graph)
    assert len(found) == 2
    plain, strided = found
    assert (plain.batch, plain.n, plain.m, plain.k) == ((2, 3), 4, 6, 5)
    assert plain.a.strides == (60, 20, 5, 1) and plain.b.strides == (0, 0, 6, 1)
    assert (strided.n, strided.a.strides) == (2, (60, 20, 10, 1))
    assert strided.a.node is x.node and strided.b.node is y.node


def naive_matmul(n: int, m: int, k: int, bias: bool) -> Any:
    """``out[i, j] = sum over t of a[i, t] * b[t, j]`` (``+ c[j]`` with ``bias``), one
    work-item an element, of contiguous f32 operands."""
    from zyx.dtypes import DType
    from zyx.ir import KernelBuilder, ParamKind

    kb = KernelBuilder(f"naive_matmul_{n}x{m}x{k}{'_bias' * bias}")
    a, b = kb.param(DType.F32), kb.param(DType.F32)
    c = kb.param(DType.F32) if bias else None
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    item = kb.group(0, n * m)
    i, j = item / m, item % m
    acc = kb.define(DType.F32, 1)
    acc[0] = kb.const(0, DType.F32)
    with kb.loop(k) as t:
        acc[0] = acc[0] + a[i * k + t] * b[t * m + j]
    out[item] = acc[0] + c[j] if c is not None else acc[0]
    return kb.build()


@pytest.mark.usefixtures("zyx_tuning_cache")
@pytest.mark.parametrize("fused_wins", [False, True])
def test_a_fused_claim_races_the_bare_claim_inside_it_with_generated_kernels(
    claimer: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    fused_wins: bool,
) -> None:
    """A plugin claims ``x @ y + c`` fused and ``x @ y`` bare. The bare claim races first
    and wins; the fused one then races its node's generated kernels *with the bare claim
    inside* (its matmul and a generated add). The claims' timed runs are scaled so that
    the outcome is not a close call between microsecond kernels: the bare one's by 1/1000
    (its run inside the other's generated alternative is not), the fused one's by 1/1000
    or 1000. Either way one claim runs and the result is right."""
    from zyx import race

    scale = {"bare": 1e-3, "fused": 1e-3 if fused_wins else 1e3}
    timer = race.ClaimRace.timer

    def scaled(self: Any, variant: Any) -> Any:
        run = timer(self, variant)
        factor = scale.get(variant[1], 1.0) if isinstance(variant, tuple) else 1.0
        return lambda: int(run() * factor)

    monkeypatch.setattr(race.ClaimRace, "timer", scaled)
    monkeypatch.setattr(race, "LOST", 10**9)  # it would compare with the claims' real times
    n, m, k = next(ROWS), 5, 9

    def claims(graph: Graph) -> list[Claim]:
        (mm,) = matmuls(graph)
        add = next(node for node in graph.order if node.arg is BOp.ADD)
        inputs = (mm.a.node, mm.b.node)
        bias = next(s.srcs[0] for s in add.srcs if s.srcs and s.srcs[0].realized)
        bare = CustomLaunch(naive_matmul(n, m, k, False), (("src", 0), ("src", 1), ("out", 0)))
        fused = CustomLaunch(
            naive_matmul(n, m, k, True), (("src", 0), ("src", 1), ("src", 2), ("out", 0))
        )
        return [
            Claim(add, (*inputs, bias), "fused", lambda device: [fused]),
            Claim(mm.output, inputs, "bare", lambda device: [bare]),
        ]

    claimer(claims)
    rng = np.random.default_rng(5)
    a, b, c = rng.standard_normal((n, k)), rng.standard_normal((k, m)), rng.standard_normal(m)
    x, y, z = (zyx.asarray(v, dtype=zyx.float32, device="host") for v in (a, b, c))
    before = zyx.stats()
    with caplog.at_level("DEBUG", logger="zyx.sched"):
        got = (x @ y + z).numpy()
    np.testing.assert_allclose(got, a @ b + c, rtol=1e-5, atol=1e-5)
    spent = zyx.stats() - before
    assert spent.claims_offered == 2 and spent.claim_races == 2 and spent.claims_taken == 1
    assert spent.kernels_scheduled == (0 if fused_wins else 1)  # the add after the bare claim
    races = [r.getMessage() for r in caplog.records if r.getMessage().endswith("runs (raced)")]
    assert len(races) == 2 and "'bare')" in races[0], races
    assert ("'fused')" in races[1]) is fused_wins, races
