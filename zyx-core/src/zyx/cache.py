"""On-disk caches of compiled artefacts (program binaries, shared objects), one folder each.

The root is ``$ZYX_CACHE_DIR``, else ``$XDG_CACHE_HOME/zyx``, else ``~/.cache/zyx``; a
backend keeps its artefacts in a folder of its own below it (``opencl``, ``cuda``, ...).

A cache is an optimisation, never a requirement: an entry that cannot be read is a miss,
and one that cannot be written is skipped (logged on ``zyx.compile``). Writes are atomic
(a temporary file renamed into place), so concurrent processes never see half an entry.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

_log = logging.getLogger("zyx.compile")


def cache_root() -> Path:
    """The folder that holds every zyx cache."""
    return Path(_root())


def _root() -> str:
    # A string, not a Path: a kernel's first launch looks its binary up here, and pathlib
    # costs more than the lookup itself there.
    explicit = os.environ.get("ZYX_CACHE_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_CACHE_HOME")
    return os.path.join(xdg or os.path.join(os.path.expanduser("~"), ".cache"), "zyx")


def digest(*parts: str) -> str:
    """A cache key: SHA-256 over ``parts`` (separated, so ``("ab", "c") != ("a", "bc")``)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class DiskCache:
    """Blobs by key in ``cache_root() / name``; the folder is resolved at each call, so a
    changed ``ZYX_CACHE_DIR`` takes effect without a restart."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def folder(self) -> Path:
        return cache_root() / self.name

    def path(self, key: str) -> str:
        """Where the blob of ``key`` is (or would be) stored."""
        return os.path.join(_root(), self.name, key)

    def get(self, key: str) -> bytes | None:
        """The blob stored under ``key``, or ``None``."""
        try:
            return (self.folder / key).read_bytes()
        except OSError:
            return None

    def put(self, key: str, blob: bytes) -> None:
        """Store ``blob`` under ``key`` atomically; failures are logged, not raised."""
        folder = self.folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key[:16]}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(blob)
                os.replace(tmp, folder / key)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as error:
            _log.debug("cache %s: cannot store %s: %s", self.name, key, error)
