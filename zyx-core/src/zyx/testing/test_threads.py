"""Every public method of a pool, a device and a program may be called from any thread
(``zyx.backend``): several threads share the device under test at once."""

from __future__ import annotations

import pytest

from zyx.backend import Device
from zyx.host.pool import HostPool
from zyx.testing import stress

pytestmark = pytest.mark.zyx_area("threads")


def test_threads_share_a_device(device: Device, host_pool: HostPool) -> None:
    """Four threads allocate, write, launch a shared program and their own, copy (within
    the pool, and to and from a host pool), read and release, switching often: every
    result exact, no error, no hang, and the pool's free bytes back where they were."""
    report = stress.run(device, host_pool, threads=4, rounds=12)
    assert report.ok, str(report)
    assert report.launches == 4 * 12 * 2
