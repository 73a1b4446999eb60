"""Devices for testing what the front end generates, on any machine: the host with its
kernels run by the IR interpreter, which checks every load and store against its buffer
(a kernel that reads outside memory raises there; the compiled host would read a
neighbour's bytes and, where the value is masked, pass), and the same host dressed as a
GPU, so that the kernels checked are those laid out for a GPU.

Nothing these devices time means anything: they are ``interpreted``.
"""

from __future__ import annotations

from typing import Any

from zyx.backend import DeviceInfo
from zyx.dtypes import DType, DTypeCapability
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool


def checked_host() -> HostDevice:
    """The host, its kernels run by the bounds-checking IR interpreter."""
    return HostDevice(HostPool(), interpret=True)


def gpu_info(**features: Any) -> DeviceInfo:
    """A GPU's ``DeviceInfo``: warps of 32, groups of up to 1024 work-items, 64 KiB of local
    memory, and every dtype (``dtypes``, ``tensor_cores``, ``shuffle`` and the rest as
    ``features`` say). The IR's warp-level ops (``Mma``, ``LdMatrix``, ``Shuffle``) check
    their limits and meaning against it."""
    fields: dict[str, Any] = {
        "name": "gpu",
        "compute": 1e12,
        "max_global_work_dims": (2**31, 2**16, 2**16),
        "max_local_threads": 1024,
        "max_local_work_dims": (1024, 1024, 64),
        "local_mem_size": 1 << 16,
        "max_register_bytes": 1024,
        "preferred_vector_size": 16,
        "warp_size": 32,
        "global_mem_size": 2**30,
        "dtypes": {d: DTypeCapability.FULL for d in DType},
    }
    return DeviceInfo(**{**fields, **features})


class GpuShapedHost(HostDevice):
    """The checked host, dressed as a GPU (``gpu_info``: warps of 32, no shuffles): the
    front end lays its kernels out as for a GPU (``zyx.graph.lower``, not
    ``zyx.graph.cpu``: groups, local memory, barriers), and the interpreter runs them."""

    backend = "gpu-shaped"

    def __init__(self) -> None:
        super().__init__(HostPool(), interpret=True)
        self.info = gpu_info(global_mem_size=self.info.global_mem_size)

    @property
    def name(self) -> str:
        return "gpu-shaped host"
