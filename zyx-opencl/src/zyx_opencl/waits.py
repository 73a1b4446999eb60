"""Waiting for OpenCL events so that Ctrl-C still ends the wait.

A driver's wait (``clWaitForEvents``, ``clFinish``, a blocking read) holds its thread in C,
where Python runs no signal handler: a read behind a kernel of minutes ignored Ctrl-C, and
only SIGKILL ended it. Python raises ``KeyboardInterrupt`` in the main thread only, so
there ``wait`` hands the driver's wait to a helper thread and waits for that in Python, on
a lock, which a signal interrupts at once. The events stay where the scheduler keeps them
(its marks), so an interrupted wait leaves the device usable: the work goes on, and the
next sync point waits for it. Elsewhere (any other thread) the driver waits directly.

The hand-off costs two thread switches per sync point (tens of microseconds on a busy
CPU), never anything per launch.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence

import pyopencl as cl

_Job = tuple[Sequence[cl.Event], threading.Lock, list[BaseException]]


def wait(events: Sequence[cl.Event]) -> None:
    """Until every one of ``events`` completed; ``cl.Error`` where one failed. In the main
    thread a signal's handler runs meanwhile (Ctrl-C raises ``KeyboardInterrupt``)."""
    if threading.current_thread() is not threading.main_thread():
        cl.wait_for_events(events)
        return
    waiter = _idle.pop() if _idle else _Waiter()
    done = threading.Lock()
    done.acquire()
    failed: list[BaseException] = []
    waiter.jobs.put((events, done, failed))
    done.acquire()  # a signal interrupts this, where Python runs its handler
    if failed:
        raise failed[0]


class _Waiter:
    """A helper thread that runs the driver's waits handed to it, one at a time."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="zyx-opencl wait", daemon=True).start()

    def _serve(self) -> None:
        while True:
            events, done, failed = self.jobs.get()
            try:
                cl.wait_for_events(events)
            except BaseException as error:  # noqa: BLE001 - the waiting thread raises it
                failed.append(error)
            _idle.append(self)  # idle again before the waiter may ask for one
            done.release()
            # Hold no event past its wait: one held here while the thread sat idle aborted
            # the process at exit (std::terminate in pyopencl, after an interrupted read).
            del events, done, failed


_idle: list[_Waiter] = []
"""Helper threads with nothing to wait for. A wait interrupted by Ctrl-C keeps its helper
busy until its events complete; the next wait then starts another."""
