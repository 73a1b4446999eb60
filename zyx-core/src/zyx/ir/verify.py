"""Rejects malformed kernels, saying what is wrong and at which op."""

from __future__ import annotations

from zyx.device_info import DeviceInfo
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import IRError
from zyx.ir.ops import (
    INDEX,
    MMA_FRAGMENT,
    Barrier,
    Binary,
    BOp,
    Cast,
    CommitCopies,
    Const,
    CopyAsync,
    Define,
    EndIf,
    EndLoop,
    Fma,
    If,
    Kernel,
    LdMatrix,
    Load,
    Loop,
    Mma,
    Op,
    Param,
    ParamKind,
    Range,
    Ref,
    Scope,
    Shuffle,
    Storage,
    Store,
    SymDim,
    Unary,
    UOp,
    WaitCopies,
    Where,
    format_op,
)

_INT_ONLY_BINARY = frozenset({BOp.BITXOR, BOp.BITOR, BOp.BITAND, BOp.SHL, BOp.SHR})
_BOOL_ONLY_BINARY = frozenset({BOp.OR, BOp.AND})


def verify(kernel: Kernel, info: DeviceInfo | None = None) -> None:
    """Raise ``IRError`` if ``kernel`` is malformed, or exceeds ``info``'s limits if given."""
    if not isinstance(kernel, Kernel):
        raise IRError(f"a zyx.ir.Kernel (KernelBuilder.build()) is needed, got {kernel!r:.80}")
    _Verifier(kernel).run()
    if info is not None:
        check_limits(kernel, info)


def check_limits(kernel: Kernel, info: DeviceInfo) -> None:
    """Raise ``IRError`` if the kernel's local size, constant group counts, local memory or
    register arrays exceed the device's."""
    local = kernel.local_size
    threads = local[0] * local[1] * local[2]
    if threads > info.max_local_threads:
        raise IRError(
            f"kernel {kernel.name!r}: local size {local} is {threads} work-items, "
            f"over {info.name}'s limit of {info.max_local_threads}"
        )
    for axis, (size, limit) in enumerate(zip(local, info.max_local_work_dims)):
        if size > limit:
            raise IRError(
                f"kernel {kernel.name!r}: local size {size} on axis {axis} is over "
                f"{info.name}'s limit of {limit}"
            )
    for axis, (groups, limit) in enumerate(zip(kernel.global_size, info.max_global_work_dims)):
        if isinstance(groups, int) and groups > limit:
            raise IRError(
                f"kernel {kernel.name!r}: {groups} work-groups on axis {axis} is over "
                f"{info.name}'s limit of {limit}"
            )
    local_bytes = _defined_bytes(kernel, Storage.LOCAL)
    if local_bytes > info.local_mem_size:
        raise IRError(
            f"kernel {kernel.name!r}: needs {local_bytes} bytes of local memory, "
            f"{info.name} has {info.local_mem_size}"
        )
    private = _defined_bytes(kernel, Storage.REGISTER)
    if private * threads > info.private_mem_size:
        raise IRError(
            f"kernel {kernel.name!r}: {private} bytes of register arrays per work-item, "
            f"{private * threads} for a group of {threads}, over {info.name}'s limit of "
            f"{info.private_mem_size} per group"
        )
    _check_mma(kernel, info)
    _check_shuffle(kernel, info)


def _check_shuffle(kernel: Kernel, info: DeviceInfo) -> None:
    """A ``Shuffle`` needs warps of 32 lanes that exchange registers."""
    if info.shuffle and info.warp_size == 32:
        return
    if any(isinstance(op, Shuffle) for op in kernel.ops):
        raise IRError(
            f"kernel {kernel.name!r}: its Shuffle needs warps of 32 that exchange registers; "
            f"{info.name} has warps of {info.warp_size}"
            f"{'' if info.shuffle else ' and no register exchange'}"
        )


MMA_CAPABILITY = (8, 0)
"""The NVIDIA compute capability from which tensor cores run ``Mma``'s m16n8k16 shape."""


def _check_mma(kernel: Kernel, info: DeviceInfo) -> None:
    """An ``Mma`` needs warps of 32 lanes and tensor cores that take its dtype (on NVIDIA
    from compute capability 8.0: sm_70 and sm_75 have tensor cores of other shapes)."""
    for op in kernel.ops:
        if not isinstance(op, (Mma, LdMatrix)):
            continue
        dtype = kernel.dtype_of(op.a if isinstance(op, Mma) else op.dst)
        if info.warp_size != 32 or not info.tensor_cores:
            raise IRError(
                f"kernel {kernel.name!r}: its {type(op).__name__} needs warps of 32 and tensor "
                f"cores; {info.name} has warps of {info.warp_size}"
                f"{'' if info.tensor_cores else ' and no tensor cores'}"
            )
        if not info.supports(dtype, DTypeCapability.TENSOR_CORE):
            raise IRError(f"kernel {kernel.name!r}: {info.name} has no tensor cores for {dtype}")
        if info.compute_capability is not None and info.compute_capability < MMA_CAPABILITY:
            raise IRError(
                f"kernel {kernel.name!r}: its {type(op).__name__} needs compute capability 8.0, "
                f"{info.name} has {'.'.join(map(str, info.compute_capability))}"
            )


