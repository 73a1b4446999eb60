"""Finding and initializing the NVIDIA driver, for the plugin's probe and open.

Without a driver, cuda-python raises ``cuda.pathfinder.DynamicLibNotFoundError`` at the
first driver call; with a broken one, ``cuInit`` returns an error. Both become
``BackendError``s (DyLibNotFound, Initialization) chained to the cause, so the registry
quarantines the backend with the reason and everything else keeps working.
"""

from __future__ import annotations

from zyx.errors import BackendError, ErrorStatus
from zyx.hookspecs import ProbeResult


def initialize() -> int:
    """``cuInit`` the driver; returns how many devices it sees."""
    try:
        from cuda.bindings import driver
        from cuda.pathfinder import DynamicLibNotFoundError
    except ImportError as error:
        raise BackendError(
            ErrorStatus.DYLIB_NOT_FOUND, f"cuda-python is not installed ({error})"
        ) from error
    from zyx_cuda.errors import check

    try:
        check(ErrorStatus.INITIALIZATION, "cuInit", driver.cuInit(0))
    except DynamicLibNotFoundError as error:
        raise BackendError(ErrorStatus.DYLIB_NOT_FOUND, f"no NVIDIA driver: {error}") from error
    return int(check(ErrorStatus.DEVICE_ENUMERATION, "cuDeviceGetCount", driver.cuDeviceGetCount()))


def probe() -> ProbeResult:
    """Is there a driver, how many GPUs? Creates no context."""
    try:
        count = initialize()
    except BackendError as error:
        found = "not found" if error.status is ErrorStatus.DYLIB_NOT_FOUND else "found, unusable"
        return ProbeResult(available=False, reason=str(error), libraries={"libcuda": found})
    from cuda.bindings import driver

    from zyx_cuda.compiler import nvrtc_version

    version = int(driver.cuDriverGetVersion()[1])
    cuda = f"CUDA {version // 1000}.{version % 1000 // 10}"
    major, minor = nvrtc_version()
    return ProbeResult(
        available=count > 0,
        devices=count,
        reason="" if count else "the driver sees no GPU",
        libraries={"libcuda": cuda, "libnvrtc": f"NVRTC {major}.{minor}"},
    )
