"""Config section ``opencl``: which platforms, queues and the micro-batch window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opencl_support import DEVICES, PROBE, add_kernel, open_all, read

from zyx.config import flatten, read_environment, read_file, validate
from zyx.dtypes import DType
from zyx.errors import BackendError, ConfigError
from zyx.ir import Kernel, KernelBuilder, ParamKind
from zyx_opencl.config import MAX_QUEUES, OpenCLSection
from zyx_opencl.device import OpenCLDevice, open_devices
from zyx_opencl.native import enqueue_function

pytestmark = pytest.mark.opencl


def section(**fields: Any) -> OpenCLSection:
    cfg = validate(flatten({"opencl": fields}, "test.json"), {"opencl": OpenCLSection})
    result = cfg.section("opencl")
    assert isinstance(result, OpenCLSection)
    return result


def test_defaults_use_every_platform_with_eight_queues_and_a_window_of_100() -> None:
    assert section() == OpenCLSection(
        enabled=True, platform_ids=None, queues=8, window=100, gate=None
    )


@pytest.mark.parametrize("ids", [None, [], [0], [2, 1]])
def test_platform_ids_none_all_empty_off_or_a_list(ids: list[int] | None) -> None:
    assert section(platform_ids=ids).platform_ids == ids


@pytest.mark.parametrize("value", [[-1], [0.5], ["0"], [False], 1])
def test_non_integer_or_negative_platform_ids_are_errors(value: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        section(platform_ids=value)
    assert caught.value.source == "test.json"
    assert caught.value.field.startswith("opencl.platform_ids")


@pytest.mark.parametrize("field", ["queues", "window"])
@pytest.mark.parametrize("value", [0, -1, 1.5, "8", True, None])
def test_queues_and_window_must_be_positive_integers(field: str, value: Any) -> None:
    # Strict, as platform_ids: true is not one queue, nor "8" eight.
    with pytest.raises(ConfigError) as caught:
        section(**{field: value})
    assert (caught.value.field, caught.value.value) == (f"opencl.{field}", value)


def test_queues_are_bounded_and_the_error_names_file_field_and_value(tmp_path: Path) -> None:
    assert section(queues=MAX_QUEUES).queues == MAX_QUEUES == 64
    path = tmp_path / "config.json"
    path.write_text('{"opencl": {"queues": 100000000}}')
    with pytest.raises(ConfigError) as caught:
        validate(read_file(path), {"opencl": OpenCLSection})
    assert str(caught.value) == (
        f"{path}: opencl.queues = 100000000: Input should be less than or equal to 64"
    )


def fill_kernel() -> Kernel:
    """``x[i] = value`` for 64 elements."""
    kb = KernelBuilder("fill")
    x = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    value = kb.variable(DType.F32)
    x[kb.local(0, 64)] = value
    return kb.build()


def hazards_on_every_queue(device: OpenCLDevice) -> np.ndarray[Any, Any]:
    """One window in which the fill of ``x`` is the first command of its queue and waits for
    a read of ``x`` on every other queue: a mark of each, and the window's gate, as many
    waits as the device has queues. Returns ``x``."""
    queues = len(device.scheduler.queues)
    add, fill = device.compile(add_kernel()), device.compile(fill_kernel())
    x = device.pool.allocate(4 * 64)
    for _ in range(queues - 1):  # x has no writer yet: each read takes the least-loaded queue
        device.launch(add, [x, x, device.pool.allocate(4 * 64), 64])
    device.launch(fill, [x, 2.0])  # to the one queue left
    return read(device, x)


@pytest.mark.skipif(not DEVICES, reason=f"no OpenCL device: {PROBE.reason}")
def test_the_most_queues_never_exceed_the_native_wait_list() -> None:
    section = OpenCLSection(queues=MAX_QUEUES, window=1000, gate=True)
    device = open_all(**dict(section))[0]
    np.testing.assert_array_equal(hazards_on_every_queue(device), 2)
    if enqueue_function() is None:
        pytest.skip("no native enqueue (no C compiler or ZYX_NATIVE=0): nothing limits waits")
    # One queue more, unvalidated, exceeds the native wait list: the bound is the limit.
    beyond = OpenCLSection.model_construct(**{**dict(section), "queues": MAX_QUEUES + 1})
    with pytest.raises(BackendError, match="at most 64"):
        hazards_on_every_queue(open_devices(beyond)[0])


def test_environment_errors_name_the_variable() -> None:
    raw = read_environment({"ZYX_OPENCL__QUEUES": "0"})
    with pytest.raises(ConfigError) as caught:
        validate(raw, {"opencl": OpenCLSection})
    assert (
        str(caught.value) == "ZYX_OPENCL__QUEUES: opencl.queues = 0: Input should be greater than 0"
    )
