"""A user's array program as a type checker sees it (checked by mypy in the typecheck
session, never run): the namespace's functions, the operators and the dtypes are typed."""

from typing import assert_type

import numpy as np

import zyx
from zyx.dtypes import DType
from zyx.tensor import Tensor


def layer(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    y = zyx.maximum(x @ w + b, 0.0)
    assert_type(y, Tensor)
    assert_type(-y / 2 - 1 < y, Tensor)
    y += 1
    return zyx.exp(y - zyx.max(y, axis=-1, keepdims=True))


def main() -> float:
    x = zyx.asarray(np.ones((4, 8), np.float32))
    w, b = zyx.ones((8, 3)), zyx.zeros(3)
    assert_type(x.dtype, DType)
    assert_type(zyx.float32, DType)
    out = layer(x, w, b)
    zyx.realize(out)
    assert_type(zyx.stats().launches, int)
    return float(zyx.sum(out))
