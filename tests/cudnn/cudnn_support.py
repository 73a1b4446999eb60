"""Helpers of the cuDNN tests (a module of its own name: collecting ``tests/`` as a whole
sees one ``conftest``)."""

from __future__ import annotations

import os
from pathlib import Path


def clean_environ(home: Path, **extra: str) -> dict[str, str]:
    """``os.environ`` without ``ZYX_*`` variables, with ``home`` as home and config home."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ZYX_")}
    environ.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **extra)
    return environ
