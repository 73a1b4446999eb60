"""The namespace itself: every name of the array API standard 2024.12 in ``zyx`` (what is out
of scope, complex dtypes and the extensions, absent and said so), and
``__array_namespace_info__()``."""

from __future__ import annotations

import pytest
from array_support import ARITHMETIC

import zyx
from zyx.backend import Device
from zyx.dtypes import DType

# The standard's names by category (its "API specification" pages), except sorting, set
# and the data-dependent searching functions: their own tests cover those.
STANDARD = {
    "constants": ["e", "inf", "nan", "newaxis", "pi"],
    "creation": [
        "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
        "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
    ],
    "data types": [
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float32", "float64",
    ],
    "data type functions": ["astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"],
    "elementwise": [
        "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh",
        "bitwise_and", "bitwise_left_shift", "bitwise_invert", "bitwise_or",
        "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "conj", "copysign", "cos",
        "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater",
        "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan", "less", "less_equal",
        "log", "log1p", "log2", "log10", "logaddexp", "logical_and", "logical_not",
        "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative", "nextafter",
        "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round", "sign",
        "signbit", "sin", "sinh", "square", "sqrt", "subtract", "tan", "tanh", "trunc",
    ],
    "indexing": ["take", "take_along_axis"],
    "inspection": ["__array_namespace_info__"],
    "linear algebra": ["matmul", "matrix_transpose", "tensordot", "vecdot"],
    "manipulation": [
        "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
        "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack",
    ],
    "searching": ["argmax", "argmin", "count_nonzero", "where"],
    "statistical": [
        "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var",
    ],
    "utility": ["all", "any", "diff"],
}  # fmt: skip
CONSTANTS = {"e", "inf", "nan", "newaxis", "pi"}


@pytest.mark.parametrize("category", sorted(STANDARD))
def test_the_namespace_has_every_name_of_the_standard(category: str) -> None:
    missing = [n for n in STANDARD[category] if not hasattr(zyx, n)]
    assert not missing, f"zyx lacks {missing}"
    uncallable = [
        n
        for n in STANDARD[category]
        if n not in CONSTANTS and category != "data types" and not callable(getattr(zyx, n))
    ]
    assert not uncallable, f"zyx's {uncallable} are not functions"


def test_zyx_log_is_the_logarithm_not_a_module() -> None:
    assert callable(zyx.log) and zyx.log.__name__ == "log"


def test_the_namespace_declares_its_version_and_is_every_arrays_namespace() -> None:
    assert zyx.__array_api_version__ == "2024.12"
    assert zyx.asarray([1.0]).__array_namespace__() is zyx


def test_complex_dtypes_and_the_extensions_are_absent_and_said_so() -> None:
    for name in ("complex64", "complex128", "linalg", "fft"):
        assert not hasattr(zyx, name), name
    capabilities = zyx.__array_namespace_info__().capabilities()
    assert capabilities["boolean indexing"] and capabilities["data-dependent shapes"]
    assert capabilities["max dimensions"] is None
    assert capabilities["extensions"] == []
    assert zyx.__array_namespace_info__().default_dtypes()["complex floating"] is None


def test_devices_and_the_default_device_are_zyxs() -> None:
    info = zyx.__array_namespace_info__()
    assert info.devices() == list(zyx.devices())
    assert info.default_device() is zyx.device()


def test_default_dtypes_are_float32_and_int64_on_every_device(array_device: Device) -> None:
    defaults = zyx.__array_namespace_info__().default_dtypes(device=array_device)
    assert defaults == {
        "real floating": zyx.float32,
        "complex floating": None,
        "integral": zyx.int64,
        "indexing": zyx.int64,
    }


KINDS = {
    "bool": {"bool"},
    "signed integer": {"int8", "int16", "int32", "int64"},
    "unsigned integer": {"uint8", "uint16", "uint32", "uint64"},
    "integral": {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"},
    "real floating": {"float16", "bfloat16", "float32", "float64"},
    "complex floating": set(),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_dtypes_of_a_kind_are_those_the_device_claims(array_device: Device, kind: str) -> None:
    found = zyx.__array_namespace_info__().dtypes(device=array_device, kind=kind)
    claimed = {n for n in KINDS[kind] if array_device.info.supports(getattr(zyx, n), ARITHMETIC)}
    assert set(found) == claimed
    assert all(getattr(zyx, name) is dtype for name, dtype in found.items())


def test_dtypes_take_a_tuple_of_kinds_and_no_kind_means_all(array_device: Device) -> None:
    info = zyx.__array_namespace_info__()
    both = info.dtypes(device=array_device, kind=("bool", "real floating"))
    assert set(both) == set(info.dtypes(device=array_device, kind="bool")) | set(
        info.dtypes(device=array_device, kind="real floating")
    )
    everything = info.dtypes(device=array_device)
    claimed = {d for d in DType if array_device.info.supports(d, ARITHMETIC)}
    assert set(everything.values()) == claimed
    assert set(info.dtypes(device=array_device, kind="numeric")) == set(everything) - {"bool"}


def test_an_unknown_kind_is_a_value_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown kind 'floaty'.*real floating"):
        zyx.__array_namespace_info__().dtypes(kind="floaty")
