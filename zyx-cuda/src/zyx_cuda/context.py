"""A device's primary context, made current on the calling thread only when it is not.

zyx uses the primary context, the one the CUDA runtime (and so torch and cupy) uses too,
so pointers and streams are shared with them without any translation. Which context is
current is per thread; each thread remembers which of zyx's contexts it made current last,
so the hot path pays a thread-local lookup instead of a driver call. (A library that makes
another device's context current behind zyx's back on the same thread defeats that memo:
call ``Context.activate(force=True)`` after it.)
"""

from __future__ import annotations

import threading

from cuda.bindings import driver

from zyx.errors import ErrorStatus
from zyx_cuda.errors import check, cuda_error


class _Current(threading.local):
    context: Context | None = None
    """The context zyx made current on this thread last."""


current_context = _Current()
"""Per thread, the context zyx made current last (``.context``)."""


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
        self._peers: dict[int, bool] = {}

    def activate(self, *, force: bool = False) -> None:
        """Make this context current on the calling thread."""
        if force or current_context.context is not self:
            check(
                ErrorStatus.INITIALIZATION, "cuCtxSetCurrent", driver.cuCtxSetCurrent(self.handle)
            )
            current_context.context = self

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
