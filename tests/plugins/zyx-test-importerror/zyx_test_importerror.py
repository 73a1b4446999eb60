"""A plugin whose native library is missing at import, as a ctypes binding would fail."""

import ctypes

try:
    ctypes.CDLL("libzyx_test_missing.so.1")
except OSError as error:
    raise ImportError("zyx-test-importerror needs libzyx_test_missing.so.1") from error

ZYX_PLUGIN_API = "1.0"
