"""Opening a file that a user named (a config file, a weights file): regular files only.

A path from a variable or an argument may name a FIFO, whose open waits for a writer
(forever), a device (``/dev/zero`` reads without end) or a folder. ``open_regular`` opens
without waiting and refuses all of them before reading a byte.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO


class NotARegularFile(OSError):
    """The path names something other than a regular file; nothing was read from it."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file; else
    ``NotARegularFile`` (and the ``OSError`` of a path that cannot be opened)."""
    file = open(path, "rb", opener=_open_nonblocking)  # noqa: SIM115 - the caller closes it
    try:
        mode = os.fstat(file.fileno()).st_mode
    except BaseException:
        file.close()
        raise
    if not stat.S_ISREG(mode):
        file.close()
        raise NotARegularFile(f"{os.fspath(path)!r} is not a regular file (a FIFO, a device?)")
    return file


def _open_nonblocking(name: str, flags: int) -> int:
    """``open``'s opener: a FIFO opens at once instead of waiting for a writer (and is
    then refused); a regular file reads as without the flag."""
    return os.open(name, flags | os.O_NONBLOCK)
