"""zyx: a compute framework whose backends are plugins.

``import zyx`` is cheap: it imports no plugin and no native library. Devices are
discovered on first use.
"""

from zyx.errors import BackendError, ConfigError, ErrorStatus, IRError, PluginError, ZyxError

__version__ = "0.1.0"

__all__ = [
    "BackendError", "ConfigError", "ErrorStatus", "IRError", "PluginError", "ZyxError",
    "__version__",
]  # fmt: skip
