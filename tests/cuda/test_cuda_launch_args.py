"""Every CUDA launch path checks its arguments before any native call, and launches nothing
where a launch has no work-group.

On the stand-in driver (``stub_driver``, in a process of its own), which logs launches and
graph calls and, as the driver does, refuses a launch or kernel node without a work-group.
The paths: the native ``Launcher`` (a first launch, and launches that repeat the packed
arguments), the Python path alone (``schedule``), ``launch_timed``, and recordings
(``GraphRecording``: its launches, ``set_arg`` and replays). Needs a C compiler, no GPU.
"""

from __future__ import annotations

import gc
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from stub_driver import StandIns, run_stubbed

if TYPE_CHECKING:
    from zyx.backend import Arg
    from zyx.ir import Kernel
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.program import KernelProgram

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH"),
]

HERE = Path(__file__).parent
N = 1000
I32 = "an int in [-2147483648, 2147483647]"


def stubbed(check: str) -> None:
    out = run_stubbed(Path(__file__), check)
    if out.startswith("skip:"):
        pytest.skip(out)
    assert out == "ok\n", out


def test_none_is_refused_on_a_first_launch() -> None:
    """The argument block starts empty: ``None`` is no argument it already holds."""
    stubbed("none")


def test_ints_out_of_their_dtype_range_are_refused() -> None:
    stubbed("range")


def test_a_float_past_f32s_range_is_an_infinity() -> None:
    """As C converts it, and as the host and OpenCL backends pass it."""
    stubbed("overflow")


def test_a_launch_without_work_groups_launches_nothing() -> None:
    stubbed("empty")


def test_another_librarys_context_made_current_is_replaced_before_each_driver_use() -> None:
    """tinygrad makes a context of its own current on the calling thread: zyx's module loads,
    allocations and launches (native and Python paths) make zyx's current again first."""
    stubbed("foreign")


def test_graphs_without_work_groups_released_programs_and_failed_builds() -> None:
    stubbed("graphs")


# ---- in the stubbed process ----------------------------------------------------------------


def fill_kernel(groups: int | None = None) -> Kernel:
    """``out[i] = v`` for ``i < n``: params ``out`` (GlobalMut i32), ``v`` (i32), ``n``
    (i64); ``groups`` work-groups, else ``ceil(n / 32)`` (none for ``n = 0``)."""
    from zyx.dtypes import DType
    from zyx.ir import INDEX, KernelBuilder, ParamKind, ceil_div

    kb = KernelBuilder("fill")
    out = kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    v, n = kb.variable(DType.I32, "v"), kb.variable(INDEX, "n")
    i = kb.group(0, ceil_div(n, 32) if groups is None else groups) * 32 + kb.local(0, 32)
    with kb.if_(i < n):
        out[i] = v
    return kb.build()


Side = tuple["CudaDevice", "KernelProgram"]


def sides(kernel: Kernel | None = None) -> list[Side]:
    """``kernel`` (``fill_kernel()``) compiled on two devices: launched through the native
    ``Launcher``, and through the Python path (``schedule``) alone."""
    from zyx_cuda import program as programs
    from zyx_cuda.device import CudaDevice

    native, python = CudaDevice(0, queues=2), CudaDevice(0, queues=2)
    launcher_type = programs.launcher_type
    programs.launcher_type = lambda: None  # type: ignore[assignment]
    try:
        plain = python.compile(kernel or fill_kernel())
    finally:
        programs.launcher_type = launcher_type
    stepped = native.compile(kernel or fill_kernel())
    assert stepped.launcher is not None and plain.launcher is None
    return [(native, stepped), (python, plain)]


def refused(call: Callable[..., Any], *args: Any) -> str:
    """The message of the IncorrectKernelArg that ``call(*args)`` raises."""
    from zyx.errors import BackendError, ErrorStatus

    try:
        call(*args)
    except BackendError as error:
        assert error.status is ErrorStatus.INCORRECT_KERNEL_ARG, error
        return str(error)
    raise AssertionError(f"{call.__name__}{args} was not refused")


