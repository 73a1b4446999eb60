"""A plugin module (loaded by test_registry.py through entry point ``aadup``, which sorts
before ``host``) that provides a backend named ``host``, as if to take over zyx's own."""

from __future__ import annotations

from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

ZYX_PLUGIN_API = "1.0"


def probe() -> ProbeResult:
    return ProbeResult(available=True, devices=1)


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [
        BackendSpec("host", BackendSection, probe, lambda section: [], priority=5),
        BackendSpec("aadup", BackendSection, probe, lambda section: []),
    ]
