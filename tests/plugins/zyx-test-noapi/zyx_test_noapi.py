"""A plugin that does not say which plugin API it was written for."""


def zyx_backends() -> list[object]:
    raise AssertionError("a refused plugin's hooks must never be called")
