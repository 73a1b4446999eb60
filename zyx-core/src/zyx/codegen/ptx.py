"""Inline PTX of a warp's matrix ops (``Mma``, ``LdMatrix``) and of asynchronous copies
(``CopyAsync``, ``CommitCopies``, ``WaitCopies``), for the C dialects that NVIDIA's compilers
build: NVRTC's CUDA C++ and NVIDIA's OpenCL C both take GCC's ``asm volatile("..." :
outputs : inputs)`` with PTX in it, and run it on tensor cores from sm_80.

``PtxDialect`` renders those ops once for both; a dialect says how its language holds
what the PTX reads and writes:

- ``pair_word``: the 32-bit word (``unsigned``) of two 16-bit elements of a register
  fragment, the lower half the element of lower index, as PTX has them;
- ``unpair``: the statement that spreads such a word back into two elements;
- ``shared_address``: the 32-bit address in the shared window of an element of local
  memory, which ``ldmatrix`` and ``cp.async`` take.

An ``Mma`` is ``mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32``. A
fragment that only ``LdMatrix`` writes and ``Mma`` reads, in pairs (``in_words``), is held
as those 32-bit words themselves: unpacked into halves and packed again, each word cost
two instructions per use (ptxas keeps them: a SHF and a PRMT), as many as the MMAs of a
matmul's loop.

A ``CopyAsync`` is ``cp.async`` (``.cg`` for 16 bytes, bypassing L1, else ``.ca``; the
source size 0 where its condition is false, which fills zeros), ``CommitCopies`` and
``WaitCopies`` its ``commit_group`` and ``wait_group``, inline here (a dialect that
renders one source for several architectures wraps them in helpers of its own);
bounds-checked, copies at once (``zyx.codegen.c``).
"""

from __future__ import annotations

from zyx.codegen.c import CDialect
from zyx.dtypes import DType
from zyx.ir.ops import CopyAsync, Define, Kernel, LdMatrix, Mma, Ref, Storage, WaitCopies, always

HALVES = (DType.F16, DType.BF16)
"""The element types of ``Mma`` fragments that pair into 32-bit words."""

CP_ASYNC_16 = "cp.async.cg.shared.global [%0], [%1], 16, %2;"
"""A 16-byte copy (``%0`` the shared address, ``%1`` the global one, ``%2`` the bytes read)."""
CP_ASYNC = "cp.async.ca.shared.global [%0], [%1], %2, %3;"
"""A copy of 4 or 8 bytes (``%2`` their count, an immediate; ``%3`` the bytes read)."""
COMMIT_GROUP = "cp.async.commit_group;"
WAIT_GROUP = "cp.async.wait_group %0;"
"""Wait until at most ``%0`` (an immediate) groups are pending."""


def mma_instruction(dtype: DType) -> str:
    """The PTX of one m16n8k16 ``Mma`` of f16 or bf16 into f32, in place: ``%0``-``%3`` the
    accumulators, ``%4``-``%7`` a's words, ``%8``, ``%9`` b's."""
    t = "bf16" if dtype is DType.BF16 else "f16"
    return (
        f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
    )


def ldmatrix_instruction(count: int, trans: bool) -> str:
    """The PTX of an ``LdMatrix`` of ``count`` 8 x 8 matrices: ``%0``.. the words, then the
    shared address."""
    registers = ", ".join(f"%{i}" for i in range(count))
    return (
        f"ldmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16 "
        f"{{{registers}}}, [%{count}];"
    )


def in_words(kernel: Kernel, ref: Ref) -> bool:
    """Whether ``ref`` is a register ``Define`` of f16 or bf16 that only ``LdMatrix``s write
    and ``Mma``s read, each at an even offset: held as ``unsigned`` words of two elements."""
    op = kernel.ops[ref]
    if not (
        isinstance(op, Define)
        and op.storage is Storage.REGISTER
        and op.dtype in HALVES
        and op.length % 2 == 0
    ):
        return False
    for user in kernel.users.get(ref, ()):
        use = kernel.ops[user]
        if isinstance(use, LdMatrix):
            paired = use.dst == ref and use.src != ref and use.dst_at % 2 == 0
        elif isinstance(use, Mma):
            paired = use.c != ref and all(
                at % 2 == 0 for f, at in ((use.a, use.a_at), (use.b, use.b_at)) if f == ref
            )
        else:
            paired = False
        if not paired:
            return False
    return True


