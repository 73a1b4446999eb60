"""cuda-python's status codes as zyx ``BackendError``s.

cuda-python returns ``(status, *values)`` from every call instead of raising. ``check``
turns a failed status into a ``CudaError`` that names the call, the CUDA error's name and
its description; hot paths compare the status themselves and call ``cuda_error`` only on
failure.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver, nvrtc

from zyx.errors import BackendError, ErrorStatus


class CudaError(BackendError):
    """A CUDA driver or NVRTC call failed. ``result`` is the ``CUresult`` / ``nvrtcResult``."""

    def __init__(self, status: ErrorStatus, context: str, result: Any, *, log: str = "") -> None:
        super().__init__(status, context, log=log)
        self.result = result


def describe(result: Any) -> str:
    """``CUDA_ERROR_X (description)`` for a driver status, the NVRTC string for NVRTC's."""
    if isinstance(result, nvrtc.nvrtcResult):
        _, text = nvrtc.nvrtcGetErrorString(result)
        return str(text.decode())
    _, text = driver.cuGetErrorString(result)
    return f"{result.name} ({text.decode() if text else 'no description'})"


_R = driver.CUresult
KERNEL_FAULTS = frozenset({
    _R.CUDA_ERROR_ILLEGAL_ADDRESS, _R.CUDA_ERROR_MISALIGNED_ADDRESS, _R.CUDA_ERROR_LAUNCH_FAILED,
    _R.CUDA_ERROR_LAUNCH_TIMEOUT, _R.CUDA_ERROR_ILLEGAL_INSTRUCTION, _R.CUDA_ERROR_INVALID_PC,
    _R.CUDA_ERROR_INVALID_ADDRESS_SPACE, _R.CUDA_ERROR_HARDWARE_STACK_ERROR, _R.CUDA_ERROR_ASSERT,
})  # fmt: skip
"""Errors of a kernel that already ran. They surface at whatever call comes next, so they
are KernelSync whichever call reports them."""


def cuda_error(status: ErrorStatus, what: str, result: Any) -> CudaError:
    """The error to raise for ``result`` coming back from ``what`` (a plain int from the
    native launch is read as a ``CUresult``)."""
    if type(result) is int:
        result = driver.CUresult(result)
    if result in KERNEL_FAULTS:
        context = f"an earlier kernel failed: {describe(result)} (reported by {what})"
        return CudaError(ErrorStatus.KERNEL_SYNC, context, result)
    return CudaError(status, f"{what}: {describe(result)}", result)


def check(status: ErrorStatus, what: str, returned: tuple[Any, ...]) -> Any:
    """The value(s) of a cuda-python call's ``returned`` tuple; raises on a failed status.

    ``what`` names the call for the message. Returns ``None``, the single value, or the
    tuple of values.
    """
    result = returned[0]
    if result:
        raise cuda_error(status, what, result)
    if len(returned) == 1:
        return None
    return returned[1] if len(returned) == 2 else returned[1:]


def is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, CudaError) and error.result == driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY
