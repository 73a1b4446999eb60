"""Every error zyx raises. Each one says what went wrong and, where it can, what to do."""

from __future__ import annotations

from collections.abc import Sequence
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
    """A backend plugin could not be used. Chained (``__cause__``) to the original failure.

    ``request`` names what asked for the backend where it was not the caller: the config
    field and its source (``default_device = 'cuda' (from ZYX_DEFAULT_DEVICE)``).
    """

    def __init__(self, plugin: str, reason: str, *, request: str = "") -> None:
        self.plugin = plugin
        self.reason = reason
        self.request = request
        super().__init__(_requested(request, f"backend plugin {plugin!r} is unavailable: {reason}"))


class DeviceNotFoundError(ZyxError, LookupError):
    """A usable backend has no device of the index asked for; names the devices it has.

    ``request`` as for ``PluginError``.
    """

    def __init__(self, device: str, devices: Sequence[str], *, request: str = "") -> None:
        self.device = device
        self.devices = tuple(devices)
        self.request = request
        backend = device.partition(":")[0]
        have = ", ".join(devices)
        problem = f"backend {backend!r} has no device {device!r} (its devices: {have})"
        super().__init__(_requested(request, problem))


def _requested(request: str, problem: str) -> str:
    return f"{request}: {problem}" if request else problem


class IRError(ZyxError):
    """A kernel is malformed. Says what is wrong and at which op."""


class DTypeError(ZyxError, TypeError):
    """An array's dtype is not allowed where it is used: the device cannot hold or compute
    it (float64 where there is no fp64), or the operation does not take it."""
