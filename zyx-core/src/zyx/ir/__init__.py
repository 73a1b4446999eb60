"""The kernel IR: ops, a builder for writing kernels by hand, and the verifier."""

from zyx.ir.builder import KernelBuilder, Value, ceil_div
from zyx.ir.ops import (
    INDEX, Barrier, Binary, BOp, Cast, Const, Define, Dim, EndIf, EndLoop, If, Kernel, Load,
    Loop, Op, Param, ParamKind, Range, Ref, Scope, Storage, Store, SymDim, Unary, UOp,
)  # fmt: skip
from zyx.ir.verify import check_limits, verify

__all__ = [
    "INDEX", "Barrier", "Binary", "BOp", "Cast", "Const", "Define", "Dim", "EndIf", "EndLoop",
    "If", "Kernel", "KernelBuilder", "Load", "Loop", "Op", "Param", "ParamKind", "Range", "Ref",
    "Scope", "Storage", "Store", "SymDim", "Unary", "UOp", "Value", "ceil_div", "check_limits",
    "verify",
]  # fmt: skip
