"""Inspection (the standard's ``__array_namespace_info__``): devices and dtypes.

Dtypes are per device: ``dtypes(device=d)`` lists the ones ``d`` can store and compute
with. zyx has no complex dtypes and provides neither the ``linalg`` nor the ``fft``
extension; ``capabilities()`` and ``default_dtypes()`` say so.
"""

from __future__ import annotations

from typing import Any

from zyx.array.dtypes import _NAMES, DEFAULT_FLOAT, DEFAULT_INDEX, DEFAULT_INT, isdtype
from zyx.dtypes import DType, DTypeCapability
from zyx.tensor import resolve_device

__all__ = ["__array_namespace_info__"]


class Info:
    """What ``zyx.__array_namespace_info__()`` returns."""

    def capabilities(self) -> dict[str, Any]:
        return {
            "boolean indexing": True,
            "data-dependent shapes": True,
            "max dimensions": None,
            "extensions": [],  # no linalg, no fft
            "complex dtypes": False,
        }

    def default_device(self) -> Any:
        return resolve_device(None)

    def devices(self) -> list[Any]:
        from zyx.plugins import devices

        return list(devices())

    def default_dtypes(self, *, device: Any = None) -> dict[str, DType | None]:
        resolve_device(device)
        return {
            "real floating": DEFAULT_FLOAT,
            "complex floating": None,  # zyx has no complex dtypes
            "integral": DEFAULT_INT,
            "indexing": DEFAULT_INDEX,
        }

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, DType]:
        target = resolve_device(device)
        wanted = DTypeCapability.STORAGE | DTypeCapability.ARITHMETIC
        return {
            _NAMES[d]: d
            for d in DType
            if target.info.supports(d, wanted) and (kind is None or isdtype(d, kind))
        }


def __array_namespace_info__() -> Info:  # noqa: N807 - the standard's name
    return Info()
