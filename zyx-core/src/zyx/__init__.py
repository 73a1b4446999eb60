"""zyx: a compute framework whose backends are plugins.

``import zyx`` is cheap: it imports no plugin, no native library, and neither numpy nor
pydantic nor pluggy. Devices are discovered on first use; the public names that need
discovery (``zyx.devices``, ``zyx.device``, ``zyx.configure``) are imported when first
touched.
"""

import importlib
from typing import TYPE_CHECKING, Any

from zyx import debug  # noqa: F401 (its NullHandler keeps zyx's records off stderr)
from zyx.errors import (
    BackendError,
    ConfigError,
    ConfigWarning,
    DeviceNotFoundError,
    ErrorStatus,
    IRError,
    PluginError,
    ZyxError,
)

if TYPE_CHECKING:
    from zyx.plugins import configure, device, devices

__version__ = "0.1.0"

_LAZY = {
    "configure": "zyx.plugins",
    "device": "zyx.plugins",
    "devices": "zyx.plugins",
    "empty_cache": "zyx.allocator",
    "load": "zyx.serialization",
    "random": "zyx.random",
    "realize": "zyx.runtime",
    "save": "zyx.serialization",
    "stats": "zyx.runtime",
}
"""Public name to the module that defines it (or is it: ``zyx.random``), imported on first
access. Every name of the array namespace (``zyx.array.__all__``) is too."""

__array_api_version__ = "2024.12"

__all__ = [
    "BackendError", "ConfigError", "ConfigWarning", "DeviceNotFoundError", "ErrorStatus", "IRError",
    "PluginError", "ZyxError",
    "__version__", "configure", "device", "devices",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    # Tools probe many dunders (__path__, __wrapped__, ...): only the standard's one imports
    # the namespace.
    if module is None and (not name.startswith("__") or name == "__array_namespace_info__"):
        array = importlib.import_module("zyx.array")
        if name in array.__all__:
            module = "zyx.array"
    if module is None:
        raise AttributeError(f"module 'zyx' has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if module == f"zyx.{name}" else getattr(imported, name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    from zyx.array import __all__ as names

    return sorted(set(globals()) | set(_LAZY) | set(names))
