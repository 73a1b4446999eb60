"""Finding cuDNN: the frontend (``nvidia-cudnn-frontend``, imported as ``cudnn``) and the
library it loads (``libcudnn.so.9``, from ``nvidia-cudnn-cu13`` or the system), for the
plugin's probe.

The probe is cheap: it reads the frontend's version from its metadata (importing it takes
a few hundred milliseconds, paid at the first claim instead) and loads libcudnn itself,
where the frontend will look for it, to ask its version (``cudnnGetVersion`` needs no GPU).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

FRONTEND = "nvidia-cudnn-frontend"
MIN_FRONTEND = (1, 32)
"""The frontend whose graph API (``cudnn.pygraph``) and raw-pointer execution zyx-cudnn
is written against."""
MIN_CUDNN = 90000
"""cuDNN 9.0: its graph API's runtime fusion runs matmuls with pointwise epilogues."""
WHEEL = "nvidia-cudnn-cu13"
LIBRARY = "libcudnn.so.9"


@dataclass(frozen=True)
class Status:
    """Whether zyx-cudnn can run, and what it found."""

    reason: str = ""
    """Why not (``""``: it can)."""
    libraries: dict[str, str] = field(default_factory=dict)

    @property
    def available(self) -> bool:
        return not self.reason


@functools.cache
def status() -> Status:
    """This process's cuDNN, looked at once."""
    return find(os.environ, _frontend_version())


def find(environ: Mapping[str, str], frontend: str | None) -> Status:
    """cuDNN as the frontend of version ``frontend`` (``None``: not installed) would load
    it under ``environ``."""
    problem = frontend_problem(frontend)
    libraries = {"cudnn-frontend": frontend or "not installed"}
    if problem:
        return Status(problem, libraries)
    path, version = load(candidates(environ))
    if version is None:
        libraries["libcudnn"] = "not found"
        return Status(f"{path} (pip install {WHEEL})", libraries)
    libraries["libcudnn"] = f"cuDNN {version // 10000}.{version // 100 % 100}.{version % 100}"
    if version < MIN_CUDNN:
        return Status(f"{path} is cuDNN {version}; zyx-cudnn needs 9.0 or newer", libraries)
    return Status("", libraries)


def frontend_problem(version: str | None) -> str:
    """Why the frontend of ``version`` cannot be used, or ``""``."""
    if version is None:
        return f"{FRONTEND} is not installed (pip install {FRONTEND})"
    try:
        found = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return f"{FRONTEND} {version}: not a version zyx-cudnn understands"
    if found < MIN_FRONTEND:
        wanted = ".".join(map(str, MIN_FRONTEND))
        return f"{FRONTEND} {version} is too old: zyx-cudnn is written for {wanted} or newer"
    return ""


def candidates(environ: Mapping[str, str]) -> list[str]:
    """Where the frontend looks for libcudnn, in its order: ``LD_LIBRARY_PATH``, the
    ``nvidia-cudnn-cu*`` wheel, then the system's loader."""
    dirs = [d for d in environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    found = [str(Path(d) / name) for d in dirs for name in (LIBRARY, "libcudnn.so")]
    wheel = Path(sysconfig.get_path("purelib")) / "nvidia" / "cudnn" / "lib"
    return (
        [p for p in found if Path(p).exists()]
        + sorted(map(str, wheel.glob("libcudnn.so.*[0-9]")))
        + [LIBRARY]
    )


def load(paths: Sequence[str]) -> tuple[str, int | None]:
    """The first of ``paths`` that loads and its ``cudnnGetVersion()``; else why none did
    (and ``None``)."""
    errors = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            get_version = lib.cudnnGetVersion
        except (OSError, AttributeError) as error:
            errors.append(f"{path}: {error}")
            continue
        get_version.restype = ctypes.c_size_t
        return path, int(get_version())
    return "libcudnn not found: " + "; ".join(errors), None


def _frontend_version() -> str | None:
    try:
        return importlib.metadata.version(FRONTEND)
    except importlib.metadata.PackageNotFoundError:
        return None
