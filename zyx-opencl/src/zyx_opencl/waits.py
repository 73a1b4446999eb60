"""Waiting for OpenCL events so that Ctrl-C still ends the wait.

A driver's wait (``clWaitForEvents``, ``clFinish``, a blocking read) holds its thread in C,
where Python runs no signal handler: a read behind a kernel of minutes ignored Ctrl-C, and
only SIGKILL ended it. Python raises ``KeyboardInterrupt`` in the main thread only, so
there ``wait`` hands the driver's wait to a helper thread and waits for that in Python, on
a lock, which a signal interrupts at once. The events stay where the scheduler keeps them
(its marks), so an interrupted wait leaves the device usable: the work goes on, and the
next sync point waits for it. Elsewhere (any other thread) the driver waits directly.

The helper calls the ICD loader's ``clWaitForEvents`` through ctypes, not pyopencl: a
daemon thread that wakes while the interpreter exits leaves the process, and out of
pyopencl's C++ that aborted it (``std::terminate``, one run in five after an interrupted
read). Where the wait failed, the caller waits again through pyopencl (at once: the events
are settled) for its ``cl.Error``.

The hand-off costs two thread switches per sync point (tens of microseconds on a busy
CPU), never anything per launch.
"""

from __future__ import annotations

import ctypes
import queue
import threading
from collections.abc import Callable, Sequence
from functools import cache

import pyopencl as cl

from zyx_opencl.native import entry_point

_Job = tuple[Sequence[cl.Event], threading.Lock, list[bool]]

_WAIT_FOR_EVENTS = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p)
)
"""``clWaitForEvents``'s type; a ctypes call releases the GIL while it runs."""


def wait(events: Sequence[cl.Event]) -> None:
    """Until every one of ``events`` completed; ``cl.Error`` where one failed. In the main
    thread a signal's handler runs meanwhile (Ctrl-C raises ``KeyboardInterrupt``)."""
    if threading.current_thread() is threading.main_thread():
        waiter = _idle.pop() if _idle else _Waiter()
        done = threading.Lock()
        done.acquire()
        succeeded: list[bool] = []
        waiter.jobs.put((events, done, succeeded))
        done.acquire()  # a signal interrupts this, where Python runs its handler
        if succeeded[0]:
            return
    cl.wait_for_events(events)  # raises pyopencl's error of a failed one (settled by now)


class _Waiter:
    """A helper thread that runs the driver's waits handed to it, one at a time."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="zyx-opencl wait", daemon=True).start()

    def _serve(self) -> None:
        while True:
            events, done, succeeded = self.jobs.get()
            succeeded.append(_driver_wait(events))
            _idle.append(self)  # idle again before the waiter may ask for one
            done.release()
            del events, done, succeeded  # no event outlives its wait here


def _driver_wait(events: Sequence[cl.Event]) -> bool:
    """Wait in the ICD loader's ``clWaitForEvents``; whether every event completed. Without
    the loader, through pyopencl (whose C++ aborts a process exiting meanwhile)."""
    call = _loader_wait()
    if call is None:
        try:
            cl.wait_for_events(events)
        except cl.Error:
            return False
        return True
    handles = (ctypes.c_void_p * len(events))(*(event.int_ptr for event in events))
    return call(len(events), handles) == 0


@cache
def _loader_wait() -> Callable[[int, ctypes.Array[ctypes.c_void_p]], int] | None:
    address = entry_point("clWaitForEvents")
    return None if address is None else _WAIT_FOR_EVENTS(address)


_idle: list[_Waiter] = []
"""Helper threads with nothing to wait for. A wait interrupted by Ctrl-C keeps its helper
busy until its events complete; the next wait then starts another."""
