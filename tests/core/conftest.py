"""Fixtures of the core tests: a hermetic environment, and a throwaway virtual environment
with zyx-core and the test plugins of ``tests/plugins`` really installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "tests" / "plugins"


def clean_environ(home: Path, **extra: str) -> dict[str, str]:
    """``os.environ`` without ``ZYX_*`` variables, with ``home`` as home and config home,
    so no developer's config file or variable leaks into a test."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ZYX_")}
    environ.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **extra)
    return environ


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    """A clean environment whose config home is empty."""
    return clean_environ(tmp_path)


@dataclass(frozen=True)
class PluginVenv:
    """A virtual environment holding zyx-core and every test plugin."""

    python: Path
    home: Path

    def run(self, code: str, **env: str) -> subprocess.CompletedProcess[str]:
        """Run ``code`` in the venv's Python with a clean environment plus ``env``."""
        return subprocess.run(
            [str(self.python), "-c", code],
            env=clean_environ(self.home, **env),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def json(self, code: str, **env: str) -> Any:
        """Run ``code``, which prints one JSON document, and return it parsed."""
        done = self.run(code, **env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def zyx(
        self, *args: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the venv's ``zyx`` command."""
        return subprocess.run(
            [str(self.python.parent / "zyx"), *args],
            env=clean_environ(self.home, **(env or {})),
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture(scope="session")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> PluginVenv:
    """Install zyx-core and all test plugins into one fresh venv with uv (its cache keeps
    this to seconds)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("these tests install plugins with uv: `pip install uv`")
    base = tmp_path_factory.mktemp("plugin-venv")
    venv = base / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    packages = [str(ROOT / "zyx-core"), *map(str, sorted(PLUGINS.glob("zyx-test-*")))]
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(python), *packages], check=True
    )
    home = base / "home"
    home.mkdir()
    return PluginVenv(python, home)


def _installed_devices() -> list[Any]:
    """The names of every device zyx finds here (host, and PoCL, CUDA where installed), each
    marked by its backend: a nox session runs one backend's half with ``-m opencl``."""
    import zyx

    marks = {"opencl": [pytest.mark.opencl], "cuda": [pytest.mark.cuda, pytest.mark.gpu]}
    return [pytest.param(d.name, marks=marks.get(d.backend, [])) for d in zyx.devices()]


@pytest.fixture(params=_installed_devices())
def array_device(request: pytest.FixtureRequest) -> Any:
    """Each installed device in turn: the front end's tests run on all of them."""
    import zyx

    return zyx.device(request.param)
