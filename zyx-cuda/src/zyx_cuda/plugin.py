"""zyx-cuda's plugin: the hook implementations. Importing it loads no native library."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl
from zyx_cuda.config import CudaSection

if TYPE_CHECKING:
    from zyx.backend import Device

ZYX_PLUGIN_API = "1.0"

PRIORITY = 20
"""Above OpenCL's and the host's (0): where a GPU works through CUDA, it is the default."""


def probe() -> ProbeResult:
    from zyx_cuda.driver import probe as probe_driver

    return probe_driver()


def open_cuda(section: CudaSection) -> Sequence[Device]:
    """One device per selected ordinal (``device_ids``; ``None``: all, ``[]``: none)."""
    if section.device_ids == []:
        return []
    from zyx_cuda.device import open_devices
    from zyx_cuda.driver import initialize

    count = initialize()
    ordinals = range(count) if section.device_ids is None else section.device_ids
    return open_devices(ordinals, count, section.queues)


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [
        BackendSpec(name="cuda", config=CudaSection, probe=probe, open=open_cuda, priority=PRIORITY)
    ]
