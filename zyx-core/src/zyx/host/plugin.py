"""The host backend's plugin: registered through entry point ``host`` like every backend.

Importing it is cheap (no numpy): the pool and device are imported when it is opened.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import PositiveInt

from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

if TYPE_CHECKING:
    from zyx.backend import Device

ZYX_PLUGIN_API = "1.0"


class HostSection(BackendSection):
    """Config section ``host``."""

    threads: PositiveInt | None = None
    """Worker threads for kernels; ``None``: one per available core."""


def probe() -> ProbeResult:
    """The host is always there; the C compiler decides how its kernels run."""
    from zyx.host.compiler import find_compiler

    compiler, why_not = find_compiler()
    where = compiler or f"not found ({why_not}): kernels run in the numpy interpreter"
    return ProbeResult(
        available=True,
        devices=1,
        reason=f"{os.cpu_count() or 1} cores",
        libraries={"C compiler": where},
    )


def open_host(section: HostSection) -> Sequence[Device]:
    """One device, ``host``, with a pool as large as physical memory."""
    from zyx.host.device import HostDevice
    from zyx.host.pool import HostPool

    return [HostDevice(HostPool(), section.threads)]


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [BackendSpec(name="host", config=HostSection, probe=probe, open=open_host, priority=0)]