class PtxDialect(CDialect):
    """A C dialect that renders the warp's matrix ops and asynchronous copies as inline PTX
    (a mixin: its language's dialect comes after it among the bases, or it is the base)."""

    asm = "asm"
    """The keyword of an inline assembly statement (and ``asm volatile``'s, ``asm`` and
    ``volatile`` in turn): ``asm`` is GNU C's and C++'s, ``__asm__`` and ``__volatile__``
    are also clang's OpenCL C's, which has no ``asm``."""
    volatile = "volatile"

    def pair_word(self, fragment: str, at: int, dtype: DType) -> str:
        """The 32-bit word of elements ``at`` and ``at + 1`` of the register fragment
        ``fragment`` (not ``in_words``), of ``dtype``."""
        raise NotImplementedError

    def unpair(self, word: str, fragment: str, at: int, dtype: DType) -> str:
        """The statement that spreads ``word`` into elements ``at`` and ``at + 1`` of the
        register fragment ``fragment`` (not ``in_words``), of ``dtype``."""
        raise NotImplementedError

    def shared_address(self, pointer: str) -> str:
        """The 32-bit shared-window address of ``pointer``, into local memory."""
        raise NotImplementedError

    def global_address(self, pointer: str) -> str:
        """The 64-bit address of ``pointer``, into global memory, as ``cp.async`` takes it."""
        return pointer

    def mma(self, kernel: Kernel, op: Mma) -> str:
        dtype = kernel.dtype_of(op.a)
        c = [f"v{op.c}[{op.c_at + i}]" for i in range(4)]
        pairs = [(op.a, op.a_at + 2 * i) for i in range(4)] + [
            (op.b, op.b_at + 2 * i) for i in range(2)
        ]
        words = [
            f"v{ref}[{at // 2}]" if in_words(kernel, ref) else self.pair_word(f"v{ref}", at, dtype)
            for ref, at in pairs
        ]
        outputs = ", ".join(f'"+f"({x})' for x in c)
        inputs = ", ".join(f'"r"({w})' for w in words)
        return f'{self.asm}("{mma_instruction(dtype)}" : {outputs} : {inputs});'

    def ldmatrix(self, kernel: Kernel, op: LdMatrix) -> str:
        # volatile, and a memory clobber: it reads shared memory, which the group's stores
        # between barriers change (a plain asm of the same address would be hoisted).
        ptx = ldmatrix_instruction(op.count, op.trans)
        address = self.shared_address(f"v{op.src} + {self.expr(kernel, op.index)}")
        at = op.dst_at
        if in_words(kernel, op.dst):
            held = ", ".join(f'"=r"(v{op.dst}[{at // 2 + i}])' for i in range(op.count))
            return f'{self.asm} {self.volatile}("{ptx}" : {held} : "r"({address}) : "memory");'
        words = [f"zyx_w{i}" for i in range(op.count)]
        outputs = ", ".join(f'"=r"({w})' for w in words)
        dtype = kernel.dtype_of(op.dst)
        spread = " ".join(
            self.unpair(w, f"v{op.dst}", at + 2 * i, dtype) for i, w in enumerate(words)
        )
        asm = f'{self.asm} {self.volatile}("{ptx}" : {outputs} : "r"({address}) : "memory");'
        return f"{{ unsigned {', '.join(words)}; {asm} {spread} }}"

    def copy_async(self, kernel: Kernel, ref: Ref, op: CopyAsync) -> str:
        if self.bounds_checked:
            return super().copy_async(kernel, ref, op)
        size = op.count * kernel.dtype_of(op.dst).itemsize
        valid = "true" if always(kernel.ops[op.cond]) else self.expr(kernel, op.cond)
        dst = f"v{op.dst} + {self.expr(kernel, op.index)}"
        src = f"{self.expr(kernel, op.src)} + {self.expr(kernel, op.src_index)}"
        return self.async_copy(size, dst, src, valid)

    def async_copy(self, size: int, dst: str, src: str, valid: str) -> str:
        """The statement that copies ``size`` bytes from ``src`` (a pointer into global
        memory) to ``dst`` (into local memory), or zeros where ``valid`` is false."""
        at, src = self.shared_address(dst), self.global_address(src)
        if size == 16:
            return self.volatile_asm(CP_ASYNC_16, f'"r"({at}), "l"({src}), "r"({valid} ? 16 : 0)')
        size_ = f'"n"({size}), "r"({valid} ? {size} : 0)'
        return self.volatile_asm(CP_ASYNC, f'"r"({at}), "l"({src}), {size_}')

    def commit_copies(self) -> str:
        return "" if self.bounds_checked else self.volatile_asm(COMMIT_GROUP, "")

    def wait_copies(self, op: WaitCopies) -> str:
        return "" if self.bounds_checked else self.volatile_asm(WAIT_GROUP, f'"n"({op.pending})')

    def volatile_asm(self, ptx: str, inputs: str) -> str:
        """The statement of ``ptx`` that writes no register, reads ``inputs`` and clobbers
        memory (kept where it is: the compiler sees none of its effects)."""
        separator = f" :: {inputs} : " if inputs else " ::: "
        return f'{self.asm} {self.volatile}("{ptx}"{separator}"memory");'

    def render_op(self, kernel: Kernel, ref: Ref) -> str:
        op = kernel.ops[ref]
        if isinstance(op, Define) and in_words(kernel, ref):
            return f"unsigned v{ref}[{op.length // 2}];"
        return super().render_op(kernel, ref)
