"""``ZYX_DEBUG=32`` on CUDA: with ``zyx.launch`` on for DEBUG, every launch path logs its
launches (program, stream, work-groups), a recording its replays, the pool its copies; a
program compiled while the logger was off keeps the native ``Launcher`` and logs nothing.

On the stand-in driver (``stub_driver``, in a process of its own), whose launch log says
which stream each launch ran on. Needs a C compiler, no GPU.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from stub_driver import StandIns, run_stubbed

if TYPE_CHECKING:
    from zyx.backend import Scalar
    from zyx.ir import Kernel

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH"),
]

HERE = Path(__file__).parent
N = 1000
GROUPS = "groups (32, 1, 1)"  # ceil(N / 32)


def test_launches_replays_and_copies_are_logged_when_the_logger_is_on() -> None:
    out = run_stubbed(Path(__file__))
    if out.startswith("skip:"):
        pytest.skip(out)
    assert out == "ok\n", out


# ---- in the stubbed process ----------------------------------------------------------------


class Lines(logging.Handler):
    """The messages logged, taken in turns."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def take(self) -> list[str]:
        lines, self.lines = self.lines, []
        return lines


def fill_kernel() -> Kernel:
    """``out[i] = v`` for ``i < n``: params ``out`` (GlobalMut i32), ``v`` (i32), ``n``."""
    from zyx.dtypes import DType
    from zyx.ir import INDEX, KernelBuilder, ParamKind, ceil_div

    kb = KernelBuilder("fill")
    out = kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    v, n = kb.variable(DType.I32, "v"), kb.variable(INDEX, "n")
    i = kb.group(0, ceil_div(n, 32)) * 32 + kb.local(0, 32)
    with kb.if_(i < n):
        out[i] = v
    return kb.build()


def check(stand_ins: StandIns) -> None:
    from zyx.dtypes import DType
    from zyx.ir import Param, ParamKind
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.library import LibraryProgram

    log, lines = logging.getLogger("zyx.launch"), Lines()
    log.addHandler(lines)
    device = CudaDevice(0, queues=2)
    pool, streams = device.pool, [int(handle) for handle in device.streams.handles]
    a, b = pool.allocate(4 * N), pool.allocate(4 * N)

    def launched() -> list[str]:
        """What the log should say of the launches the stand-in driver saw since last."""
        seen = stand_ins.launches()
        return [f"cuda:0: launch fill on stream {streams.index(s[4])}, {GROUPS}" for s in seen]

    quiet = device.compile(fill_kernel())  # the logger is off: the Launcher, no log
    assert quiet.launcher is not None, quiet.submit
    for _ in range(2):  # a first launch and a repeat (the Launcher's to run in C)
        device.launch(quiet, [a, 5, N])
    assert len(stand_ins.launches()) == 2 and lines.take() == []

    log.setLevel(logging.DEBUG)
    loud = device.compile(fill_kernel())
    assert loud.launcher is None, loud.submit  # no Launcher: its C path is silent
    device.launch(loud, [a, 5, N])
    device.launch(loud, [a, 5, N])
    device.launch(loud, [b, 6, N])
    device.launch(loud, [a, 5, 0])  # no work-group: nothing launched, nothing logged
    assert lines.take() == launched()
    device.launch_timed(loud, [a, 7, N])
    assert lines.take() == launched() == [f"cuda:0: launch fill on stream 0, {GROUPS}"]
    device.launch(quiet, [b, 5, N])  # decided at its compile: still silent
    assert lines.take() == [] and len(stand_ins.launches()) == 1

    rec = device.record()
    rec.launch(loud, [a, 5, N])
    rec.launch(loud, [b, 6, N])
    rec.replay()
    (replay,) = lines.take()
    assert replay.startswith("cuda:0: replay of fill, fill on stream "), replay

    calls: list[int] = []

    def library_call(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        calls.append(stream)

    params = [Param(DType.U32, ParamKind.GLOBAL_MUT), Param(DType.U32, ParamKind.VARIABLE)]
    library = LibraryProgram(device, "memset", params, library_call)
    device.launch(library, [a, 3])
    (call,) = calls
    assert lines.take() == [
        f"cuda:0: launch memset on stream {streams.index(call)}, groups (1, 1, 1)"
    ]

    pool.write(a, bytes(4 * N))
    pool.read(a, bytearray(4 * N))
    pool.copy_from(pool, a, b)
    wrote, read, copied = lines.take()
    assert wrote.startswith(f"cuda:0: write to {a.handle:#x}, {4 * N} bytes, on stream "), wrote
    assert read.startswith(f"cuda:0: read from {a.handle:#x}, {4 * N} bytes, on stream "), read
    copy = f"cuda:0: copy {a.handle:#x} to {b.handle:#x}, {4 * N} bytes, on stream "
    assert copied.startswith(copy), copied


def main() -> str:
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    stand_ins = install()
    from zyx_cuda.native import launcher_type

    if launcher_type() is None:
        return "skip: zyx-cuda's native module did not build"
    stand_ins.record(True)
    check(stand_ins)
    return "ok"


if __name__ == "__main__":
    print(main())
