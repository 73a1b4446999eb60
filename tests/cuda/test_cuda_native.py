"""zyx-cuda's native module without a GPU: its copy, and its launch's argument checks."""

from __future__ import annotations

import shutil
from importlib import resources
from types import ModuleType

import numpy as np
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
        "_zyx_cuda_native_test", code.replace("_zyx_cuda_native", "_zyx_cuda_native_test")
    )
    if built is None:
        pytest.skip("the native module did not build here (zyx.compile's log says why)")
    return built


@pytest.mark.parametrize("size", [0, 1, 15, 16, 63, 64, 65, 1000, (1 << 20) + 7])
@pytest.mark.parametrize("shift", [0, 1, 8, 13])
def test_copy_matches_every_byte(module: ModuleType, size: int, shift: int) -> None:
    rng = np.random.default_rng(size * 31 + shift)
    src = rng.integers(0, 256, size + 32, dtype=np.uint8)
    dst = np.full(size + 64, 0xA5, np.uint8)  # poison: bytes outside the copy stay
    module.copy(dst.ctypes.data + 3 + shift, src.ctypes.data + shift, size)
    np.testing.assert_array_equal(dst[3 + shift : 3 + shift + size], src[shift : shift + size])
    assert np.all(dst[: 3 + shift] == 0xA5) and np.all(dst[3 + shift + size :] == 0xA5)


def test_launch_checks_its_arguments(module: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="before bind"):
        module.launch(1, 1, 1, 1, 1, 1, 1, 0, 0, 0)
    with pytest.raises(TypeError, match="10 arguments"):
        module.launch(1, 2, 3)
    with pytest.raises(TypeError, match="3 arguments"):
        module.copy(1, 2)
