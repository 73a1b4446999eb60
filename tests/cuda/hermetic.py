"""Environments for the CUDA tests' subprocesses, free of the developer's settings."""

from __future__ import annotations

import os
from pathlib import Path


def clean_environ(home: Path | None = None, **extra: str) -> dict[str, str]:
    """``os.environ`` without ``ZYX_*`` variables (``ZYX_NATIVE=0``, ``ZYX_PLUGINS`` would
    change what is tested), plus ``extra``; with ``home`` as home and config and cache
    home, so that no config file (``host.enabled: false``, say) or cache leaks in either."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ZYX_")}
    if home is not None:
        environ.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_CACHE_HOME=str(home / ".cache"),
        )
    return environ | extra
