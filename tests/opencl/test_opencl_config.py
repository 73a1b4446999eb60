"""Config section ``opencl``: which platforms, queues and the micro-batch window."""

from __future__ import annotations

from typing import Any

import pytest

from zyx.config import flatten, read_environment, validate
from zyx.errors import ConfigError
from zyx_opencl.config import OpenCLSection

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
@pytest.mark.parametrize("value", [0, -1, 1.5, "8"])
def test_queues_and_window_must_be_positive_integers(field: str, value: Any) -> None:
    if value == "8":
        # JSON strings of digits are accepted for counts, as pydantic does by default.
        assert getattr(section(**{field: value}), field) == 8
        return
    with pytest.raises(ConfigError) as caught:
        section(**{field: value})
    assert (caught.value.field, caught.value.value) == (f"opencl.{field}", value)


def test_environment_errors_name_the_variable() -> None:
    raw = read_environment({"ZYX_OPENCL__QUEUES": "0"})
    with pytest.raises(ConfigError) as caught:
        validate(raw, {"opencl": OpenCLSection})
    assert (
        str(caught.value) == "ZYX_OPENCL__QUEUES: opencl.queues = 0: Input should be greater than 0"
    )
