"""zyx-cuda's native module built for a test, under a name of its own."""

from __future__ import annotations

import shutil
from importlib import resources
from types import ModuleType

import pytest

from zyx import native


def native_module(name: str) -> ModuleType:
    """zyx-cuda's ``native.c`` built as module ``name``: what a test binds in it stays out
    of the module ``zyx_cuda.native`` binds to the driver. Skips the test where it cannot
    be built."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler 'cc' on PATH")
    code = resources.files("zyx_cuda").joinpath("native.c").read_text()
    built = native.load(name, code.replace("_zyx_cuda_native", name), prelude=("tracker",))
    if built is None:
        pytest.skip("the native module did not build here (zyx.compile's log says why)")
    return built
