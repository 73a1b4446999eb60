"""``DeviceInfo``: what codegen and scheduling need to know about a device.

Its own module, below both the backend contract (``zyx.backend``, which re-exports it) and
the IR's limit checks (``zyx.ir.verify``), so that neither imports the other.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from zyx.dtypes import DType, DTypeCapability


@dataclass(frozen=True)
class DeviceInfo:
    """What codegen and scheduling need to know about a device."""

    name: str
    compute: float
    """Estimated peak FLOP/s in float32 (an FMA counts two)."""
    max_global_work_dims: tuple[int, int, int]
    max_local_threads: int
    max_local_work_dims: tuple[int, int, int]
    local_mem_size: int
    max_register_bytes: int
    """Register bytes one work-item may hold before it spills: what register tiles and
    accumulators are sized by."""
    preferred_vector_size: int
    """Preferred vector width in bytes."""
    warp_size: int
    global_mem_size: int
    tensor_cores: bool = False
    shuffle: bool = False
    """The work-items of a warp exchange registers (``zyx.ir.Shuffle``: CUDA's
    ``__shfl_xor_sync``), so that lowering reduces a warp's values without local memory."""
    compute_capability: tuple[int, int] | None = None
    dtypes: Mapping[DType, DTypeCapability] = field(default_factory=dict)
    finite_math: bool = False
    """Kernels are built assuming no NaN or infinity, and no signed zero (OpenCL's
    ``-cl-finite-math-only -cl-no-signed-zeros``): such values in or out of a float op are
    undefined. Elsewhere float ops follow IEEE 754, as C's Annex F does."""
    subnormals: bool = True
    """Float ops keep subnormal values, in and out, as IEEE 754 has them. ``False``: they may
    be flushed to zero (GPUs' flush-to-zero modes; OpenCL devices without ``CL_FP_DENORM``
    for float), and the suite skips its subnormal tests."""
    private_mem_size: int = sys.maxsize
    """Bytes of register arrays (``Define`` in ``Storage.REGISTER``, spilled to memory past
    ``max_register_bytes``) that the work-items of one group may hold together; a kernel
    past it is refused at compile. A CPU runs a group on one thread's stack, where its
    items' arrays lie side by side, and past the stack a launch kills the process
    (``zyx.host.limits``). Unbounded by default: a GPU's compiler refuses a kernel past its
    per-thread limit itself."""

    def supports(self, dtype: DType, capability: DTypeCapability = DTypeCapability.STORAGE) -> bool:
        return capability in self.dtypes.get(dtype, DTypeCapability.NONE)
