"""An OpenCL device from several threads at once (``zyx.testing.stress``), through the
native launch path and through the Python one: launches, windows, deferred frees and
copies to and from a host pool, under a short switch interval."""

from __future__ import annotations

import pytest
from opencl_support import open_all

from zyx.host.pool import HostPool
from zyx.testing import stress
from zyx_opencl.device import OpenCLDevice


@pytest.mark.parametrize("window", [100, 3])
def test_threads_share_a_device(device: OpenCLDevice, window: int) -> None:
    dev = open_all(window=window)[device.index]
    report = stress.run(dev, HostPool(), threads=4, rounds=30, switch_interval=1e-6)
    assert report.ok, str(report)


def test_threads_share_a_device_through_the_python_path(
    device: OpenCLDevice, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As where zyx-opencl's native module is not built (``ZYX_NATIVE=0``)."""
    for name in ("program.enqueue_function", "scheduler.enqueuer_type", "scheduler.window_loop"):
        monkeypatch.setattr(f"zyx_opencl.{name}", lambda: None)
    dev = open_all()[device.index]
    assert dev.scheduler._window_loop is None
    report = stress.run(dev, HostPool(), threads=4, rounds=30, switch_interval=1e-6)
    assert report.ok, str(report)
