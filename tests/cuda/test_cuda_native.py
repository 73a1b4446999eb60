"""zyx-cuda's native module without a GPU: it builds, and its calls check their arguments."""

from __future__ import annotations

from types import ModuleType

import pytest
from native_build import native_module

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def module() -> ModuleType:
    """The module as ``zyx_cuda.native`` builds it, before anything is bound."""
    return native_module("_zyx_cuda_native_test")


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
    lane = (1, 2, 3, 4, 1, 5, 6, 7, 8, 9)
    with pytest.raises(RuntimeError, match="before bind_copies"):
        module.upload(*lane)
    with pytest.raises(TypeError, match="10 arguments"):
        module.download(1, 2)
    with pytest.raises(ValueError, match="claim counter and a slot size"):
        module.upload(1, 2, 3, 0, 1, 5, 6, 7, 8, 9)
    with pytest.raises(OverflowError):
        module.download(-1, *lane[1:])


def test_read_checks_its_arguments(module: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="before bind_copies"):
        module.read(bytearray(4), 1, 0, 0)
    with pytest.raises(TypeError, match="4 arguments"):
        module.read(bytearray(4), 1, 4, 0, 0)  # the old form, with a byte count
    with pytest.raises(OverflowError):
        module.read(bytearray(4), -1, 0, 0)


def test_a_reader_needs_the_bound_calls(module: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="before bind and bind_copies"):
        module.Reader(None, None, None, 1, 1, 1, 1)


def test_launchers_need_the_bound_calls(module: ModuleType) -> None:
    for kind in (module.Launcher, module.Replayer):
        with pytest.raises(RuntimeError, match="before bind"):
            kind(None, None)
