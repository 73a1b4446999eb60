"""The host backend's plugin: registered through entry point ``host`` like every backend.

Importing it is cheap (no numpy): the pool and device are imported when it is opened.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

if TYPE_CHECKING:
    from zyx.backend import Device

ZYX_PLUGIN_API = "1.0"

MAX_THREADS = 1024
"""More threads than cores only slow kernels down, and where the system will not create
them all (32768 on a two-core test machine) libgomp aborts the process. 1024 is above the
hardware threads of any one machine today (two 192-core CPUs with SMT have 768), so a
config file written on a large machine stays valid on a small one."""


class HostSection(BackendSection):
    """Config section ``host``."""

    threads: Annotated[int, Field(gt=0, le=MAX_THREADS, strict=True)] | None = None
    """Worker threads for kernels, 1 to ``MAX_THREADS``; ``None``: one per available core."""


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
