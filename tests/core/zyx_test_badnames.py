"""A plugin module (loaded by test_registry.py through an entry point) whose backends
have names that cannot be device prefixes or config sections."""

from __future__ import annotations

from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

ZYX_PLUGIN_API = "1.0"


def probe() -> ProbeResult:
    return ProbeResult(available=True, devices=1)


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    names = ["copy", "Bad-Name", "autotune", "fine", "fine"]
    return [BackendSpec(name, BackendSection, probe, lambda section: []) for name in names]
