"""A plugin written for plugin API 2.0; zyx must refuse it before calling any hook."""

ZYX_PLUGIN_API = "2.0"


def zyx_backends() -> list[object]:
    raise AssertionError("a refused plugin's hooks must never be called")
