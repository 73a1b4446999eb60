"""The example backend's plugin: the module entry point ``example`` names.

zyx imports it at discovery, checks ``ZYX_PLUGIN_API`` and calls ``zyx_backends()``.
Importing it stays cheap (no numpy): the pool and device are imported when the backend
is opened, the first time someone asks for its devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.util import find_spec
from typing import TYPE_CHECKING

from pydantic import PositiveInt
from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

if TYPE_CHECKING:
    from zyx.backend import Device

ZYX_PLUGIN_API = "1.0"
"""The plugin API this plugin was written for: it loads where zyx-core's is 1.0 or a later 1.x."""


class ExampleSection(BackendSection):
    """Config section ``example`` (``enabled`` comes from ``BackendSection``)."""

    devices: PositiveInt = 1
    """How many devices to open, ``example:0`` ... each with its own pool."""
    memory: PositiveInt = 1 << 30
    """Bytes each device's pool may hand out."""


def probe() -> ProbeResult:
    """Look without loading: is numpy installed? A GPU backend looks for its driver here."""
    numpy = find_spec("numpy")
    if numpy is None:
        return ProbeResult(available=False, reason="numpy is not installed")
    return ProbeResult(available=True, devices=1, libraries={"numpy": str(numpy.origin)})


def open_devices(section: ExampleSection) -> Sequence[Device]:
    """The devices ``section`` asks for."""
    from zyx_example.device import ExampleDevice

    return [ExampleDevice(index, section.memory) for index in range(section.devices)]


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    # Below the host's 0: a teaching backend should never become anyone's default device.
    return [
        BackendSpec(
            name="example", config=ExampleSection, probe=probe, open=open_devices, priority=-10
        )
    ]