def check_none(stand_ins: StandIns) -> None:
    # A fixed grid too: a symbolic one starts at zero work-groups, which no path launches.
    for device, program in sides() + sides(fill_kernel(groups=4)):
        a = device.pool.allocate(4 * N)
        cases: Sequence[Sequence[Arg | None]] = (
            [a, None, None], [a, 5, None], [a, None, N], [None, 5, N], [None, None, None],
        )  # fmt: skip
        for args in cases:
            refused(device.launch, program, args)
        assert stand_ins.launches() == []
        device.launch(program, [a, 5, N])
        assert len(stand_ins.launches()) == 1


def check_range(stand_ins: StandIns) -> None:
    messages = []
    for device, program in sides():
        a = device.pool.allocate(4 * N)
        device.launch(program, [a, 5, N])  # packed: the native path repeats from here
        stand_ins.launches()
        bad = [refused(device.launch, program, [a, v, N]) for v in (1 << 40, -(1 << 31) - 1)]
        bad.append(refused(device.launch, program, [a, 5, 1 << 63]))
        bad.append(refused(device.launch_timed, program, [a, 1 << 40, N]))
        assert all(I32 in message for message in bad[:2] + bad[3:]), bad
        rec = device.record()
        bad.append(refused(rec.launch, program, [a, 1 << 31, N]))
        rec.launch(program, [a, 5, N])
        bad.append(refused(rec.set_arg, 0, 1, 1 << 40))
        assert rec.launches[0][1] == [a, 5, N]
        assert stand_ins.launches() == [] and stand_ins.graph_calls == []
        messages.append(bad)
    assert messages[0] == messages[1]  # the same message on either path


def check_overflow(stand_ins: StandIns) -> None:
    import ctypes
    import math

    from zyx.dtypes import DType
    from zyx.ir import KernelBuilder, ParamKind

    kb = KernelBuilder("scale")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    v = kb.variable(DType.F32, "v")
    i = kb.local(0, 32)
    out[i] = out[i] * v
    for device, program in sides(kb.build()):
        a = device.pool.allocate(4 * 32)
        for value, want in ((1e300, math.inf), (-1e300, -math.inf), (0.1, 0.10000000149011612)):
            device.launch(program, [a, value])
            ((*_, params),) = stand_ins.launches()
            slot = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))[1]
            assert ctypes.c_float.from_address(slot).value == want, (value, want)


def check_empty(stand_ins: StandIns) -> None:
    for device, program in sides():
        a = device.pool.allocate(4 * N)
        issued = list(device.streams.issued)
        device.launch(program, [a, 5, 0])  # a first launch
        device.launch(program, [a, 5, 0])  # a repeat: the native Launcher's to run
        assert device.streams.issued == issued  # not even a command on a stream
        device.launch_timed(program, [a, 6, 0])
        assert stand_ins.launches() == []
        device.launch(program, [a, 5, N])
        device.launch(program, [a, 5, 0])
        device.launch(program, [a, 5, N])
        assert [launch[1:4] for launch in stand_ins.launches()] == [(32, 1, 1)] * 2


