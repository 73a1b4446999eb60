"""A plugin module (loaded by test_selection.py through an entry point) with two backends
that outrank the host: ``empty`` opens no device, ``ahead`` opens one."""

from __future__ import annotations

from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool

ZYX_PLUGIN_API = "1.0"


class AheadDevice(HostDevice):
    """The host device under another backend name."""

    backend = "ahead"

    @property
    def name(self) -> str:
        return "ahead:0"


def open_ahead(section: BackendSection) -> list[HostDevice]:
    return [AheadDevice(HostPool())]


def probe() -> ProbeResult:
    return ProbeResult(available=True, devices=1)


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [
        BackendSpec("empty", BackendSection, probe, lambda section: [], priority=9),
        BackendSpec(
            "ahead", BackendSection, probe, lambda s: [AheadDevice(HostPool())], priority=5
        ),
    ]
