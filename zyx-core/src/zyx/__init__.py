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

if TYPE_CHECKING:  # what __getattr__ imports on first use, as type checkers see it
    from zyx import random as random
    from zyx.allocator import empty_cache as empty_cache
    from zyx.array.constants import *  # noqa: F403 - the array namespace, category by category
    from zyx.array.creation import *  # noqa: F403
    from zyx.array.dtypes import *  # noqa: F403
    from zyx.array.elementwise import *  # noqa: F403
    from zyx.array.indexing import *  # noqa: F403
    from zyx.array.info import *  # noqa: F403
    from zyx.array.linalg import *  # noqa: F403
    from zyx.array.manipulation import *  # noqa: F403
    from zyx.array.searching import *  # noqa: F403
    from zyx.array.sets import *  # noqa: F403
    from zyx.array.sorting import *  # noqa: F403
    from zyx.array.statistical import *  # noqa: F403
    from zyx.plugins import configure, device, devices
    from zyx.replay import jit as jit
    from zyx.runtime import realize as realize
    from zyx.runtime import stats as stats
    from zyx.serialization import load as load
    from zyx.serialization import save as save
    from zyx.tensor import Tensor as Tensor

__version__ = "0.1.0"

_LAZY = {
    "configure": "zyx.plugins",
    "device": "zyx.plugins",
    "devices": "zyx.plugins",
    "empty_cache": "zyx.allocator",
    "jit": "zyx.replay",
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
