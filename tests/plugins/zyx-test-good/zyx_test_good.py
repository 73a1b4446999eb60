"""A backend that works: ``good:0`` and ``good:1`` on host memory. It runs no kernels; it
exists to prove discovery, config sections and device strings with a real plugin."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import PositiveInt

from zyx.backend import Arg, Device, DeviceInfo, Program
from zyx.config import BackendSection
from zyx.errors import BackendError, ErrorStatus
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl
from zyx.host.pool import HostPool
from zyx.ir import Kernel

ZYX_PLUGIN_API = "1.0"


class GoodSection(BackendSection):
    devices: PositiveInt = 2


class GoodDevice(Device):
    backend = "good"

    def __init__(self, index: int) -> None:
        self.index = index
        self.pool = HostPool(capacity=1 << 20)
        self.info = DeviceInfo(
            name=f"test device {index}",
            compute=1e9,
            max_global_work_dims=(1024, 1024, 1024),
            max_local_threads=64,
            max_local_work_dims=(64, 64, 64),
            local_mem_size=0,
            max_register_bytes=0,
            preferred_vector_size=16,
            warp_size=1,
            global_mem_size=1 << 20,
        )

    def compile(self, kernel: Kernel) -> Program:
        raise BackendError(ErrorStatus.KERNEL_COMPILATION, "the test backend compiles nothing")

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        raise BackendError(ErrorStatus.KERNEL_LAUNCH, "the test backend launches nothing")

    def launch_timed(self, program: Program, args: Sequence[Arg]) -> int:
        raise BackendError(ErrorStatus.KERNEL_LAUNCH, "the test backend launches nothing")

    def synchronize(self) -> None:
        pass


def probe() -> ProbeResult:
    return ProbeResult(available=True, devices=2, libraries={"libgood.so": "/opt/good/libgood.so"})


def open_good(section: GoodSection) -> list[Device]:
    return [GoodDevice(i) for i in range(section.devices)]


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [BackendSpec("good", GoodSection, probe, open_good, priority=5)]
