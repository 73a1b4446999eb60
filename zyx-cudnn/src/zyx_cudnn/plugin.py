"""zyx-cudnn's plugin: declared, not implemented yet.

Its backend is quarantined with the reason below (``zyx doctor`` shows it) and every other
backend keeps working. Enabling cuDNN for matmuls is ``cuda.cudnn``, in zyx-cuda's section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

if TYPE_CHECKING:
    from zyx.backend import Device

ZYX_PLUGIN_API = "1.0"

NOT_IMPLEMENTED = "zyx-cudnn is not implemented yet (its issue is open)"


class CudnnSection(BackendSection):
    """Config section ``cudnn``; it has no settings of its own yet."""


def probe() -> ProbeResult:
    return ProbeResult(available=False, reason=NOT_IMPLEMENTED)


def open_cudnn(section: CudnnSection) -> Sequence[Device]:
    raise NotImplementedError(NOT_IMPLEMENTED)


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [BackendSpec(name="cudnn", config=CudnnSection, probe=probe, open=open_cudnn)]
