"""zyx's debug channels: the ``ZYX_DEBUG`` bitmask mapped onto :mod:`logging` loggers.

Library code logs and never prints. Each bit of ``ZYX_DEBUG`` (zyx's own numbering) turns
one channel's logger to ``DEBUG`` with a handler on stderr::

    ZYX_DEBUG=33 python train.py     # 1 devices + 32 launches and copies

One bit is a mode rather than a channel: ``BOUNDS`` (512), the bounds-checked mode. Every
device opened while it is set compiles kernels that check each load and store against its
buffer (or register or local array) and record the first that is out of bounds; the
launch reads that record after the kernel and raises a ``BackendError`` (KernelLaunch)
naming the kernel, the op, the param and the index. Slow (every launch waits for its
kernel), for finding the launch that writes past a buffer where the launch's own check
(``zyx.ir.extent``) cannot know the extent: an index loaded from data::

    ZYX_DEBUG=512 pytest tests/test_model.py

Without ``ZYX_DEBUG`` zyx adds no handler but a ``NullHandler``: what an application does
with the ``zyx.*`` loggers is its own choice. ``import zyx`` turns nothing on: ``setup``
runs when zyx first makes its process registry (the first ``zyx.device()``,
``zyx.devices()`` or ``zyx.configure()``, which every array op on a device goes through);
a program that opens a backend's devices itself calls it first.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Mapping

CHANNELS: dict[int, str] = {
    1: "zyx.dev",  # device discovery, plugins, backends opened
    4: "zyx.sched",  # scheduling: kernelizer, queues, dependencies
    8: "zyx.ir",  # kernel IR
    16: "zyx.asm",  # generated source
    32: "zyx.launch",  # launches and copies
    64: "zyx.mem",  # allocations and frees
    128: "zyx.compile",  # compiler invocations and caches
    256: "zyx.tune",  # autotune measurements
}
"""Bit of ``ZYX_DEBUG`` to the name of the logger it turns on."""

BOUNDS = 512
"""The ``ZYX_DEBUG`` bit of the bounds-checked mode (the module docstring)."""

_FORMAT = "%(relativeCreated)8.1f ms %(name)s: %(message)s"

# Keeps records of zyx's loggers away from logging's last-resort stderr handler, which
# would otherwise print warnings nobody asked for.
logging.getLogger("zyx").addHandler(logging.NullHandler())


def channels(mask: int) -> list[str]:
    """The logger names that ``mask`` turns on, in bit order."""
    return [name for bit, name in CHANNELS.items() if mask & bit]


def bits(environ: Mapping[str, str] = os.environ) -> int:
    """``ZYX_DEBUG`` as an int; 0 where unset or not an integer (``setup`` warns of that)."""
    try:
        return int(environ.get("ZYX_DEBUG", "").strip() or "0", 0)
    except ValueError:
        return 0


def bounds_checked(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``ZYX_DEBUG`` turns the bounds-checked mode on (bit ``BOUNDS``): what a device
    reads when it is opened, unless told otherwise."""
    return bool(bits(environ) & BOUNDS)


def setup(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Turn on the channels ``ZYX_DEBUG`` names; return their logger names.

    Idempotent: calling it again adds no second handler. A value that is not an integer
    (decimal, ``0x...`` or ``0b...``) turns nothing on and warns.
    """
    value = environ.get("ZYX_DEBUG", "").strip()
    if not value:
        return []
    try:
        mask = int(value, 0)
    except ValueError:
        warnings.warn(
            f"ZYX_DEBUG={value!r} is not an integer bitmask; debug logging stays off",
            stacklevel=2,
        )
        return []
    names = channels(mask)
    for name in names:
        _attach(logging.getLogger(name))
    return names


def _attach(logger: logging.Logger) -> None:
    logger.setLevel(logging.DEBUG)
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT))
        logger.addHandler(handler)


class _StderrHandler(logging.StreamHandler):
    """The handler ``setup`` adds; its own class so a second ``setup`` can recognise it."""
