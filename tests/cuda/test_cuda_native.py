"""zyx-cuda's native module without a GPU: it builds, and its calls check their arguments."""

from __future__ import annotations

import shutil
from importlib import resources
from types import ModuleType

import pytest

from zyx import native

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH"),
]


@pytest.fixture(scope="module")
def module() -> ModuleType:
    """The module as ``zyx_cuda.native`` builds it, before ``cuLaunchKernel`` is bound."""
    code = resources.files("zyx_cuda").joinpath("native.c").read_text()
    # Built under a name of its own: zyx_cuda.native binds the driver to the real one.
    built = native.load(
        "_zyx_cuda_native_test",
        code.replace("_zyx_cuda_native", "_zyx_cuda_native_test"),
        prelude=("tracker",),
    )
    if built is None:
        pytest.skip("the native module did not build here (zyx.compile's log says why)")
    return built


def test_launch_checks_its_arguments(module: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="before bind"):
        module.launch(1, 1, 1, 1, 1, 1, 1, 0, 0, 0)
    with pytest.raises(TypeError, match="10 arguments"):
        module.launch(1, 2, 3)
    with pytest.raises(OverflowError):
        module.launch(1, 1 << 32, 1, 1, 1, 1, 1, 0, 0, 0)
    with pytest.raises(OverflowError):
        module.launch(1, 1, -1, 1, 1, 1, 1, 0, 0, 0)
    with pytest.raises(TypeError):
        module.launch(1, 1, 1, 1.5, 1, 1, 1, 0, 0, 0)


def test_staging_lanes_check_their_arguments(module: ModuleType) -> None:
    lane = (1, 2, 3, 0, 1, 1, 5, 6, 7, 8, 9)
    with pytest.raises(RuntimeError, match="before bind_copies"):
        module.upload(*lane)
    with pytest.raises(TypeError, match="11 arguments"):
        module.download(1, 2)
    with pytest.raises(ValueError, match="step and a slot size"):
        module.upload(1, 2, 3, 0, 0, 1, 5, 6, 7, 8, 9)
    with pytest.raises(OverflowError):
        module.download(-1, *lane[1:])
