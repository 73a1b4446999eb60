"""A stand-in CUDA driver, so that a ``CudaDevice`` opens and launches without a GPU.

``install()`` replaces every ``cuda.bindings.driver`` call zyx-cuda makes with a Python stub
that succeeds, and hands zyx-cuda's native module C stand-ins through ``cuGetProcAddress``.
It must run before ``zyx_cuda`` is imported (zyx-cuda binds the calls at import), so only
in a process of its own (``run_stubbed``): ``benchmarks/launch_overhead.py`` measures zyx's
own time per launch with it, ``test_cuda_launcher.py`` runs the native launcher against the
Python one with it, ``test_cuda_launch_args.py`` checks the launch paths' arguments.

Each stream gets its own handle, and every launch, through cuda-python or the native module,
is logged with its function, grid, stream and ``kernelParams`` address (a launch without a
work-group fails, logged, as the driver refuses it: CUDA_ERROR_INVALID_VALUE; one while
another context is current fails unlogged: CUDA_ERROR_INVALID_HANDLE); every
``cuStreamWaitEvent`` with its stream; every CUDA graph and stream capture call through
cuda-python by its name; every ``cuGraphLaunch`` of the native module with its graph exec
and stream, while launches are logged (one of the graph ``refuse_graph`` named fails
unlogged: CUDA_ERROR_INVALID_VALUE; one in another context as a launch does); every
``cuStreamDestroy`` with its stream.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from itertools import count
from pathlib import Path
from typing import Any

from hermetic import clean_environ

CONTEXT = 1
"""The handle of the one context (``cuDevicePrimaryCtxRetain``, ``cuCtxGetCurrent``)."""

Launch = tuple[int, int, int, int, int, int]
"""``(function, gx, gy, gz, stream, params)`` of one launch."""
_WIDTH = 6

_ATTRIBUTES = {
    "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0, "MULTIPROCESSOR_COUNT": 132,
    "CLOCK_RATE": 1_980_000, "MAX_REGISTERS_PER_BLOCK": 65536, "MAX_GRID_DIM_X": 2**31 - 1,
    "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535, "MAX_THREADS_PER_BLOCK": 1024,
    "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64,
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448, "WARP_SIZE": 32,
}  # fmt: skip

_STAND_INS = f"""
#include <stdint.h>
#define LOG 4096
static uint64_t logged[LOG][{_WIDTH}], graphs[LOG][2], refused = 0;
static int count = 0, graph_count = 0, recording = 0;
static void *current = (void *){CONTEXT};
int launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
           unsigned bz, unsigned shared, void *stream, void **params, void **extra) {{
    if (current != (void *){CONTEXT})  /* zyx's streams and functions are not that context's */
        return 400;  /* CUDA_ERROR_INVALID_HANDLE */
    if (recording && count < LOG) {{
        uint64_t *entry = logged[count++];
        entry[0] = (uint64_t)f, entry[1] = gx, entry[2] = gy, entry[3] = gz;
        entry[4] = (uint64_t)stream, entry[5] = (uint64_t)params;
    }}
    return gx && gy && gz ? 0 : 1;
}}
int graph_launch(void *graph, void *stream) {{
    if (current != (void *){CONTEXT})
        return 400;
    if ((uint64_t)graph == refused)
        return 1;  /* CUDA_ERROR_INVALID_VALUE */
    if (recording && graph_count < LOG)
        graphs[graph_count][0] = (uint64_t)graph, graphs[graph_count++][1] = (uint64_t)stream;
    return 0;
}}
void refuse_graph(uint64_t graph) {{ refused = graph; }}
int take_graphs(uint64_t *out, int most) {{
    int n = graph_count < most ? graph_count : most;
    for (int i = 0; i < n; i++)
        out[2 * i] = graphs[i][0], out[2 * i + 1] = graphs[i][1];
    graph_count = 0;
    return n;
}}
int current_context(void **context) {{ *context = current; return 0; }}
void set_current(void *context) {{ current = context; }}
int success(void) {{ return 0; }}
void record(int on) {{ recording = on; }}
int take(uint64_t *out, int most) {{
    int n = count < most ? count : most;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < {_WIDTH}; j++)
            out[i * {_WIDTH} + j] = logged[i][j];
    count = 0;
    return n;
}}
"""


class StandIns:
    """The C stand-ins: ``cuLaunchKernel`` and ``cuGraphLaunch`` (logging),
    ``cuCtxGetCurrent`` (the context ``cuCtxSetCurrent`` or ``make_current`` made current
    last), and success."""

    def __init__(self) -> None:
        self.waits: list[int] = []
        """The streams that ``cuStreamWaitEvent`` made wait, in order."""
        self.graph_calls: list[str] = []
        """The CUDA graph and stream capture calls made, by name, in order."""
        self.destroyed: list[int] = []
        """The streams that ``cuStreamDestroy`` destroyed, in order."""
        self.contexts: list[tuple[str, int]] = []
        """``(call, context current then)`` of every ``cuModuleLoadData`` and ``cuMemAlloc``."""
        folder = Path(tempfile.mkdtemp(prefix="zyx-stub-driver-"))
        (folder / "stub.c").write_text(_STAND_INS)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(folder / "stub.c"), "-o",
                        str(folder / "stub.so")], check=True)  # fmt: skip
        self.library = ctypes.CDLL(str(folder / "stub.so"))

    def address(self, symbol: bytes) -> int:
        """The stand-in for the driver's entry point ``symbol``."""
        names = {
            b"cuLaunchKernel": "launch",
            b"cuCtxGetCurrent": "current_context",
            b"cuGraphLaunch": "graph_launch",
        }
        function = getattr(self.library, names.get(symbol, "success"))
        return ctypes.cast(function, ctypes.c_void_p).value or 0

    def make_current(self, context: int) -> None:
        """Make ``context`` current, as another library's ``cuCtxSetCurrent`` would."""
        self.library.set_current(ctypes.c_void_p(context))

    def current(self) -> int:
        """The context current now."""
        found = ctypes.c_void_p()
        self.library.current_context(ctypes.byref(found))
        return found.value or 0

    def record(self, on: bool) -> None:
        """Log launches from now on (or stop)."""
        self.library.record(int(on))

    def launches(self) -> list[Launch]:
        """The launches logged since the last call."""
        out = (ctypes.c_uint64 * (4096 * _WIDTH))()
        n = self.library.take(out, 4096)
        return [tuple(out[i * _WIDTH : (i + 1) * _WIDTH]) for i in range(n)]  # type: ignore[misc]

    def graph_launches(self) -> list[tuple[int, int]]:
        """``(graph exec, stream)`` of the native module's graph launches logged since the
        last call (cuda-python's are in ``graph_calls``)."""
        out = (ctypes.c_uint64 * (4096 * 2))()
        n = self.library.take_graphs(out, 4096)
        return [(out[2 * i], out[2 * i + 1]) for i in range(n)]

    def refuse_graph(self, graph: int) -> None:
        """Make the native module's launches of ``graph`` fail from now on."""
        self.library.refuse_graph(ctypes.c_uint64(graph))


