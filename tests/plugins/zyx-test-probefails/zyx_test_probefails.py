"""A plugin whose probe raises instead of answering."""

from __future__ import annotations

from collections.abc import Sequence

from zyx.backend import Device
from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

ZYX_PLUGIN_API = "1.0"


def probe() -> ProbeResult:
    raise RuntimeError("driver query crashed")


def open_backend(section: BackendSection) -> Sequence[Device]:
    raise AssertionError("a backend whose probe failed must never be opened")


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [BackendSpec("probefails", BackendSection, probe, open_backend)]
