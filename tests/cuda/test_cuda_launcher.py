"""zyx-cuda's native ``Launcher`` decides every launch as the Python launch path does.

Two devices on the stand-in driver (``stub_driver``, in a process of its own), one whose
programs launch through the native ``Launcher``, one through the Python path
(``KernelProgram.schedule``) only, replay the same random commands: launches that repeat
or change their buffers and scalars, in lists and tuples, in-place and cross-stream
hazards, writes, releases and reallocations (some smaller than the kernels reach: both
paths refuse those launches, ``zyx.ir.extent``), launches of released buffers and with bad
arguments, synchronizes. After each command both must have launched the same kernel with
the same grid and argument slots on the same stream after the same cross-stream waits,
kept the same sequence numbers, loads and access records, and raised the same errors; and
both paths must have run often.
Needs a C compiler, no GPU.
"""

from __future__ import annotations

import ctypes
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from stub_driver import run_stubbed

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH"),
]

HERE = Path(__file__).parent
BUFFERS = 6
N = 1000


def test_native_launches_match_the_python_path() -> None:
    out = run_stubbed(Path(__file__), "2000")
    assert "launched in C" in out, out


def replay(steps: int, seed: int = 7) -> str:
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    stand_ins = install()
    from zyx_cuda import program as programs
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.native import launcher_type

    if launcher_type() is None:
        return "skip: zyx-cuda's native module did not build"
    native, python = Side(CudaDevice(0, queues=4)), Side(CudaDevice(0, queues=4))
    # The Python side's programs get no Launcher.
    programs.launcher_type = lambda: None  # type: ignore[assignment]
    python.compile()
    programs.launcher_type = launcher_type
    native.compile()
    stand_ins.record(True)
    rng = random.Random(seed)
    refused = 0
    for step in range(steps):
        commands = ["lcg"] * 5 + ["inplace"] * 2 + ["write", "release", "sync", "bad", "shrink"]
        command = rng.choice(commands)
        j, k, o = (rng.randrange(BUFFERS) for _ in range(3))
        steps_arg = rng.choice([1, 2, 3])
        as_tuple = rng.random() < 0.2
        outcomes = []
        for side in (native, python):
            outcomes.append(side.run(command, j, k, o, steps_arg, as_tuple))
            outcomes.append(side.view(stand_ins.launches(), stand_ins.waits))
            stand_ins.waits.clear()
        assert outcomes[0::2] == [outcomes[0]] * 2, f"step {step} {command}: {outcomes}"
        assert outcomes[1] == outcomes[3], f"step {step} {command}: {outcomes[1::2]}"
        refused += "reaches index" in outcomes[0]
    launched = sum(program.launcher.launched for program in native.programs)
    launches = native.launches
    # Both paths taken, each often: hazards and new scalars need the Python path.
    assert launches // 10 < launched < launches - launches // 10, (launched, launches)
    assert refused > steps // 100, refused  # launches over the shrunk buffers
    return f"{launched} of {launches} launches launched in C"


class Side:
    """One device and its buffers, driven by the replay."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.pool = device.pool
        self.bufs = [self.pool.allocate(4 * N) for _ in range(BUFFERS)]
        self.launches = 0

    def compile(self) -> None:
        from lcg import lcg_kernel

        from zyx.dtypes import DType
        from zyx.ir import KernelBuilder, ParamKind

        kb = KernelBuilder("inplace")
        x = kb.param(DType.U32, ParamKind.GLOBAL_MUT)
        i = kb.local(0, 32)
        x[i] = x[i] + 1
        self.lcg = self.device.compile(lcg_kernel())
        self.inplace = self.device.compile(kb.build())
        self.programs = [self.lcg, self.inplace]

    def run(self, command: str, j: int, k: int, o: int, steps: int, as_tuple: bool) -> str:
        """Run one command; what it raised, if anything."""
        bufs = self.bufs
        try:
            if command == "lcg":
                args = [bufs[j], bufs[k], bufs[o], steps, N]
                self.launches += 1
                self.device.launch(self.lcg, tuple(args) if as_tuple else args)
            elif command == "inplace":
                self.launches += 1
                self.device.launch(self.inplace, [bufs[o]])
            elif command == "write":
                self.pool.write(bufs[j], bytes(4 * N))
            elif command == "release":
                self.pool.release(bufs[j])
                if not as_tuple:  # else launches may meet the released buffer
                    bufs[j] = self.pool.allocate(4 * N)
            elif command == "shrink":  # too small for n elements, and for 32 at k == 0
                self.pool.release(bufs[j])
                bufs[j] = self.pool.allocate(4 * (N - 1) if k else 4 * 31)
            elif command == "sync":
                self.device.synchronize()
            elif command == "bad":  # a wrong count, a float for an int, out of int64 range
                bad = [[bufs[j], bufs[k]], [bufs[j], bufs[k], bufs[o], 1.5, N]]
                bad.append([bufs[j], bufs[k], bufs[o], 1 << 70, N])
                self.device.launch(self.lcg, bad[steps % 3])
        except Exception as error:  # noqa: BLE001  # compared between the sides
            if command == "release":
                bufs[j] = self.pool.allocate(4 * N)
            return f"{type(error).__name__}: {error}"
        return "ok"

    def view(self, launches: list[Any], waits: list[int]) -> tuple[Any, ...]:
        """The launches, the streams that waited, and the scheduling state, with handles
        replaced by indices."""
        handles = {buf.handle: i for i, buf in enumerate(self.bufs)}
        streams = [int(handle) for handle in self.device.streams.handles]
        functions = [int(program.function) for program in self.programs]
        seen = []
        for f, *grid, stream, params in launches:
            program = self.programs[functions.index(f)]
            # One launch per command: the block still holds what it launched with.
            pointers = (ctypes.c_void_p * len(program.param_kinds)).from_address(params)
            slots = [ctypes.c_uint64.from_address(p or 0).value for p in pointers]
            seen.append(
                (program.name, grid, streams.index(stream), [handles.get(s, s) for s in slots])
            )
        records = []
        for buf in self.bufs:
            t = buf.tracking
            records.append(None if t is None else (t.writer_queue, t.writer, dict(t.readers)))
        streams_state = self.device.streams
        waited = [streams.index(stream) for stream in waits]
        issued, load = list(streams_state.issued), list(streams_state.tracker.load)
        return seen, waited, issued, load, records


if __name__ == "__main__":
    print(replay(int(sys.argv[1])))