def _defined_bytes(kernel: Kernel, storage: Storage) -> int:
    """Bytes of the kernel's ``Define``s in ``storage``, all of them: a compiler may keep
    every one for the whole kernel."""
    return sum(
        op.length * op.dtype.itemsize
        for op in kernel.ops
        if isinstance(op, Define) and op.storage is storage
    )


class _Verifier:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.ops = kernel.ops
        self.live: set[Ref] = set()
        self.scopes: list[tuple[Ref, list[Ref]]] = []  # (opening op, values defined inside)
        self.ranges: set[tuple[int, Scope]] = set()
        self.at = 0
        self.dtypes = kernel.dtypes

    def fail(self, message: str) -> IRError:
        op = self.ops[self.at]
        return IRError(f"kernel {self.kernel.name!r}, op %{self.at} ({format_op(op)}): {message}")

    def run(self) -> None:
        if not self.kernel.name.isidentifier():
            raise IRError(f"kernel name {self.kernel.name!r} is not an identifier")
        for at, op in enumerate(self.ops):
            self.at = at
            self.check(op)
            if _produces_value(op):
                self.live.add(self.at)
                if self.scopes:
                    self.scopes[-1][1].append(self.at)
        if self.scopes:
            opener = self.scopes[-1][0]
            raise IRError(
                f"kernel {self.kernel.name!r}: {type(self.ops[opener]).__name__} "
                f"at %{opener} is never closed"
            )

    def use(self, ref: Ref, *, dtype: DType | None = None, what: str = "operand") -> DType:
        if not 0 <= ref < self.at:
            raise self.fail(f"{what} %{ref} is used before it is defined")
        if ref not in self.live:
            if _produces_value(self.ops[ref]):
                raise self.fail(f"{what} %{ref} is used outside the loop or if that defines it")
            raise self.fail(f"{what} %{ref} ({type(self.ops[ref]).__name__}) has no value")
        actual = self.dtypes[ref]
        if actual is None:  # its operand was refused where it was used
            raise self.fail(f"{what} %{ref} has no value")
        if dtype is not None and actual is not dtype:
            raise self.fail(f"{what} %{ref} has dtype {actual}, expected {dtype}")
        return actual

    def storage(self, ref: Ref, *, write: bool) -> DType:
        dtype = self.use(ref, what="buffer")
        op = self.ops[ref]
        if isinstance(op, Define):
            return dtype
        if not isinstance(op, Param) or op.kind is ParamKind.VARIABLE:
            raise self.fail(f"%{ref} is not a buffer param or a Define")
        if write and op.kind is ParamKind.GLOBAL:
            raise self.fail(f"store to read-only Global param %{ref}; declare it GlobalMut")
        return dtype

    def check(self, op: Op) -> None:  # noqa: C901 - one branch per op kind reads best
        if isinstance(op, Param):
            if self.scopes:
                raise self.fail("params must come before any loop or if")
        elif isinstance(op, Range):
            self.check_range(op)
        elif isinstance(op, Const):
            self.check_const(op)
        elif isinstance(op, Define):
            if not _is_int(op.length) or op.length < 1:
                raise self.fail(f"Define of {op.length!r} elements: a positive int is needed")
        elif isinstance(op, Load):
            self.storage(op.src, write=False)
            self.use(op.index, dtype=INDEX, what="index")
        elif isinstance(op, Store):
            dtype = self.storage(op.dst, write=True)
            self.use(op.index, dtype=INDEX, what="index")
            self.use(op.value, dtype=dtype, what="stored value")
        elif isinstance(op, Cast):
            self.use(op.x)
        elif isinstance(op, Unary):
            self.check_unary(op)
        elif isinstance(op, Binary):
            self.check_binary(op)
        elif isinstance(op, Fma):
            self.check_fma(op)
        elif isinstance(op, Where):
            self.check_where(op)
        elif isinstance(op, Loop):
            self.use(op.size, dtype=INDEX, what="loop size")
            self.scopes.append((self.at, []))
        elif isinstance(op, If):
            self.use(op.cond, dtype=DType.BOOL, what="condition")
            self.scopes.append((self.at, []))
        elif isinstance(op, (EndLoop, EndIf)):
            self.close(Loop if isinstance(op, EndLoop) else If)
        elif isinstance(op, Barrier):
            if any(isinstance(self.ops[opener], If) for opener, _ in self.scopes):
                raise self.fail("barrier inside an If: not every work-item may reach it")
        elif isinstance(op, Mma):
            self.check_mma(op)
        elif isinstance(op, LdMatrix):
            self.check_ldmatrix(op)
        elif isinstance(op, CopyAsync):
            self.check_copy(op)
        elif isinstance(op, Shuffle):
            self.check_warp("Shuffle")
            self.use(op.x, what="shuffled value")
            if not _is_int(op.mask) or not 0 < op.mask < 32:
                raise self.fail(f"Shuffle at lane mask {op.mask!r}: an int from 1 to 31")
        elif isinstance(op, WaitCopies):
            if not _is_int(op.pending) or op.pending < 0:
                raise self.fail(f"WaitCopies of {op.pending!r} pending groups: an int >= 0")

    def close(self, kind: type) -> None:
        if not self.scopes or not isinstance(self.ops[self.scopes[-1][0]], kind):
            raise self.fail(f"End{kind.__name__} without a matching {kind.__name__}")
        _, inner = self.scopes.pop()
        self.live.difference_update(inner)

    def check_range(self, op: Range) -> None:
        if not _is_int(op.axis) or op.axis not in (0, 1, 2):
            raise self.fail("axis must be 0, 1 or 2")
        if (op.axis, op.scope) in self.ranges:
            raise self.fail(f"a second {op.scope.value} range on axis {op.axis}")
        self.ranges.add((op.axis, op.scope))
        if self.scopes:
            raise self.fail("ranges must come before any loop or if")
        if isinstance(op.size, SymDim):
            if op.scope is Scope.LOCAL:
                raise self.fail("a local size must be a constant")
            self.check_symdim(op.size)
        elif not _is_int(op.size) or op.size < 1:
            raise self.fail(f"range size {op.size!r} is not a positive int (nor a SymDim)")

    def check_symdim(self, dim: SymDim) -> None:
        params = self.kernel.params
        if (
            not _is_int(dim.param)
            or not 0 <= dim.param < len(params)
            or params[dim.param].kind is not ParamKind.VARIABLE
        ):
            raise self.fail(f"SymDim refers to param {dim.param!r}, which is not a Variable")
        if not params[dim.param].dtype.is_int or not _is_int(dim.div) or dim.div < 1:
            raise self.fail("SymDim needs an integer Variable and a positive divisor")

    def check_const(self, op: Const) -> None:
        expected: type | tuple[type, ...] = (
            bool if op.dtype is DType.BOOL else (int, float) if op.dtype.is_float else int
        )
        if not isinstance(op.value, expected) or (expected is int and isinstance(op.value, bool)):
            raise self.fail(f"{op.value!r} is not a {op.dtype} constant")

    def check_unary(self, op: Unary) -> None:
        dtype = self.use(op.x)
        if op.op.is_float_only and not dtype.is_float:
            raise self.fail(f"{op.op.value} needs a float operand, got {dtype}")
        if op.op is UOp.BITNOT and dtype.is_float:
            raise self.fail(f"bitnot needs an integer or bool operand, got {dtype}")
        if op.op in (UOp.NEG, UOp.ABS) and not dtype.is_signed:
            raise self.fail(f"{op.op.value} needs a signed operand, got {dtype}")

    def check_binary(self, op: Binary) -> None:
        a = self.use(op.a, what="left operand")
        b = self.use(op.b, what="right operand")
        if a is not b:
            raise self.fail(f"operand dtypes differ: {a} vs {b}; insert a Cast")
        if op.op in _INT_ONLY_BINARY and a.is_float:
            raise self.fail(f"{op.op.value} needs integer or bool operands, got {a}")
        if op.op in _BOOL_ONLY_BINARY and a is not DType.BOOL:
            raise self.fail(f"{op.op.value} is logical and needs bool operands, got {a}")
        if op.op.is_float_only and not a.is_float:
            raise self.fail(f"{op.op.value} needs float operands, got {a}")

    def check_warp(self, what: str) -> None:
        """An op of a whole warp: reached by every lane, in a kernel of whole warps."""
        if any(isinstance(self.ops[opener], If) for opener, _ in self.scopes):
            raise self.fail(f"{what} inside an If: every lane of a warp must reach it")
        try:
            local = self.kernel.local_size
        except ValueError as error:  # a symbolic local range, refused where it is
            raise self.fail(str(error)) from error
        if local[0] * local[1] * local[2] % 32:
            raise self.fail(f"{what} in a kernel of local size {local}: not whole warps of 32")

    def check_mma(self, op: Mma) -> None:
        self.check_warp("Mma")
        a = self.fragment(op.a, op.a_at, "a")
        b = self.fragment(op.b, op.b_at, "b")
        c = self.fragment(op.c, op.c_at, "c")
        if a not in (DType.F16, DType.BF16) or b is not a:
            raise self.fail(f"Mma multiplies f16 or bf16 fragments of one dtype, got {a} and {b}")
        if c is not DType.F32:
            raise self.fail(f"Mma accumulates in f32, got a {c} fragment")

    def check_ldmatrix(self, op: LdMatrix) -> None:
        self.check_warp("LdMatrix")
        if op.count not in (1, 2, 4) or not isinstance(op.trans, bool):
            raise self.fail(f"LdMatrix of {op.count!r} matrices: 1, 2 or 4 are loaded")
        dtype = self.fragment(op.dst, op.dst_at, "dst", 2 * op.count)
        if dtype not in (DType.F16, DType.BF16):
            raise self.fail(f"LdMatrix loads f16 or bf16, got {dtype}")
        source = self.use(op.src, dtype=dtype, what="source")
        src = self.ops[op.src]
        if not isinstance(src, Define) or src.storage is not Storage.LOCAL:
            raise self.fail(f"LdMatrix's source %{op.src} ({source}) is not a local Define")
        self.use(op.index, dtype=INDEX, what="index")

    def check_copy(self, op: CopyAsync) -> None:
        dst = self.ops[op.dst]
        dtype = self.use(op.dst, what="destination")
        if not isinstance(dst, Define) or dst.storage is not Storage.LOCAL:
            raise self.fail(f"CopyAsync's destination %{op.dst} ({dtype}) is not a local Define")
        src = self.ops[op.src]
        source = self.use(op.src, what="source")
        if not isinstance(src, Param) or src.kind is ParamKind.VARIABLE:
            raise self.fail(f"CopyAsync's source %{op.src} ({source}) is not a buffer param")
        if source is not dtype:
            raise self.fail(f"CopyAsync copies {source} into {dtype}: one dtype is needed")
        if not _is_int(op.count) or op.count * dtype.itemsize not in COPY_BYTES:
            raise self.fail(f"CopyAsync of {op.count!r} {dtype} elements: 4, 8 or 16 bytes")
        self.use(op.index, dtype=INDEX, what="index")
        self.use(op.src_index, dtype=INDEX, what="source index")
        self.use(op.cond, dtype=DType.BOOL, what="condition")

    def fragment(self, ref: Ref, at: int, name: str, size: int = 0) -> DType:
        """The dtype of the register ``Define`` ``ref`` holding fragment ``name`` from ``at``
        (``size`` elements, by default an ``Mma`` operand's)."""
        dtype = self.use(ref, what=f"fragment {name}")
        op = self.ops[ref]
        if not isinstance(op, Define) or op.storage is not Storage.REGISTER:
            raise self.fail(f"fragment {name} %{ref} is not a register Define")
        size = size or MMA_FRAGMENT[name]
        if not _is_int(at) or not 0 <= at <= op.length - size:
            raise self.fail(
                f"fragment {name} at {at!r}: {size} elements from it do not fit in %{ref}'s "
                f"{op.length}"
            )
        return dtype

    def check_fma(self, op: Fma) -> None:
        a = self.use(op.a, what="first factor")
        b = self.use(op.b, what="second factor")
        c = self.use(op.c, what="addend")
        if a is not b or b is not c:
            raise self.fail(f"Fma operand dtypes differ: {a}, {b}, {c}; insert a Cast")
        if a not in (DType.F32, DType.F64):
            # f16 and bf16 compute in float, where fmaf's result rounded again to 16 bits
            # is not always the one-rounding result.
            raise self.fail(f"Fma of {a}: f32 and f64 only; cast 16-bit floats to f32")

    def check_where(self, op: Where) -> None:
        self.use(op.cond, dtype=DType.BOOL, what="condition")
        a = self.use(op.a, what="first choice")
        b = self.use(op.b, what="second choice")
        if a is not b:
            raise self.fail(f"choice dtypes differ: {a} vs {b}; insert a Cast")


COPY_BYTES = (4, 8, 16)
"""The sizes of one ``CopyAsync``: PTX's ``cp.async``'s."""


def _is_int(value: object) -> bool:
    """Whether ``value`` is an int and no bool: what sizes, axes and lengths are. A float
    size would run ``ceil`` groups on one backend and fail to render on another."""
    return isinstance(value, int) and not isinstance(value, bool)


def _produces_value(op: Op) -> bool:
    return not isinstance(
        op, (Store, EndLoop, If, EndIf, Barrier, Mma, LdMatrix, CopyAsync, CommitCopies, WaitCopies)
    )
