"""Config section ``cuda``: which devices, cuDNN, streams; every bad value is named."""

from __future__ import annotations

from typing import Any

import pytest

from zyx.config import flatten, read_environment, validate
from zyx.errors import ConfigError
from zyx_cuda.config import MAX_QUEUES, CudaSection

pytestmark = pytest.mark.cuda


def section(**fields: Any) -> CudaSection:
    cfg = validate(flatten({"cuda": fields}, "test.json"), {"cuda": CudaSection})
    result = cfg.section("cuda")
    assert isinstance(result, CudaSection)
    return result


def test_defaults_use_every_device_with_eight_streams() -> None:
    assert section() == CudaSection(enabled=True, device_ids=None, cudnn=True, queues=8)


@pytest.mark.parametrize("ids", [None, [], [0], [1, 0, 3]])
def test_device_ids_none_all_empty_off_or_a_list(ids: list[int] | None) -> None:
    assert section(device_ids=ids).device_ids == ids


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ([-1], "cuda.device_ids[0]"),
        ([0, 1.5], "cuda.device_ids[1]"),
        ([0, 1.0], "cuda.device_ids[1]"),
        (["1"], "cuda.device_ids[0]"),
        ([True], "cuda.device_ids[0]"),
        (0, "cuda.device_ids"),
        ("0", "cuda.device_ids"),
    ],
)
def test_non_integer_or_negative_ids_are_errors(value: Any, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        section(device_ids=value)
    assert (caught.value.source, caught.value.field) == ("test.json", field)


@pytest.mark.parametrize("queues", [0, -3, 2.5, "many", "8", True, None])
def test_queues_must_be_positive_integers(queues: Any) -> None:
    # Strict, as device_ids: true is not one stream, nor "8" eight.
    with pytest.raises(ConfigError) as caught:
        section(queues=queues)
    assert (caught.value.field, caught.value.value) == ("cuda.queues", queues)


def test_queues_are_bounded_by_the_hardware_work_queues() -> None:
    assert section(queues=MAX_QUEUES).queues == MAX_QUEUES == 32
    raw = read_environment({"ZYX_CUDA__QUEUES": "100000000"})
    with pytest.raises(ConfigError) as caught:
        validate(raw, {"cuda": CudaSection})
    assert str(caught.value) == (
        "ZYX_CUDA__QUEUES: cuda.queues = 100000000: Input should be less than or equal to 32"
    )


def test_unknown_key_lists_the_fields() -> None:
    with pytest.raises(ConfigError, match="unknown key; cuda takes: enabled, device_ids, cudnn, "):
        section(streams=4)


def test_environment_errors_name_the_variable() -> None:
    raw = read_environment({"ZYX_CUDA__DEVICE_IDS": "[0, -2]"})
    with pytest.raises(ConfigError) as caught:
        validate(raw, {"cuda": CudaSection})
    assert str(caught.value) == (
        "ZYX_CUDA__DEVICE_IDS: cuda.device_ids[1] = -2: Input should be greater than or equal to 0"
    )


def test_environment_sets_the_section() -> None:
    raw = read_environment({"ZYX_CUDA__DEVICE_IDS": "[1]", "ZYX_CUDA__CUDNN": "false"})
    cfg = validate(raw, {"cuda": CudaSection})
    assert cfg.section("cuda") == CudaSection(device_ids=[1], cudnn=False)
    assert cfg.source("cuda", "device_ids") == "ZYX_CUDA__DEVICE_IDS"