@cache
def stand_ins() -> StandIns:
    return StandIns()


def install() -> StandIns:
    """Replace the driver calls zyx-cuda makes; returns the stand-ins."""
    from cuda.bindings import driver

    assert "zyx_cuda" not in sys.modules, "stub the driver before zyx_cuda binds its calls"
    ok = driver.CUresult.CUDA_SUCCESS
    native = stand_ins()
    addresses = iter(range(1 << 32, 1 << 40, 1 << 20))
    handles: Iterator[int] = count(100)

    def attribute(attr: Any, device: Any) -> tuple[Any, int]:
        return ok, _ATTRIBUTES[attr.name.removeprefix("CU_DEVICE_ATTRIBUTE_")]

    def handle(*args: Any) -> tuple[Any, int]:
        return ok, next(handles)

    def in_context(call: str, result: tuple[Any, int]) -> tuple[Any, int]:
        native.contexts.append((call, native.current()))
        return result

    def done(*args: Any) -> tuple[Any]:
        return (ok,)

    python_launch = ctypes.CFUNCTYPE(
        ctypes.c_int, *[ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    )(native.address(b"cuLaunchKernel"))

    def launch_kernel(f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                      shared: int, stream: Any, params: int, extra: Any) -> tuple[Any]:  # fmt: skip
        result = python_launch(int(f), gx, gy, gz, bx, by, bz, shared, int(stream), params, None)
        return (driver.CUresult(result),)

    stubs: dict[str, Callable[..., Any]] = {
        "cuGetProcAddress": lambda symbol, version, flags: (ok, native.address(symbol), 0),
        "cuDeviceGetAttribute": attribute,
        "cuDeviceGetName": lambda size, device: (ok, b"Stubbed H200\0"),
        "cuDeviceTotalMem": lambda device: (ok, 141 << 30),
        "cuDeviceGetCount": lambda: (ok, 1),
        "cuDriverGetVersion": lambda: (ok, 13000),  # the tuning cache's key reads it
        "cuMemGetInfo": lambda: (ok, 140 << 30, 141 << 30),
        "cuMemAlloc": lambda nbytes: in_context("cuMemAlloc", (ok, next(addresses))),
        "cuPointerGetAttribute": lambda attribute, pointer: (ok, 0),  # pageable host memory
        "cuEventElapsedTime": lambda start, end: (ok, 0.001),
        "cuLaunchKernel": launch_kernel,
        "cuDevicePrimaryCtxRetain": lambda device: (ok, CONTEXT),
        "cuGetErrorString": lambda result: (ok, b"stubbed"),
    }
    for name in ("cuInit", "cuDeviceGet", "cuStreamCreate", "cuEventCreate",
                 "cuModuleGetFunction"):  # fmt: skip
        stubs[name] = handle
    stubs["cuModuleLoadData"] = lambda image: in_context("cuModuleLoadData", handle())
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    stubs["cuMemHostAlloc"] = lambda nbytes, flags: (ok, libc.malloc(nbytes))  # staging's slots
    stubs["cuMemFreeHost"] = lambda pointer: (libc.free(pointer), ok)[1:]

    def wait_event(stream: Any, event: Any, flags: int) -> tuple[Any]:
        native.waits.append(int(stream))
        return (ok,)

    stubs["cuStreamWaitEvent"] = wait_event

    def set_current(context: Any) -> tuple[Any]:
        native.make_current(int(context))
        return (ok,)

    stubs["cuCtxSetCurrent"] = set_current
    stubs["cuCtxGetCurrent"] = lambda: (ok, native.current())
    pushed: list[int] = []

    def push_current(context: Any) -> tuple[Any]:
        pushed.append(native.current())
        native.make_current(int(context))
        return (ok,)

    def pop_current() -> tuple[Any, int]:
        popped = native.current()
        native.make_current(pushed.pop())
        return ok, popped

    stubs["cuCtxPushCurrent"] = push_current
    stubs["cuCtxPopCurrent"] = pop_current

    def destroy_stream(stream: Any) -> tuple[Any]:
        native.destroyed.append(int(stream))
        return (ok,)

    stubs["cuStreamDestroy"] = destroy_stream

    def graph_call(name: str, returns: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            native.graph_calls.append(name)
            for arg in args:  # a kernel node without a work-group, as the driver refuses it
                if isinstance(arg, driver.CUDA_KERNEL_NODE_PARAMS) and not (
                    arg.gridDimX and arg.gridDimY and arg.gridDimZ
                ):
                    return (driver.CUresult.CUDA_ERROR_INVALID_VALUE,)
            return returns(*args)

        return call

    for name in ("cuGraphCreate", "cuGraphAddEmptyNode", "cuGraphAddKernelNode",
                 "cuGraphInstantiate", "cuGraphAddChildGraphNode",
                 "cuStreamEndCapture"):  # fmt: skip
        stubs[name] = graph_call(name, handle)
    for name in ("cuGraphExecKernelNodeSetParams", "cuGraphLaunch", "cuGraphExecDestroy",
                 "cuGraphDestroy", "cuGraphExecChildGraphNodeSetParams",
                 "cuStreamBeginCapture"):  # fmt: skip
        stubs[name] = graph_call(name, done)
    for name in ("cuEventRecord", "cuEventQuery",
                 "cuStreamSynchronize", "cuEventSynchronize", "cuMemFree", "cuModuleUnload",
                 "cuFuncSetAttribute", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
                 "cuMemcpyDtoDAsync"):  # fmt: skip
        stubs[name] = done
    for name, stub in stubs.items():
        setattr(driver, name, stub)
    return native


def run_stubbed(script: Path, *args: str) -> str:
    """The output of ``script`` (which calls ``install``) run with ``args`` in a Python of its
    own, without the developer's ``ZYX_*`` variables (it reads no config file, and keeps the
    caches of compiled modules and kernels); the test fails where it exits with an error."""
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_environ(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