def check_graphs(stand_ins: StandIns) -> None:
    from cuda.bindings import driver

    from zyx.errors import BackendError, ErrorStatus

    device, program = sides()[0]
    calls = stand_ins.graph_calls
    seen = 0

    def since() -> list[str]:
        """The graph calls made since the last call."""
        nonlocal seen
        new, seen = calls[seen:], len(calls)
        return new

    a, b = device.pool.allocate(4 * N), device.pool.allocate(4 * N)
    rec = device.record()
    rec.launch(program, [a, 5, 0])  # no work-group: an empty node
    rec.launch(program, [b, 6, N])
    rec.replay()
    create, instantiate, launch = ["cuGraphCreate"], ["cuGraphInstantiate"], ["cuGraphLaunch"]
    empty, kernel = ["cuGraphAddEmptyNode"], ["cuGraphAddKernelNode"]
    assert since() == [*create, *empty, *kernel, *instantiate, *launch], calls
    rec.set_arg(1, 1, 7)  # its node is updated in place
    rec.replay()
    set_node, discard = ["cuGraphExecKernelNodeSetParams"], ["cuGraphExecDestroy", "cuGraphDestroy"]
    assert since() == [*set_node, *launch], calls
    c = device.pool.allocate(4 * N)
    rec.set_arg(1, 0, c)  # a buffer no other launch uses: in place too, as zyx.jit rebinds
    rec.replay()
    assert since() == [*set_node, *launch], calls
    device.pool.release(b)  # in the graph no longer: its replays go on
    rec.replay()
    assert since() == launch, calls
    rec.set_arg(1, 0, a)  # launch 1 writes launch 0's buffer now: an edge, so built again
    rec.replay()
    assert since() == [*discard, *create, *empty, *kernel, *instantiate, *launch], calls
    rec.set_arg(1, 0, c)
    rec.replay()
    assert since() == [*discard, *create, *empty, *kernel, *instantiate, *launch], calls
    rec.set_arg(0, 2, N)  # launch 0 gains work-groups: a kernel node in place of the empty
    rec.set_arg(1, 2, 0)  # launch 1 loses them
    rec.replay()
    assert since() == [*discard, *create, *kernel, *empty, *instantiate, *launch], calls

    working = driver.cuGraphInstantiate
    driver.cuGraphInstantiate = lambda graph, flags: (driver.CUresult.CUDA_ERROR_INVALID_VALUE,)
    rec.set_arg(1, 2, N)
    try:
        rec.replay()
        raise AssertionError("a failed cuGraphInstantiate was not raised")
    except BackendError as error:
        assert error.status is ErrorStatus.KERNEL_LAUNCH, error
    finally:
        driver.cuGraphInstantiate = working
    assert "cuGraphLaunch" not in since()
    assert calls.count("cuGraphCreate") == calls.count("cuGraphDestroy"), calls  # none leaked
    rec.replay()  # built afresh
    assert since() == [*create, *kernel, *kernel, *instantiate, *launch], calls

    device.release(program)
    assert "was released" in refused(rec.replay)
    assert since() == [] and stand_ins.launches() == []

    from stub_driver import CONTEXT

    stand_ins.make_current(CONTEXT + 1)  # another library's, on this thread
    del rec  # a dropped recording gives its graph back, and leaves the current context
    gc.collect()
    assert since() == discard and stand_ins.current() == CONTEXT + 1, calls


def check_foreign(stand_ins: StandIns) -> None:
    from stub_driver import CONTEXT

    foreign = CONTEXT + 1
    for device, program in sides():
        stand_ins.make_current(foreign)
        device.compile(fill_kernel(groups=3))
        stand_ins.make_current(foreign)
        a = device.pool.allocate(4 * N + 4)
        assert stand_ins.contexts[-2:] == [("cuModuleLoadData", CONTEXT), ("cuMemAlloc", CONTEXT)]
        for _ in range(3):  # a first launch, then repeats (the native Launcher's own)
            stand_ins.make_current(foreign)
            device.launch(program, [a, 5, N])
            assert stand_ins.current() == CONTEXT
        device.synchronize()
        assert len(stand_ins.launches()) == 3


CHECKS = {
    "none": check_none, "range": check_range, "overflow": check_overflow, "empty": check_empty,
    "graphs": check_graphs, "foreign": check_foreign,
}  # fmt: skip


def main(check: str) -> str:
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    stand_ins = install()
    from zyx_cuda.native import launcher_type

    if launcher_type() is None:
        return "skip: zyx-cuda's native module did not build"
    stand_ins.record(True)
    CHECKS[check](stand_ins)
    return "ok"


if __name__ == "__main__":
    print(main(sys.argv[1]))
