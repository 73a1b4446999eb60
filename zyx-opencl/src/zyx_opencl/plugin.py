"""zyx-opencl's plugin: the ``opencl`` backend on pyopencl.

Importing this module is cheap: pyopencl is imported by ``probe`` (which only lists
platforms and devices) and the backend's modules by ``open``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from zyx.errors import BackendError, ErrorStatus
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl
from zyx_opencl.config import OpenCLSection

if TYPE_CHECKING:
    from zyx.backend import Device

ZYX_PLUGIN_API = "1.0"

PRIORITY = 10
"""Above the host backend (0): an OpenCL device, where there is one, is the default."""


def probe() -> ProbeResult:
    """Is pyopencl importable, does an ICD loader find platforms, how many devices?"""
    try:
        import pyopencl as cl
    except ImportError as error:
        return ProbeResult(available=False, reason=f"pyopencl cannot be imported: {error}")
    libraries = {"pyopencl": f"{cl.VERSION_TEXT} at {cl.__file__}"}
    try:
        platforms = cl.get_platforms()
    except cl.Error as error:  # PLATFORM_NOT_FOUND_KHR: no ICD registered, or none loads
        reason = f"no OpenCL platform found (check OCL_ICD_VENDORS, /etc/OpenCL/vendors): {error}"
        return ProbeResult(available=False, reason=reason, libraries=libraries)
    counts = []
    for platform in platforms:
        try:
            counts.append(len(platform.get_devices()))
        except cl.Error:  # DEVICE_NOT_FOUND
            counts.append(0)
    found = ", ".join(
        f"{i}: {p.name} ({n} devices)" for i, (p, n) in enumerate(zip(platforms, counts))
    )
    if not sum(counts):
        reason = f"no OpenCL device on any platform ({found})"
        return ProbeResult(available=False, reason=reason, libraries=libraries)
    return ProbeResult(available=True, devices=sum(counts), reason=found, libraries=libraries)


def open_devices(section: OpenCLSection) -> Sequence[Device]:
    """The devices of the configured platforms; ``platform_ids = []`` opens none."""
    if section.platform_ids == []:
        return []
    try:
        from zyx_opencl.device import open_devices as open_platforms
    except ImportError as error:
        raise BackendError(
            ErrorStatus.DYLIB_NOT_FOUND, f"pyopencl cannot be imported: {error}"
        ) from error
    return open_platforms(section)


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="opencl",
            config=OpenCLSection,
            probe=probe,
            open=open_devices,
            priority=PRIORITY,
        )
    ]
