"""Every error zyx raises. Each one says what went wrong and, where it can, what to do."""

from __future__ import annotations

import math
import reprlib
from collections.abc import Sequence
from enum import Enum

SHOWN_CHARS = 200
"""About the most characters of one value, or of one name, that a message shows: a 300 MB
value in a config file must not make a 300 MB message."""


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
    """A configuration value is invalid. Names the source, the field path and the value,
    each cut to a readable length (``shown``); ``value`` keeps the value itself.

    ``others`` are the further problems found in the same configuration (``problems`` has
    them all): the message names the first and counts the rest.
    """

    def __init__(
        self,
        source: str,
        field: str,
        value: object,
        problem: str,
        *,
        others: Sequence[ConfigError] = (),
    ) -> None:
        self.source = source
        self.field = field
        self.value = value
        self.problem = problem
        self.others = tuple(others)
        self.alone = f"{cut(source)}: {cut(field)} = {shown(value)}: {cut(problem)}"
        """The message of this problem alone, without the count of the others."""
        more = len(self.others)
        counted = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        super().__init__(self.alone + counted)

    @property
    def problems(self) -> tuple[ConfigError, ...]:
        """This problem and the others, in the order they were found."""
        return (self, *self.others)


class ConfigWarning(UserWarning):
    """A config value zyx ignores: the section of no installed backend, given to
    ``zyx.configure()`` (a config file's is a warning that ``zyx doctor`` shows)."""


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


class _Shown(reprlib.Repr):
    """``repr`` with long strings, large containers and deep nesting shortened."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = SHOWN_CHARS
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 12
        self.maxlevel = 4

    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:  # past sys.get_int_max_str_digits(): str() refuses it
            return f"<an int of about {int(x.bit_length() * math.log10(2))} digits>"


_SHOWN = _Shown()


def shown(value: object) -> str:
    """``repr(value)``, cut to about ``SHOWN_CHARS`` characters, for messages."""
    try:
        return _SHOWN.repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still shown as something
        return f"<{type(value).__name__} object>"


def cut(text: str) -> str:
    """``text`` at most ``SHOWN_CHARS`` characters long (marked where it was cut)."""
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 3]}..."


def _requested(request: str, problem: str) -> str:
    return f"{request}: {problem}" if request else problem


class IRError(ZyxError):
    """A kernel is malformed. Says what is wrong and at which op."""


class DTypeError(ZyxError, TypeError):
    """An array's dtype is not allowed where it is used: the device cannot hold or compute
    it (float64 where there is no fp64), or the operation does not take it."""
