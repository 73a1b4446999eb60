"""``zyx check``: what it reports for kernels a device cannot run, and for a device that
runs the reference interpreter itself."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np

from zyx.check import check
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.testing.examples import matmul
from zyx.testing.harness import reference


def test_a_kernel_over_the_devices_limits_is_skipped_with_the_reason() -> None:
    device = HostDevice(HostPool())
    # A device of 64 work-items per group: the 16 x 16 matmul tile does not fit.
    device.info = dataclasses.replace(
        device.info, max_local_threads=64, max_local_work_dims=(64, 64, 64)
    )
    example = matmul(20, 20, 20)
    args = example.arguments(np.random.default_rng(0))
    result = check(device, example, args, reference(example.kernel, args))
    assert result.status == "skip", result
    assert "limits" in result.note and "256 work-items" in result.note


def test_an_interpreting_host_is_labelled_and_checks_nothing(
    environ: dict[str, str], tmp_path: Path
) -> None:
    # In a process of its own: the host detects its compiler once per process.
    environ |= {"ZYX_HOST_COMPILER": "none", "ZYX_PLUGINS": "host", "COLUMNS": "300"}
    environ["ZYX_CACHE_DIR"] = str(tmp_path)
    command = [sys.executable, "-m", "zyx", "check", "host"]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout
    assert "host (IR interpreter: not checked)" in done.stdout
    assert "runs the IR interpreter, the reference itself" in done.stdout
    assert "nothing checked: all 6 skipped" in done.stdout
    assert "passed" not in done.stdout
