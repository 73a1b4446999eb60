"""Every error zyx raises. Each one says what went wrong and, where it can, what to do."""

from __future__ import annotations

from enum import Enum


class ErrorStatus(Enum):
    """What failed inside a backend; the statuses of zyx's ``BackendError``."""

    DYLIB_NOT_FOUND = "DyLibNotFound"
    INITIALIZATION = "Initialization"
    DEINITIALIZATION = "Deinitialization"
    DEVICE_ENUMERATION = "DeviceEnumeration"
    DEVICE_QUERY = "DeviceQuery"
    MEMORY_ALLOCATION = "MemoryAllocation"
    MEMORY_DEALLOCATION = "MemoryDeallocation"
    MEMORY_COPY_H2P = "MemoryCopyH2P"
    MEMORY_COPY_P2H = "MemoryCopyP2H"
    MEMORY_COPY_P2P = "MemoryCopyP2P"
    INCORRECT_KERNEL_ARG = "IncorrectKernelArg"
    KERNEL_COMPILATION = "KernelCompilation"
    KERNEL_LAUNCH = "KernelLaunch"
    KERNEL_SYNC = "KernelSync"


class ZyxError(Exception):
    """Base class of every error zyx raises on purpose."""


class BackendError(ZyxError):
    """A backend operation failed.

    ``status`` says which kind of operation, ``context`` says what happened. A compile
    error carries the compiler's log in ``log``.
    """

    def __init__(self, status: ErrorStatus, context: str, *, log: str = "") -> None:
        self.status = status
        self.context = context
        self.log = log
        message = f"{status.value}: {context}"
        if log:
            message += f"\n--- compiler log ---\n{log.rstrip()}"
        super().__init__(message)


class ConfigError(ZyxError):
    """A configuration value is invalid. Names the source, the field path and the value."""

    def __init__(self, source: str, field: str, value: object, problem: str) -> None:
        self.source = source
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{source}: {field} = {value!r}: {problem}")


class PluginError(ZyxError):
    """A backend plugin could not be used. Chained (``__cause__``) to the original failure."""

    def __init__(self, plugin: str, reason: str) -> None:
        self.plugin = plugin
        self.reason = reason
        super().__init__(f"backend plugin {plugin!r} is unavailable: {reason}")


class IRError(ZyxError):
    """A kernel is malformed. Says what is wrong and at which op."""
