"""A plugin module (loaded by test_registry.py through entry points) whose code calls
``sys.exit()`` or runs out of memory wherever zyx runs plugin code: each failure must
quarantine only its own plugin or backend, never end the process."""

from __future__ import annotations

import sys
from typing import NoReturn

from pydantic import model_validator

from zyx.config import BackendSection
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl

ZYX_PLUGIN_API = "1.0"


class Exiting(BackendSection):
    @model_validator(mode="after")
    def leave(self) -> Exiting:
        sys.exit("the section refuses")


def probe() -> ProbeResult:
    return ProbeResult(available=True, devices=1)


def leave(*args: object) -> NoReturn:
    sys.exit()


def out_of_memory(section: BackendSection) -> NoReturn:
    raise MemoryError


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [
        BackendSpec("exitsection", Exiting, probe, leave),
        BackendSpec("exitprobe", BackendSection, leave, leave),
        BackendSpec("exitopen", BackendSection, probe, leave),
        BackendSpec("nomemory", BackendSection, probe, out_of_memory),
    ]


class ExitingBackends:
    """Entry point ``zyx_test_exits:ExitingBackends``: its ``zyx_backends()`` exits."""

    ZYX_PLUGIN_API = "1.0"

    @staticmethod
    @hookimpl
    def zyx_backends() -> list[BackendSpec]:
        sys.exit(3)


class _ExitingDir:
    """A plugin object that exits while pluggy lists its attributes to register it."""

    ZYX_PLUGIN_API = "1.0"

    def __dir__(self) -> list[str]:
        sys.exit("listing refused")


EXITING_DIR = _ExitingDir()


class Interrupted:
    """Entry point ``zyx_test_exits:Interrupted``: Ctrl-C while its ``zyx_backends()`` runs."""

    ZYX_PLUGIN_API = "1.0"

    @staticmethod
    @hookimpl
    def zyx_backends() -> list[BackendSpec]:
        raise KeyboardInterrupt
