"""What the namespace's functions do with an argument that is no array where the standard
asks for one: a TypeError that names the function, never an AttributeError from inside
zyx. Each function of the namespace is listed here, as taking an array or not, so that a
new one is checked too."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.tensor import Tensor

# The arguments after the array, for functions that need more than one.
AFTER: dict[str, tuple[Any, ...]] = {
    "broadcast_to": ((2, 3),), "reshape": ((-1,),), "permute_dims": ((0,),),
    "moveaxis": (0, 0), "take": ("array",), "take_along_axis": ("array",), "full_like": (1,),
    "repeat": (2,), "tile": ((2,),), "roll": (1,), "squeeze": (0,), "astype": (zyx.float32,),
    "searchsorted": ("array",), "tensordot": ("array",), "vecdot": ("array",),
    "matmul": ("array",),
}  # fmt: skip
BINARY = {
    "add", "atan2", "bitwise_and", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "copysign", "divide", "equal", "floor_divide", "greater", "greater_equal",
    "hypot", "less", "less_equal", "logaddexp", "logical_and", "logical_or", "logical_xor",
    "maximum", "minimum", "multiply", "nextafter", "not_equal", "pow", "remainder", "subtract",
}  # fmt: skip
"""Take a Python scalar for one operand (the standard), not for both."""
SEQUENCES = {"concat", "stack", "broadcast_arrays", "meshgrid"}
"""Take arrays as a sequence (``concat``, ``stack``) or one by one."""
NO_ARRAY_FIRST = {
    "arange", "asarray", "can_cast", "configure", "device", "devices", "empty", "empty_cache",
    "eye", "finfo", "from_dlpack", "full", "iinfo", "isdtype", "jit", "linspace", "load",
    "ones", "realize", "result_type", "save", "stats", "where", "zeros",
}  # fmt: skip
"""Functions whose first argument is no array (``where``'s is checked in its own tests)."""


def functions() -> list[str]:
    return sorted(
        n for n in dir(zyx) if not n.startswith("_") and inspect.isfunction(getattr(zyx, n))
    )


def test_every_function_is_listed_here() -> None:
    assert set(functions()) - NO_ARRAY_FIRST - SEQUENCES - BINARY, "nothing to check"
    unknown = {n for n in AFTER if n not in functions()}
    assert not unknown, f"gone from the namespace: {unknown}"


ARRAY_FIRST = sorted(set(functions()) - NO_ARRAY_FIRST - BINARY - SEQUENCES)


def _call(name: str, first: Any) -> None:
    array = zyx.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    rest = tuple(array if a == "array" else a for a in AFTER.get(name, ()))
    getattr(zyx, name)(first, *rest)


@pytest.mark.parametrize("name", ARRAY_FIRST)
@pytest.mark.parametrize("first", ["text", [1.0, 2.0], None, np.float32(1)], ids=type)
def test_an_array_argument_that_is_no_array_is_a_type_error(name: str, first: Any) -> None:
    with pytest.raises(TypeError, match=name):
        _call(name, first)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_two_operands_that_are_no_arrays_are_a_type_error(name: str) -> None:
    with pytest.raises(TypeError):
        getattr(zyx, name)("text", [1.0])
    with pytest.raises(TypeError):
        getattr(zyx, name)(1.0, 2.0)


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_a_sequence_of_arrays_holding_no_array_is_a_type_error(name: str) -> None:
    array = zyx.asarray(np.ones(3, np.float32))
    arguments = ([array, "text"],) if name in ("concat", "stack") else (array, "text")
    with pytest.raises(TypeError, match=name):
        getattr(zyx, name)(*arguments)


@pytest.mark.parametrize("node", [1.5, "text", np.ones(3)], ids=type)
def test_the_array_type_is_not_made_from_values(node: Any) -> None:
    with pytest.raises(TypeError, match="zyx.asarray"):
        Tensor(node)
