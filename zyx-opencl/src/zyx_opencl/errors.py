"""OpenCL's failures as zyx ``BackendError``s.

pyopencl raises ``cl.Error`` (``call_failure``); the native enqueue returns a status
(``enqueue_failure``); an event ends in a negative status (``event_failure``). A window's
enqueue keeps whatever it raised to raise later (``backend_error``). Each names the
status, and a driver's out-of-memory becomes ``MemoryAllocation``.
"""

from __future__ import annotations

import pyopencl as cl

from zyx.errors import BackendError, ErrorStatus

_OUT_OF_MEMORY = frozenset({
    cl.status_code.MEM_OBJECT_ALLOCATION_FAILURE,
    cl.status_code.OUT_OF_RESOURCES,
    cl.status_code.OUT_OF_HOST_MEMORY,
})  # fmt: skip
"""Failures of memory a driver allocates lazily, at the first command that uses it."""

_STATUS_NAMES = {
    getattr(cl.status_code, name): name for name in dir(cl.status_code) if name.isupper()
}


def call_failure(status: ErrorStatus, error: cl.Error) -> BackendError:
    """The ``BackendError`` for an OpenCL call that raised ``error``."""
    return _error(status, getattr(error, "code", None), str(error))


def enqueue_failure(what: str, code: int) -> BackendError:
    """The error of a native enqueue that returned ``code``."""
    name = _STATUS_NAMES.get(code, str(code))
    return _error(ErrorStatus.KERNEL_SYNC, code, f"{what} failed: {name}")


def event_failure(code: int) -> BackendError:
    """The error of a command whose event ended in ``code``, a negative status."""
    name = _STATUS_NAMES.get(code, str(code))
    return _error(ErrorStatus.KERNEL_SYNC, code, f"a command ended in {name}")


def backend_error(status: ErrorStatus, error: Exception) -> BackendError:
    """``error`` as the ``BackendError`` a sync point raises: itself where it is one, else
    one of ``status`` chained to it."""
    if isinstance(error, BackendError):
        return error
    if isinstance(error, cl.Error):
        kept = call_failure(status, error)
    else:
        kept = BackendError(status, f"OpenCL: {type(error).__name__}: {error}")
    kept.__cause__ = error
    return kept


def _error(status: ErrorStatus, code: int | None, message: str) -> BackendError:
    # A lazily allocating driver reports out-of-memory at the first command using a buffer.
    if code in _OUT_OF_MEMORY:
        status = ErrorStatus.MEMORY_ALLOCATION
    return BackendError(status, f"OpenCL: {message}")
