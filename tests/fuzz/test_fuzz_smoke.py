"""A fixed range of fuzzer seeds on each device: no device may disagree with the
interpreter. Longer runs: ``nox -s fuzz`` or ``python tests/fuzz/fuzz.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz import fuzz

import zyx

START = 0
COUNT = 60  # about 10 s on the host and 20 s on PoCL, on two cores


@pytest.mark.parametrize("name", ["host", pytest.param("opencl", marks=pytest.mark.opencl)])
def test_no_findings(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Compiled afresh each run, so a warm cache cannot hide a slow compiler (PoCL reads
    # its variable once, when the platform opens: effective where this test opens it).
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path))
    try:
        device = zyx.device(name)
    except zyx.PluginError as e:
        pytest.skip(f"no {name} device: {e}")
    report = fuzz([device], START, COUNT, seconds=float("inf"))
    assert not report.findings, "\n".join(map(str, report.findings))
    # Not vacuous: on a finite-math build about half the kernels compute a NaN or inf.
    assert report.outcomes[device.name]["ok"] >= COUNT // 4, report.summary(0)
