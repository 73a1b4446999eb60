"""Library programs run on the stream zyx chooses, ordered by the same hazards as kernels;
the stream a recording captures them on is destroyed with the program. A replaying one's
replays that repeat the last launch run in C (native.c's ``Replayer``), a claim's too."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from lcg import lcg_kernel, lcg_model
from stub_driver import run_stubbed

from zyx.backend import Scalar
from zyx.dtypes import DType
from zyx.ir import Param, ParamKind

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = pytest.mark.cuda

HERE = Path(__file__).parent
N = 1 << 20


@pytest.mark.gpu
def test_library_call_is_scheduled_like_a_kernel(
    device: CudaDevice, rng: np.random.Generator
) -> None:
    from cuda.bindings import driver

    from zyx_cuda.library import LibraryProgram

    calls: list[tuple[int, list[int], list[Scalar]]] = []

    def fill(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        calls.append((stream, pointers, scalars))
        (result,) = driver.cuMemsetD32Async(pointers[0], scalars[0], scalars[1], stream)
        assert not result

    params = [
        Param(DType.U32, ParamKind.GLOBAL_MUT),
        Param(DType.U32, ParamKind.VARIABLE),
        Param(DType.I64, ParamKind.VARIABLE),
    ]
    filler = LibraryProgram(device, "fill", params, fill)
    pool, program = device.pool, device.compile(lcg_kernel())
    a, b, out = (pool.allocate(4 * N) for _ in range(3))
    data = [rng.integers(0, 1 << 32, N, dtype=np.uint32) for _ in range(2)]
    pool.write(a, data[0])
    pool.write(b, data[1])
    # A long kernel reads b; the fill overwrites b right after: it must wait (write after read).
    device.launch(program, [a, b, out, 500_000, N])
    device.launch(filler, [b, 7, N])
    result = np.empty(N, np.uint32)
    pool.read(out, result)
    np.testing.assert_array_equal(result, lcg_model(data[0], data[1], 500_000))
    pool.read(b, result)
    np.testing.assert_array_equal(result, np.full(N, 7, np.uint32))
    stream, pointers, scalars = calls[0]
    assert stream in [int(h) for h in device.streams.handles]
    assert pointers == [b.handle] and scalars == [7, N]
    for buf in (a, b, out):
        pool.release(buf)
    device.release(program)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH")
def test_the_capture_stream_is_destroyed_with_the_program() -> None:
    """On the stand-in driver (``stub_driver``, in a process of its own); no GPU."""
    out = run_stubbed(Path(__file__))
    assert out == "ok\n", out


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH")
@pytest.mark.parametrize("native", ["1", "0"])
def test_a_replaying_call_is_captured_the_second_time_and_replayed_after(native: str) -> None:
    """On the stand-in driver, in a process of its own, with zyx-cuda's native module and
    without it (``ZYX_NATIVE=0``); no GPU."""
    out = run_stubbed(Path(__file__), "replay", native)
    assert out == "ok\n", out


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH")
@pytest.mark.parametrize("mode", ["native", "claim"])
def test_a_replay_of_the_last_launch_runs_in_c(mode: str) -> None:
    """Through ``Device.launch`` (``replay_in_c``) and a claim's realize
    (``claim_replays``), on the stand-in driver, in a process of its own; no GPU."""
    out = run_stubbed(Path(__file__), mode)
    if out.startswith("skip:"):
        pytest.skip(out)
    assert out == "ok\n", out


def capture_and_release() -> str:
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    stand_ins = install()
    from zyx.errors import BackendError, ErrorStatus
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.library import LibraryProgram

    captured: list[int] = []

    def fill(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        captured.append(stream)

    device = CudaDevice(0, queues=2)
    params = [Param(DType.U32, ParamKind.GLOBAL_MUT), Param(DType.U32, ParamKind.VARIABLE)]
    filler = LibraryProgram(device, "fill", params, fill)
    buf = device.pool.allocate(4 * N)
    rec = device.record()
    rec.launch(filler, [buf, 9])
    rec.replay()
    rec.set_arg(0, 1, 13)  # captured again, on the same stream
    rec.replay()
    stream = captured[0]
    assert captured == [stream, stream], captured
    assert stream not in [int(handle) for handle in device.streams.handles]
    rec.set_arg(0, 1, 14)  # to be captured at the next replay, after the release
    device.release(filler)
    device.synchronize()
    assert stand_ins.destroyed == [stream], stand_ins.destroyed
    try:  # refused before any capture: no stream made again
        rec.replay()
        raise AssertionError("a replay of a released library program ran")
    except BackendError as error:
        assert error.status is ErrorStatus.INCORRECT_KERNEL_ARG, error
    assert len(captured) == 2 and stand_ins.destroyed == [stream]
    return "ok"


def replay_and_release(native: str) -> str:
    os.environ["ZYX_NATIVE"] = native
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    stand_ins = install()
    stand_ins.record(True)
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.library import REPLAYS, LibraryProgram

    calls: list[tuple[int, tuple[int, ...], tuple[Scalar, ...]]] = []

    def fill(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        calls.append((stream, tuple(pointers), tuple(scalars)))

    device = CudaDevice(0, queues=1)
    params = [Param(DType.U32, ParamKind.GLOBAL_MUT), Param(DType.U32, ParamKind.VARIABLE)]
    filler = LibraryProgram(device, "fill", params, fill, replay=True)
    assert (filler.replayer is not None) == (native == "1")
    a, b = device.pool.allocate(64), device.pool.allocate(64)
    for args in ([a, 9], [a, 9], [a, 9], [b, 9], [a, 10], [a, 9]):
        device.launch(filler, args)
    assert [c[1:] for c in calls] == [
        ((a.handle,), (9,)),
        ((a.handle,), (9,)),
        ((b.handle,), (9,)),
        ((a.handle,), (10,)),
    ], calls
    streams = [int(handle) for handle in device.streams.handles]
    assert calls[0][0] in streams and calls[1][0] not in streams, "the second on the capture's"
    graphs = stand_ins.graph_calls
    assert graphs.count("cuStreamBeginCapture") == graphs.count("cuGraphInstantiate") == 1
    in_c = len(stand_ins.graph_launches())  # the third: it repeats the second
    assert (graphs.count("cuGraphLaunch"), in_c) == ((2, 1) if filler.replayer else (3, 0))
    for value in range(REPLAYS):  # each twice: captured; the least recent set's graph goes
        device.launch(filler, [b, value])
        device.launch(filler, [b, value])
    assert graphs.count("cuGraphExecDestroy") == 1, graphs
    device.release(filler)
    device.synchronize()
    assert graphs.count("cuGraphExecDestroy") == 1 + REPLAYS, graphs

    def uncapturable(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        if stream not in streams:
            raise RuntimeError("not under capture")
        calls.append((stream, tuple(pointers), tuple(scalars)))

    calls.clear()
    other = LibraryProgram(device, "fill", params, uncapturable, replay=True)
    for _ in range(3):
        device.launch(other, [a, 1])
    assert len(calls) == 3 and not other.replay, "called each time once capture failed"
    return "ok"


def replay_in_c() -> str:
    """A replaying program's launches: those repeating the last launch, a graph's, replay
    it in C; every other goes to Python, which never leaves C a graph it destroyed."""
    sys.path.insert(0, str(HERE))
    from stub_driver import CONTEXT, install

    stand_ins = install()
    stand_ins.record(True)
    from cuda.bindings import driver

    from zyx.errors import BackendError, ErrorStatus
    from zyx_cuda import library
    from zyx_cuda.device import CudaDevice

    made: list[int] = []
    destroyed: list[int] = []
    instantiate, destroy = driver.cuGraphInstantiate, driver.cuGraphExecDestroy

    def instantiated(*args: object) -> tuple[object, int]:
        found = instantiate(*args)
        made.append(found[1])
        return found

    def destroyed_exec(graph_exec: int) -> tuple[object]:
        destroyed.append(graph_exec)
        return destroy(graph_exec)

    driver.cuGraphInstantiate, driver.cuGraphExecDestroy = instantiated, destroyed_exec
    calls: list[list[int]] = []

    def fill(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        calls.append(pointers)

    device = CudaDevice(0, queues=1)
    params = [Param(DType.U32, ParamKind.GLOBAL_MUT), Param(DType.U32, ParamKind.VARIABLE)]
    filler = library.LibraryProgram(device, "fill", params, fill, replay=True)
    if filler.replayer is None:
        return "skip: zyx-cuda's native module did not build"
    a, b = device.pool.allocate(64), device.pool.allocate(64)
    stream, graphs = int(device.streams.handles[0]), stand_ins.graph_calls

    def launch(*args: object, python: int = 0, c: int = 0) -> None:
        """Launch ``args``: ``python`` graph launches through cuda-python, ``c`` in C, each
        of a graph captured and not destroyed, on the one stream."""
        before, launched = graphs.count("cuGraphLaunch"), filler.replayer.launched
        device.launch(filler, list(args))
        assert graphs.count("cuGraphLaunch") - before == python, (args, graphs)
        in_c = stand_ins.graph_launches()
        assert filler.replayer.launched - launched == len(in_c) == c, (args, in_c)
        assert all(g in made and g not in destroyed and s == stream for g, s in in_c), in_c

    launch(a, 9)  # called
    launch(a, 9, python=1)  # captured, launched
    for _ in range(3):  # the same objects: replayed in C, the library not called
        launch(a, 9, c=1)
    assert len(calls) == 2 and len(made) == 1
    launch(b, 9)  # another buffer: called in Python
    launch(a, 9, python=1)  # the last launch was not this graph's: Python, once
    launch(a, 9, c=1)
    big = 3_000_000_000
    launch(a, int(str(big)))  # a scalar of its own each time: never the packed one
    launch(a, int(str(big)), python=1)
    launch(a, int(str(big)), python=1)
    stand_ins.make_current(0)  # another library's context: Python makes ours current
    launch(a, big, python=1)
    assert stand_ins.current() == CONTEXT
    launch(a, big, c=1)
    stand_ins.refuse_graph(made[-1])  # the driver's error, raised, nothing recorded
    issued = list(device.streams.issued)
    try:
        device.launch(filler, [a, big])
        raise AssertionError("a failed cuGraphLaunch passed")
    except BackendError as error:
        assert error.status is ErrorStatus.KERNEL_LAUNCH and "cuGraphLaunch" in str(error)
    assert device.streams.issued == issued and filler.replayer.launched == 5
    stand_ins.refuse_graph(0)

    library.REPLAYS = 1  # a new program's each capture evicts the graph launched last
    filler = library.LibraryProgram(device, "fill", params, fill, replay=True)
    launch(b, 5)
    launch(b, 5, python=1)
    launch(b, 5, c=1)
    launch(a, 5)
    launch(a, 5, python=1)  # captured: the graph of (b, 5) goes
    assert made[-2] in destroyed
    launch(b, 5)  # called: its graph is gone
    launch(a, 5, python=1)  # the last launch was another's
    launch(a, 5, c=1)  # the graph of (a, 5), kept
    assert made[-1] not in destroyed
    device.release(filler)
    for submit in (filler.submit, filler.replayer.submit):
        try:  # refused, by Python, even through the Replayer
            submit([a, 5])
            raise AssertionError("a launch of a released program ran")
        except BackendError as error:
            assert error.status is ErrorStatus.INCORRECT_KERNEL_ARG, error
    assert filler.submit == filler.schedule and not stand_ins.graph_launches()
    return "ok"


def claim_replays() -> str:
    """A claim whose program is a replaying LibraryProgram: realized again and again, it
    is replayed in C, the realize's Python path not launching any graph."""
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    stand_ins = install()
    stand_ins.record(True)
    import numpy as np

    import zyx
    from zyx.graph.claims import Claim, matmuls
    from zyx.graph.nodes import CustomLaunch
    from zyx.graph.schedule import Graph
    from zyx.hookspecs import hookimpl
    from zyx.plugins import registry
    from zyx_cuda.library import LibraryProgram

    calls: list[list[int]] = []

    def run(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        calls.append(pointers)

    device = zyx.device("cuda")
    kinds = [ParamKind.GLOBAL] * 2 + [ParamKind.GLOBAL_MUT] * 2
    program = LibraryProgram(device, "fake", [Param(DType.U8, k) for k in kinds], run, replay=True)
    slots = (("src", 0), ("src", 1), ("out", 0), ("scratch", 0))

    class Claimer:
        @hookimpl
        def zyx_match_graph(self, graph: Graph) -> list[Claim]:
            inputs = [(m.output, (m.a.node, m.b.node)) for m in matmuls(graph)]
            launches = [CustomLaunch(program, slots)]
            return [Claim(out, ins, "fake", lambda _: launches, (1 << 20,)) for out, ins in inputs]

    if program.replayer is None:
        return "skip: zyx-cuda's native module did not build"
    registry().plugin_manager.register(Claimer(), name="replayed-claim")
    x, y = (zyx.asarray(np.ones((64, 64), np.float32), device=device) for _ in range(2))
    # Raced (where no tuning cache holds the race's result), called, captured, and
    # launched in Python while the uploads of x and y are not yet seen complete (a wait on
    # another stream): then replayed in C.
    for _ in range(8):
        before = program.replayer.launched
        zyx.realize(x @ y)
        if program.replayer.launched > before:
            break
    assert program.replayer.launched, (zyx.stats(), calls, stand_ins.graph_calls)
    assert zyx.stats().claims_taken == 1 and 1 < len(calls) <= 3, (zyx.stats(), calls)
    called, python_launches = len(calls), stand_ins.graph_calls.count("cuGraphLaunch")
    stand_ins.graph_launches()  # taken: from here on it logs the launches below
    replayed = program.replayer.launched
    steps = []  # what each realize called and launched in Python, for a failure's message
    for _ in range(10):
        zyx.realize(x @ y)
        steps.append((len(calls), stand_ins.graph_calls.count("cuGraphLaunch")))
    seen = steps[-1]
    assert seen == (called, python_launches), (steps, called, calls, zyx.stats())
    assert len(stand_ins.graph_launches()) == program.replayer.launched - replayed == 10
    return "ok"


if __name__ == "__main__":
    modes = {"replay": replay_and_release, "native": replay_in_c, "claim": claim_replays}
    mode, *rest = sys.argv[1:] or ["capture"]
    print(modes.get(mode, capture_and_release)(*rest))
