"""What a conformance run certifies: the device's claims and limits, and whether the run
certifies anything at all.

The suite tests what a device claims and skips the rest, so a run's passes mean only as
much as the claims behind them: a backend that claimed no dtype passed 73 tests and
skipped 826, and the host running the IR interpreter (no C compiler) compared the
reference with itself. A run certifies nothing (``refusals`` says why) where the device
runs the interpreter, claims no f32 arithmetic (what every kernel zyx generates needs), or
skipped most of the tests it ran.

Cheap to import: the pytest plugin reads it in every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zyx.dtypes import DType, DTypeCapability

if TYPE_CHECKING:
    from zyx.backend import Device


@dataclass(frozen=True)
class Claims:
    """What a device says it can do, which a passing run certifies (JSON-able, for the
    journal of ``zyx conformance``'s child process)."""

    device: str
    """The device string: ``host``, ``opencl:0``."""
    name: str
    """``DeviceInfo.name``."""
    interpreted: bool
    """``Device.interpreted``: kernels run in the IR interpreter, the reference itself."""
    dtypes: dict[str, list[str]]
    """Each claimed dtype and its capabilities (``STORAGE``, ``ARITHMETIC``, ...)."""
    features: list[str]
    """The float semantics it keeps, and its tensor cores."""
    limits: dict[str, Any]
    """The ``DeviceInfo`` limits kernels are sized to and refused by."""

    @classmethod
    def of(cls, device: Device) -> Claims:
        info = device.info
        dtypes = {
            dtype.value: [cap.name or "" for cap in DTypeCapability if cap in caps]
            for dtype, caps in info.dtypes.items()
            if caps
        }
        features = [
            "IEEE NaN, infinities and signed zeros" if not info.finite_math else "finite math",
            "subnormals kept" if info.subnormals else "subnormals may flush to zero",
            *(["tensor cores"] if info.tensor_cores else []),
        ]
        limits = {
            "max_local_threads": info.max_local_threads,
            "max_local_work_dims": list(info.max_local_work_dims),
            "max_global_work_dims": list(info.max_global_work_dims),
            "local_mem_size": info.local_mem_size,
            "global_mem_size": info.global_mem_size,
        }
        return cls(device.name, info.name, device.interpreted, dtypes, features, limits)

    def summary(self) -> str:
        """One paragraph: the dtypes with their capabilities, the features, the limits."""
        dtypes = ", ".join(
            f"{dtype} ({'/'.join(cap.lower() for cap in caps)})"
            for dtype, caps in self.dtypes.items()
        )
        limits = ", ".join(f"{key} {value}" for key, value in self.limits.items())
        return f"dtypes: {dtypes or 'none'}; {'; '.join(self.features)}; limits: {limits}"


MOST = 0.5
"""A run that skipped more than this share of the tests it ran certifies nothing."""

INTERPRETED = "runs the IR interpreter, the very reference the suite compares with"
"""Why an interpreted device is not certified, and its label wherever it is shown."""


def refusals(claims: Claims | None, ran: int, skipped: int) -> list[str]:
    """Why a run of ``ran`` tests, ``skipped`` of them skipped, on a device that claims
    ``claims`` certifies nothing; ``[]`` where it certifies them."""
    if claims is None:
        return ["no device was opened"]
    reasons = []
    if claims.interpreted:
        reasons.append(f"{claims.device} {INTERPRETED}")
    if DTypeCapability.ARITHMETIC.name not in claims.dtypes.get(DType.F32.value, []):
        reasons.append(f"{claims.device} does not claim f32 arithmetic, which zyx's kernels need")
    if ran and skipped > MOST * ran:
        reasons.append(f"{skipped} of its {ran} tests skipped: most of the suite did not run")
    return reasons
