"""A CUDA device from several threads at once (``zyx.testing.stress``), through the native
``Launcher`` and through the Python path: launches on shared and own programs, deferred
frees, copies to and from a host pool, under a short switch interval. Needs a GPU (the
lent H200: ``scripts/gpu-check.sh``)."""

from __future__ import annotations

import pytest

from zyx.host.pool import HostPool
from zyx.testing import stress

pytestmark = [pytest.mark.cuda, pytest.mark.gpu]


@pytest.mark.parametrize("queues", [8, 1])
def test_threads_share_a_device(gpu: None, queues: int) -> None:
    from zyx_cuda.device import CudaDevice

    device = CudaDevice(0, queues=queues)
    report = stress.run(device, HostPool(), threads=4, rounds=40, switch_interval=1e-6)
    assert report.ok, str(report)


def test_threads_share_a_device_through_the_python_path(
    gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As where zyx-cuda's native module is not built (``ZYX_NATIVE=0``)."""
    from zyx_cuda.device import CudaDevice

    monkeypatch.setattr("zyx_cuda.program.launcher_type", lambda: None)
    monkeypatch.setattr("zyx_cuda.program.launch_function", lambda: None)
    device = CudaDevice(0)
    report = stress.run(device, HostPool(), threads=4, rounds=40, switch_interval=1e-6)
    assert report.ok, str(report)
