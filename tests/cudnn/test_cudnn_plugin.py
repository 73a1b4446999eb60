"""zyx-cudnn is declared but not implemented: installed, it is quarantined with that
reason, asking for it says so, and every other backend keeps working."""

from __future__ import annotations

import pytest

from zyx.config import BackendSection
from zyx.errors import PluginError
from zyx.plugins import Registry, State
from zyx_cudnn import plugin

pytestmark = pytest.mark.cudnn


def test_cudnn_backend_is_quarantined_as_not_implemented() -> None:
    reg = Registry({"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    plugins = {p.name: p for p in reg.plugins()}
    assert plugins["cudnn"].state is State.LOADED, plugins["cudnn"].reason
    backends = {b.name: b for b in reg.backends()}
    assert backends["cudnn"].state is State.QUARANTINED
    assert backends["cudnn"].reason == plugin.NOT_IMPLEMENTED
    with pytest.raises(
        PluginError, match=r"zyx-cudnn is not implemented yet \(its issue is open\)"
    ):
        reg.device("cudnn")
    assert reg.device("host").backend == "host"


def test_open_refuses_clearly() -> None:
    with pytest.raises(NotImplementedError, match="not implemented yet"):
        plugin.open_cudnn(plugin.CudnnSection())
    assert issubclass(plugin.CudnnSection, BackendSection)
