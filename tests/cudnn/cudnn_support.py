"""Helpers of the cuDNN tests (a module of its own name: collecting ``tests/`` as a whole
sees one ``conftest``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def clean_environ(home: Path, **extra: str) -> dict[str, str]:
    """``os.environ`` without ``ZYX_*`` variables, with ``home`` as home and config home."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ZYX_")}
    environ.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **extra)
    return environ


STAND_IN = """
#include <stddef.h>
size_t cudnnGetVersion(void) {{ return {version}; }}
"""


def stand_in(directory: Path, version: int) -> Path:
    """A ``libcudnn.so.9`` that only answers ``cudnnGetVersion``."""
    directory.mkdir()
    source = directory / "cudnn.c"
    source.write_text(STAND_IN.format(version=version))
    lib = directory / "libcudnn.so.9"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    return lib
