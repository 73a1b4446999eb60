"""The plugin: probe, open, and quarantine where there is no platform or no device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opencl_support import DEVICES, PROBE, open_all

from zyx.errors import BackendError, ErrorStatus
from zyx.hookspecs import BackendSpec
from zyx_opencl import plugin

pytestmark = pytest.mark.opencl

# pyopencl's wheels point their bundled ICD loader at their own PoCL through PYOPENCL_HOME,
# which pyopencl sets on import. Taking it away again, with OCL_ICD_VENDORS at an empty
# folder, leaves the loader with no ICD at all: a machine without OpenCL.
NO_PLATFORM = """
import os, pyopencl
os.environ["PYOPENCL_HOME"] = "/nonexistent"
"""

# A compiler that builds nothing, as PoCL 3.0's on a CPU its LLVM does not know.
NO_COMPILER = """
import zyx_opencl.device
from zyx.codegen import Source
zyx_opencl.device.SMOKE = Source("zyx_smoke", "__kernel void zyx_smoke(", "opencl")
"""

REPORT = """
import json, zyx
from zyx.errors import BackendError, PluginError
from zyx_opencl.config import OpenCLSection
from zyx_opencl.device import open_devices
from zyx_opencl.plugin import probe

report = {"probe": probe().__dict__}
try:
    zyx.device("opencl")
except PluginError as error:
    report["device"] = str(error)
report["devices"] = [d.backend for d in zyx.devices()]
report["default"] = zyx.device().name
try:
    open_devices(OpenCLSection())
except BackendError as error:
    report["open"] = [error.status.name, error.context]
print(json.dumps(report))
"""


def run_isolated(prelude: str, tmp_path: Path, **env: str) -> dict[str, Any]:
    """Run ``REPORT`` in a fresh interpreter with no ICD registered (and ``env``)."""
    icds = tmp_path / "vendors"
    icds.mkdir()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ZYX_")}
    environ.update(OCL_ICD_VENDORS=str(icds), HOME=str(tmp_path), **env)
    result = subprocess.run(
        [sys.executable, "-c", prelude + REPORT],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return report


def test_backend_spec() -> None:
    (spec,) = plugin.zyx_backends()
    assert isinstance(spec, BackendSpec)
    assert (spec.name, spec.config.__name__) == ("opencl", "OpenCLSection")
    assert spec.priority > 0, "above the host backend"
    assert plugin.ZYX_PLUGIN_API == "1.0"


def test_probe_sees_this_machines_devices() -> None:
    if not PROBE.available:
        pytest.skip(PROBE.reason)
    assert PROBE.devices == DEVICES > 0
    assert "pyopencl" in PROBE.libraries


def test_probe_opens_nothing() -> None:
    code = (
        "import sys; from zyx_opencl.plugin import probe; probe(); "
        "print(sorted(m for m in sys.modules if m.startswith('zyx_opencl')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = json.loads(result.stdout.replace("'", '"'))
    assert loaded == ["zyx_opencl", "zyx_opencl.config", "zyx_opencl.plugin"]


def test_no_platform_quarantines_the_backend_and_nothing_else(tmp_path: Path) -> None:
    report = run_isolated(NO_PLATFORM, tmp_path)
    probe = report["probe"]
    assert probe["available"] is False
    assert "no OpenCL platform" in probe["reason"]
    assert "no OpenCL platform" in str(report["device"])
    assert "host" in report["devices"] and "opencl" not in report["devices"]
    status, context = report["open"]
    assert status == "DEVICE_ENUMERATION" and "PLATFORM_NOT_FOUND" in context


def test_a_platform_without_devices_is_unavailable(tmp_path: Path) -> None:
    report = run_isolated("", tmp_path, POCL_DEVICES="none")
    probe = report["probe"]
    assert probe["available"] is False
    if "no OpenCL platform" in probe["reason"]:
        pytest.skip("needs pip's PoCL, which is found without an ICD registry")
    assert "no OpenCL device" in probe["reason"]
    status, context = report["open"]
    assert status == "DEVICE_ENUMERATION" and "no device" in context


def test_a_device_that_builds_no_kernel_is_not_opened_and_the_host_is_the_default(
    tmp_path: Path,
) -> None:
    if not DEVICES:
        pytest.skip(PROBE.reason)
    report = run_isolated(NO_COMPILER, tmp_path)
    if "no OpenCL platform" in report["probe"]["reason"]:
        pytest.skip("needs pip's PoCL, which is found without an ICD registry")
    assert report["probe"]["available"] is True, "the probe builds nothing"
    assert "builds the smallest kernel" in report["device"]
    assert "--- compiler log ---" in report["device"]
    assert "opencl" not in report["devices"] and report["default"] == "host"
    status, context = report["open"]
    assert status == "INITIALIZATION" and "'zyx_smoke' does not build" in context


def test_platform_ids_select_and_empty_means_off() -> None:
    if not DEVICES:
        pytest.skip(PROBE.reason)
    assert plugin.open_devices(plugin.OpenCLSection(platform_ids=[])) == []
    first = open_all(platform_ids=[0])
    assert [d.index for d in first] == list(range(len(first)))
    with pytest.raises(BackendError) as caught:
        open_all(platform_ids=[99])
    assert caught.value.status is ErrorStatus.DEVICE_ENUMERATION
    assert "99" in caught.value.context


def test_queues_and_window_come_from_the_section() -> None:
    if not DEVICES:
        pytest.skip(PROBE.reason)
    dev = open_all(queues=3, window=5)[0]
    assert (len(dev.scheduler.queues), dev.scheduler.window) == (3, 5)
    assert dev.name == "opencl:0" and dev.pool.name == "opencl:0"
