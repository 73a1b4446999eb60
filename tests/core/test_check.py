"""``zyx check``: what it reports for kernels a device cannot run, and for a device that
runs the reference interpreter itself; its front-end workloads pass on the host, fail on a
backend that computes wrong numbers, and skip where a dtype is missing."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import zyx.plugins
from zyx.check import check, run
from zyx.dtypes import DType
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.plugins import ENTRY_POINT_GROUP, Registry
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
    assert "nothing checked: all 9 skipped" in done.stdout
    assert "runs the IR interpreter: no device code to check" in done.stdout
    assert "passed" not in done.stdout


WORKLOADS = ("mlp f32", "reduce f32", "reduce f64")


def rows(output: str) -> dict[str, list[str]]:
    """The front-end table's rows by workload: their cells."""
    table = output[output.index("front-end workloads") :]
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines()]
    return {row[1]: row for row in cells if len(row) > 1 and row[1] in WORKLOADS}


def test_the_check_passes_on_the_host_in_80_columns(
    environ: dict[str, str], tmp_path: Path
) -> None:
    environ |= {"ZYX_PLUGINS": "host", "COLUMNS": "80", "ZYX_CACHE_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "zyx", "check", "host"]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    found = rows(done.stdout)
    assert sorted(found) == sorted(WORKLOADS), done.stdout
    for row in found.values():
        first, warm, launches, error, result = row[2:]
        assert result == "pass", done.stdout
        assert first.endswith(("ms", "s")) and warm.endswith(("ms", "s", "µs")), row
        assert int(launches) >= 1 and float(error) <= 1e-5, row
    assert "all 9 passed" in done.stdout  # 6 sample kernels, 3 workloads
    text = " ".join(done.stdout.split())  # lines wrap at 80 columns
    assert "Times: zyx.realize + reading the results into numpy" in text
    assert max(map(len, done.stdout.splitlines())) <= 80, done.stdout


FAULTY = EntryPoint("faulty", "faulty_backend", ENTRY_POINT_GROUP)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compiler cache of this module's own: faulty kernels never reach the user's."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path) -> None:
    """The process registry replaced by one holding only the conformance tests' faulty
    backend plugin (``tests/conformance/faulty_backend.py``), in a clean environment."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ZYX_")}
    environ.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    monkeypatch.setenv("ZYX_CACHE_DIR", str(cache))
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "conformance"))
    monkeypatch.setattr(zyx.plugins, "_registry", Registry(environ, [FAULTY]))


def check_faulty(**section: object) -> tuple[int, str]:
    """``zyx check faulty`` with the faulty backend's ``section``: status and output."""
    zyx.plugins.configure(faulty=section)
    console = Console(record=True, width=80, highlight=False)
    status = run("faulty", console)
    return status, console.export_text()


@pytest.mark.usefixtures("faulty")
def test_a_backend_that_computes_wrong_numbers_fails_the_workload() -> None:
    """exp computed as exp2: the softmax is wrong, and no sample kernel or reduction has an
    exp. (Not "sub computes add": softmax(z + max(z)) is softmax(z), and the check passed.)"""
    status, output = check_faulty(fault="exp computes exp2")
    assert status == 1, output
    found = rows(output)
    assert found["mlp f32"][-1] == "FAIL", output
    assert found["reduce f32"][-1] == found["reduce f64"][-1] == "pass", output
    text = " ".join(output.split())
    assert "faulty mlp f32: output 0 of shape (256, 10) (flat): relative error" in text
    assert "1 of 9 failed" in text


@pytest.mark.usefixtures("faulty")
def test_a_device_without_float64_skips_that_workload_with_the_reason() -> None:
    claims = [d.value for d in DType if d is not DType.F64]
    status, output = check_faulty(claims=claims)
    assert status == 0, output
    found = rows(output)
    assert found["reduce f64"][-1] == "skip" and found["mlp f32"][-1] == "pass", output
    assert "faulty reduce f64: no f64 arithmetic" in " ".join(output.split())
