"""The host device from several threads at once (``zyx.testing.stress``): a shared program's
argument array, buffers released while another thread's kernel runs, copies to and from a
second host pool in both directions at once."""

from __future__ import annotations

import pytest

from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.testing import stress


@pytest.mark.parametrize("seed", [1, 2])
def test_threads_share_the_host_device(seed: int) -> None:
    device = HostDevice(HostPool())
    report = stress.run(device, HostPool(), threads=4, rounds=40, seed=seed, switch_interval=1e-6)
    assert report.ok, str(report)
    assert report.launches == 4 * 40 * 2
