"""A plugin that imports and probes fine but whose backend fails to open: the shared
library it loads on open is missing."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

from zyx.backend import Device
from zyx.config import BackendSection
from zyx.errors import BackendError, ErrorStatus
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

ZYX_PLUGIN_API = "1.0"


def probe() -> ProbeResult:
    return ProbeResult(available=True, devices=1)


def open_backend(section: BackendSection) -> Sequence[Device]:
    try:
        ctypes.CDLL("libzyx_test_openfails.so.3")
    except OSError as error:
        raise BackendError(ErrorStatus.DYLIB_NOT_FOUND, "libzyx_test_openfails.so.3") from error
    raise AssertionError("unreachable: the library does not exist")


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [BackendSpec("openfails", BackendSection, probe, open_backend, priority=9)]
