"""Fixed ranges of fuzzer seeds on each device, failing on any finding: kernels (``fuzz.py``:
no device may disagree with the IR interpreter) and array programs (``arrays.py``: no
device may disagree with array_api_strict, the standard's reference). Longer runs:
``nox -s fuzz``, ``python tests/fuzz/fuzz.py`` or ``python tests/fuzz/arrays.py``."""

from __future__ import annotations

from pathlib import Path

import arrays
import pytest
from fuzz import fuzz

import zyx

START = 0
COUNT = 60  # about 10 s on the host and 20 s on PoCL, on two cores


def _fresh_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Compiled afresh each run, so a warm cache cannot hide a slow compiler (PoCL reads
    # its variable once, when the platform opens: effective where this test opens it).
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("name", ["host", pytest.param("opencl", marks=pytest.mark.opencl)])
def test_no_findings(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_caches(tmp_path, monkeypatch)
    try:
        device = zyx.device(name)
    except zyx.PluginError as e:
        pytest.skip(f"no {name} device: {e}")
    report = fuzz([device], START, COUNT, seconds=float("inf"))
    assert not report.findings, "\n".join(map(str, report.findings))
    # Not vacuous: on a finite-math build about half the kernels compute a NaN or inf.
    assert report.outcomes[device.name]["ok"] >= COUNT // 4, report.summary(0)


ARRAY_START = 0
ARRAY_COUNTS = {arrays.CHECKED: 150, arrays.GPU_SHAPED: 400, "opencl": 8}
"""Array programs per device. The bounds-checked host interprets its kernels (nothing to
compile): about 3 s for 150 on two cores; dressed as a GPU (its kernels laid out for one),
about 5 s for 400, the check in CI of the layouts no GPU runs there. PoCL compiles each
new kernel (the sort network 10 s and more): about 30 s for 8. The compiled host is left
to ``nox -s fuzz`` (a second per program), the checked host runs the same kernels and
checks their bounds."""


@pytest.mark.parametrize(
    "name", [arrays.CHECKED, arrays.GPU_SHAPED, pytest.param("opencl", marks=pytest.mark.opencl)]
)
def test_no_array_findings(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_caches(tmp_path, monkeypatch)
    try:
        devices = arrays.open_devices([name])
    except zyx.PluginError as e:
        pytest.skip(f"no {name} device: {e}")
    count = ARRAY_COUNTS[name]
    report = arrays.fuzz(devices, ARRAY_START, count, seconds=float("inf"))
    assert not report.findings, "\n".join(map(str, report.findings))
    # Not vacuous: every program ran on the device (a generator finding runs none).
    assert report.outcomes[arrays.label(devices[0])]["ok"] == count, report.summary(0)
