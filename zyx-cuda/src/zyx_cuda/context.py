"""A device's primary context, made current on the calling thread only when it is not.

zyx uses the primary context, the one the CUDA runtime (and so torch and cupy) uses too,
so pointers and streams are shared with them without any translation. Which context is
current is per thread, and another library may change it behind zyx's back (tinygrad makes
a context of its own current): so ``activate`` asks the driver which one is current
(``cuCtxGetCurrent``, through zyx-cuda's native module where it is built: a call of tens of
nanoseconds) rather than remembering which one zyx made current last, and sets its own
where it is not. A module loaded, a buffer allocated or a stream used in another library's
context would be wrong or refused (``CUDA_ERROR_INVALID_HANDLE``).
"""

from __future__ import annotations

from collections.abc import Callable

from cuda.bindings import driver

from zyx.errors import ErrorStatus
from zyx_cuda.errors import check, cuda_error
from zyx_cuda.native import current_function


def _current_by_binding() -> int:
    """The calling thread's current context through cuda-python (no native module)."""
    result, context = driver.cuCtxGetCurrent()
    return 0 if result or context is None else int(context)


class Context:
    """The primary context of device ``ordinal``, retained for the life of the process."""

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        # cuInit is idempotent and cheap once done; a Context may be the first driver use.
        check(ErrorStatus.INITIALIZATION, "cuInit", driver.cuInit(0))
        self.device = check(
            ErrorStatus.DEVICE_ENUMERATION, "cuDeviceGet", driver.cuDeviceGet(ordinal)
        )
        self.handle = check(
            ErrorStatus.INITIALIZATION,
            "cuDevicePrimaryCtxRetain",
            driver.cuDevicePrimaryCtxRetain(self.device),
        )
        self.address = int(self.handle)
        self._peers: dict[int, bool] = {}
        self._current: Callable[[], int] = current_function() or _current_by_binding

    def activate(self) -> None:
        """Make this context current on the calling thread, where it is not."""
        if self._current() != self.address:
            check(
                ErrorStatus.INITIALIZATION, "cuCtxSetCurrent", driver.cuCtxSetCurrent(self.handle)
            )

    def reach(self, peer: Context) -> bool:
        """Whether copies between this context's device and ``peer``'s go over the direct
        link (NVLink, PCIe peer to peer): where the hardware allows, peer access is enabled
        both ways on first use; without it the driver stages peer copies through the host.
        Leaves this context current."""
        if peer.ordinal not in self._peers:
            same = peer.ordinal == self.ordinal  # the same primary context: no link needed
            self._peers[peer.ordinal] = same or (self._enable(peer) and peer._enable(self))
        self.activate()
        return self._peers[peer.ordinal]

    def _enable(self, peer: Context) -> bool:
        """Let this context access ``peer``'s memory, where the hardware allows."""
        can = check(
            ErrorStatus.INITIALIZATION,
            "cuDeviceCanAccessPeer",
            driver.cuDeviceCanAccessPeer(self.device, peer.device),
        )
        if not can:
            return False
        self.activate()
        (result,) = driver.cuCtxEnablePeerAccess(peer.handle, 0)
        enabled = driver.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
        if result and result != enabled:
            raise cuda_error(ErrorStatus.INITIALIZATION, "cuCtxEnablePeerAccess", result)
        return True
