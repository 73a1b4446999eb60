"""The plugin without a GPU: its config section, its quarantine without libcudnn (``zyx
doctor`` shows the reason, everything else works), and how the probe judges a frontend and
a libcudnn (stand-in libraries built with ``cc``, loaded in processes of their own)."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from cudnn_support import clean_environ, stand_in

from zyx.errors import ConfigError
from zyx.plugins import Registry, State
from zyx_cudnn import library
from zyx_cudnn.plugin import CudnnSection

pytestmark = pytest.mark.cudnn

no_libcudnn = pytest.mark.skipif(
    library.status().available, reason="libcudnn is installed here: no quarantine to see"
)


def test_allow_tf32_defaults_to_false_and_is_validated(tmp_path: Path) -> None:
    registry = Registry(clean_environ(tmp_path))
    assert registry.config.section("cudnn") == CudnnSection(enabled=True, allow_tf32=False)
    registry.configure(cudnn={"allow_tf32": True})
    assert registry.config.section("cudnn").allow_tf32 is True  # type: ignore[attr-defined]
    for value in (1, "yes", None):
        with pytest.raises(ConfigError) as caught:
            registry.configure(cudnn={"allow_tf32": value})
        assert caught.value.field == "cudnn.allow_tf32"
    with pytest.raises(ConfigError, match="unknown key; cudnn takes: enabled, allow_tf32"):
        registry.configure(cudnn={"tf32": True})


def test_the_environment_sets_allow_tf32(tmp_path: Path) -> None:
    registry = Registry(clean_environ(tmp_path, ZYX_CUDNN__ALLOW_TF32="true"))
    assert registry.config.section("cudnn").allow_tf32 is True  # type: ignore[attr-defined]
    assert registry.config.source("cudnn", "allow_tf32") == "ZYX_CUDNN__ALLOW_TF32"


@no_libcudnn
def test_without_libcudnn_the_backend_is_quarantined_with_the_reason(tmp_path: Path) -> None:
    registry = Registry(clean_environ(tmp_path))
    (record,) = [b for b in registry.backends() if b.name == "cudnn"]
    assert record.state is State.QUARANTINED
    assert "libcudnn not found" in record.reason
    assert "pip install nvidia-cudnn-cu13" in record.reason
    assert record.probe is not None
    assert record.probe.libraries == {
        "cudnn-frontend": importlib.metadata.version("nvidia-cudnn-frontend"),
        "libcudnn": "not found",
    }
    assert "host" in [d.name for d in registry.devices()]  # the others work


DOCTOR_AND_MATMUL = """
import numpy as np, zyx, zyx_cudnn.plugin as plugin
x = np.random.default_rng(1).standard_normal((40, 24)).astype(np.float32)
y = np.random.default_rng(2).standard_normal((24, 8)).astype(np.float32)
got = zyx.maximum(zyx.asarray(x) @ zyx.asarray(y) + 1.0, 0.0).numpy()
want = np.maximum(x.astype(np.float64) @ y.astype(np.float64) + 1, 0)
print(float(np.abs(got - want).max()))
print(plugin.zyx_match_graph(None, zyx.device()))
"""


@no_libcudnn
def test_zyx_doctor_shows_the_quarantine_and_arrays_still_work(tmp_path: Path) -> None:
    environ = clean_environ(tmp_path)
    doctor = subprocess.run(
        [sys.executable, "-m", "zyx", "doctor"], env=environ, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr  # something is quarantined
    lines = [line for line in doctor.stdout.splitlines() if "cudnn" in line]
    assert any("quarantined" in line for line in lines), doctor.stdout
    assert "libcudnn not found" in doctor.stdout and "cudnn-frontend" in doctor.stdout
    run = subprocess.run(
        [sys.executable, "-c", DOCTOR_AND_MATMUL], env=environ, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    error, claims = run.stdout.split()
    assert float(error) < 1e-4 and claims == "None"  # not a CUDA device: nothing asked of cuDNN


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        (None, "nvidia-cudnn-frontend is not installed"),
        ("1.16.0", "nvidia-cudnn-frontend 1.16.0 is too old: zyx-cudnn is written for 1.32"),
        ("one", "not a version"),
        ("1.32.0", ""),
        ("2.0.1", ""),
    ],
)
def test_the_frontends_version_is_judged(version: str | None, problem: str) -> None:
    found = library.frontend_problem(version)
    assert (problem in found) if problem else found == ""


def find_in_process(environ: dict[str, str], frontend: str | None) -> Any:
    code = textwrap.dedent(f"""
        import json, os
        from zyx_cudnn.library import find
        found = find(os.environ, {frontend!r})
        print(json.dumps([found.available, found.reason, found.libraries]))
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH")
def test_libcudnn_on_ld_library_path_is_found_and_its_version_judged(tmp_path: Path) -> None:
    new, old = stand_in(tmp_path / "new", 91900), stand_in(tmp_path / "old", 8907)
    found = find_in_process(clean_environ(tmp_path, LD_LIBRARY_PATH=str(new.parent)), "1.32.0")
    assert found == [True, "", {"cudnn-frontend": "1.32.0", "libcudnn": "cuDNN 9.19.0"}]
    available, reason, _ = find_in_process(
        clean_environ(tmp_path, LD_LIBRARY_PATH=str(old.parent)), "1.32.0"
    )
    assert not available and reason == f"{old} is cuDNN 8907; zyx-cudnn needs 9.0 or newer"


def test_a_library_that_is_not_cudnn_is_named(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "libcudnn.so.9").write_text("not a library")
    path, version = library.load([str(fake / "libcudnn.so.9")])
    assert version is None and str(fake / "libcudnn.so.9") in path


def test_the_frontend_is_judged_before_libcudnn_is_looked_for() -> None:
    found = library.find({}, "1.2.0")
    assert not found.available and "too old" in found.reason
    assert found.libraries == {"cudnn-frontend": "1.2.0"}
