"""The front end's runtime on an OpenCL device (PoCL in CI): a graph over the host and the
OpenCL device, its copies counted, its buffers reused and given back; and several
threads at once (``zyx.testing.array_stress``). The host's half of these is in
tests/core/test_array_runtime.py."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.allocator import allocator
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.testing import array_stress
from zyx.testing.numerics import assert_close
from zyx_opencl.device import OpenCLDevice

Array = np.ndarray[Any, Any]


@pytest.fixture
def host() -> Device:
    return zyx.device("host")


def settled(*devices: Device) -> list[int]:
    """Each device's free bytes once every dead array's buffer went back to its pool."""
    gc.collect()
    zyx.empty_cache()
    for d in devices:
        d.synchronize()
    return [d.pool.free_bytes() for d in devices]


class Allocations:
    """Counts the buffers the pools of ``devices`` hand out (through monkeypatch)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *devices: Device) -> None:
        self.count = 0
        for d in devices:
            allocate = d.pool.allocate

            def counted(nbytes: int, allocate: Any = allocate) -> Any:
                self.count += 1
                return allocate(nbytes)

            monkeypatch.setattr(d.pool, "allocate", counted)


def test_a_graph_over_two_devices_copies_where_it_crosses(
    device: OpenCLDevice, host: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inputs on both devices; the host's part moves to the OpenCL device in the middle,
    the reduction there comes back and meets the host's input again: one realize, two
    copies, the result numpy's. The same graph again reuses its plan, compiles nothing
    and takes every buffer from the cache; once all is dropped and the cache emptied,
    both pools are where they were."""
    start = settled(device, host)
    allocations = Allocations(monkeypatch, device, host)
    rng = np.random.default_rng(2)
    runs, made = [], []
    for c in (1.5, -0.5):
        x = rng.standard_normal((19, 12)).astype(np.float32)
        y = rng.standard_normal((12, 19)).astype(np.float32)
        before = zyx.stats()
        on_host = zyx.asarray(x, device=host)
        there = zyx.tanh(on_host * c).to_device(device)  # host -> device
        rows = zyx.sum(zyx.matrix_transpose(there) * zyx.asarray(y, device=device), axis=0)
        back = rows.to_device(host)  # device -> host
        result = (back[:, None] + on_host)[::-1]
        zyx.realize(result)
        runs.append(zyx.stats() - before)
        xd, yd = x.astype(np.float64), y.astype(np.float64)
        want = ((np.tanh(xd * c).T * yd).sum(axis=0)[:, None] + xd)[::-1]
        assert result.device is host and there.device is device
        assert_close(result.numpy(), want, DType.F32, "two devices")
        del on_host, there, rows, back, result
        gc.collect()
        made.append(allocations.count)
    first, again = runs
    assert (first.realizes, first.copies) == (1, 2), first
    assert (again.realizes, again.plans_reused, again.copies) == (1, 1, 2), again
    assert (again.kernels_scheduled, again.kernels_compiled) == (0, 0), again
    assert again.launches == first.launches
    assert made[1] == made[0], "the second run's buffers all came from the cache"
    assert allocator.cached_bytes() > 0
    assert settled(device, host) == start, "empty_cache gave every byte back to both pools"


def test_threads_build_and_realize_programs_on_an_opencl_device(device: OpenCLDevice) -> None:
    """As tests/core's thread test, on the OpenCL device: every result right, nothing
    raised, no thread left after 20 s, the pool's free bytes exact at the end."""
    report = array_stress.run(device, threads=6, rounds=60, timeout=20.0)
    assert report.ok, str(report)


def test_threads_copy_between_the_host_and_an_opencl_device(
    device: OpenCLDevice, host: Device
) -> None:
    """The same with round trips through the host among the programs, both ways at once."""
    report = array_stress.run(device, host, threads=6, rounds=60, timeout=20.0, seed=1)
    assert report.ok, str(report)
    report = array_stress.run(host, device, threads=6, rounds=60, timeout=20.0, seed=2)
    assert report.ok, str(report)
