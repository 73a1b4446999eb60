"""A plugin written for plugin API 1.99; zyx must refuse it before calling any hook."""

ZYX_PLUGIN_API = "1.99"


def zyx_backends() -> list[object]:
    raise AssertionError("a refused plugin's hooks must never be called")
