"""Core's own matmul: tiled, register-blocked kernels built in the IR for any device.

``zyx.matmul`` records a broadcast product summed over its last dim (``claims.Matmul``),
which the generic lowering runs one dot product per work-item: correct everywhere, slow.
``offer(matmuls, device)`` gives each matmul of a graph a claim whose launches are the kernels
below; the runtime races it against the generic kernels and takes it only where faster
(``zyx.runtime``), so nothing in the scheduler knows about matmuls.

A kernel is described by a ``Variant`` (plain data, so that a kernel search can time
``variants(device)`` through ``build(m, variant)`` and ``arguments``); without a search,
``default``
picks one by the kind of device:

- **CPU** (a warp of 1: the host, PoCL): a work-group of one work-item computes a
  ``block`` of outputs from operands in global memory (the caches do the tiling), its k
  loop straight-line code over the block that the C compiler vectorises: a row of the
  block is a run of consecutive columns of B. Packed variants first copy a and b into
  scratch buffers in the order the k loop reads them (a transposed b's columns would be
  16 scalar loads a step, each from another cache line).
- **GPU**: a work-group of ``threads`` work-items computes a tile of
  ``block * threads`` outputs; each step of ``depth`` along k, the group copies the tiles of
  A and B it needs into local memory (coalesced: consecutive work-items read consecutive
  addresses along the operand's contiguous dim), then each work-item accumulates its block
  in registers from them. The next step's operands are read into registers before the
  current step is computed, hiding global memory's latency behind it.
- **GPU with tensor cores** (warps of 32, ``DeviceInfo.tensor_cores`` and the dtype's
  ``TENSOR_CORE``), for f16 and bf16: the same tiles in local memory, in the operands' own
  dtype, each warp computing its block by ``zyx.ir.Mma`` (16 x 8 outputs of 16 along k each)
  from fragments it loads from them; k past its last full step reads zeros. The tile goes
  out through local memory, each warp's stores coalesced.

Operands are read through their strides (baked in: a transposed operand needs no copy of
the array, and the compiler sees unit strides), batch dims included. Accumulation is in
f32 for f16, bf16 and f32, f64 for f64, ints in their own dtype. Where the output's width
is not a multiple of the tile's, a second kernel of the same code computes the last column
of tiles with b's columns clamped to the last (and stores only the outputs that exist);
the tiles' rows past the output's last are clamped the same way. k needs no multiple: the
steps of k past the last full ``depth`` read global memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from math import prod
from typing import TYPE_CHECKING, TypeVar

from zyx.dtypes import DType, DTypeCapability
from zyx.graph.claims import Claim, Matmul, Operand
from zyx.graph.nodes import CustomLaunch
from zyx.ir.builder import KernelBuilder, Value
from zyx.ir.ops import INDEX, Kernel, ParamKind, Storage
from zyx.ir.verify import MMA_CAPABILITY

if TYPE_CHECKING:
    from zyx.backend import Buffer, Device
    from zyx.device_info import DeviceInfo

BANKS = 32
"""Banks of a GPU's local memory (NVIDIA's and AMD's), for laying out the tiles."""

GPU_GROUPS = 256
"""Work-groups from which a GPU's default tile is the largest: fewer leave SMs idle (an
H200 has 132, each running 2 groups of 256 work-items of the default)."""

MIN_WORK = 1 << 16
"""Multiply-adds from which a matmul is claimed: the generic kernel of a smaller one runs in
microseconds, and compiling and racing these would cost a second (the C compiler's)."""

PACK_LOCAL = 256
"""Work-items per group of the kernels that pack operands."""


@dataclass(frozen=True)
class Variant:
    """How a matmul kernel divides the output.

    Each work-item computes ``block`` = (rows, columns) outputs, its rows ``threads[0]``
    apart and its columns ``threads[1]`` apart (adjacent work-items, adjacent outputs); a
    work-group of ``threads[0] * threads[1]`` work-items computes a tile of
    ``block[0] * threads[0]`` rows by ``block[1] * threads[1]`` columns. ``depth`` is the
    step along k of the operand tiles a group copies into local memory; 0 reads the operands
    from global memory (a CPU's caches tile them). ``packed`` (for one work-item per group)
    first copies a and b, in the accumulator's dtype, into scratch buffers laid out as the
    kernel reads them: per tile, k runs of its ``block`` rows (or columns), contiguous.
    """

    block: tuple[int, int]
    threads: tuple[int, int] = (1, 1)
    depth: int = 0
    packed: bool = False
    mma: bool = False
    """Tensor cores (f16 and bf16 into f32): ``threads`` counts warps of ``WARP``
    work-items, each computing a ``block`` of the tile, contiguous, by ``zyx.ir.Mma``s
    of 16 x 8 outputs from fragments it loads from the tiles in local memory."""
    ldmatrix: bool = False
    """With ``mma``: the fragments loaded by ``zyx.ir.LdMatrix`` (8 x 8 matrices, four a
    load), not element by element."""
    stages: int = 0
    """2 or more (with ``mma``, ``ldmatrix`` too): the tiles of this many steps of k in
    local memory at once, copied by ``zyx.ir.CopyAsync`` 16 bytes at a time ``stages - 1``
    steps ahead of the step computed, their rows' 16-byte chunks XOR-swizzled (no
    padding), each warp's fragments of the next 16 along k loaded before it multiplies the
    last (``_Tiles.pipelined``, ``_Stages``); without ``mma``, operands of the
    accumulator's dtype (f32: no conversion on the way). 0: one step in local memory,
    copied through registers."""
    carry: bool = False
    """With ``stages``: a step's last 16 along k load the fragments of the next step's
    first too (after that step's wait and barrier, moved there from the step's start), so
    that their loads overlap its last MMAs, as CUTLASS's multistage loop does; ptxas then
    keeps more registers live (sm_90: 252 for warps of 64 x 64 where 227 did, 148 for 64 x
    32 where 126 did: one group of 256 work-items on an SM, not two; 36 bytes of spills
    for 64 x 64 with 64 along k a step)."""
    fused: bool = False
    """Float accumulators by ``zyx.ir.Fma`` (one rounding, one instruction), not a multiply
    and an add: the host's (``host_variants``), whose C compiler fuses nothing itself
    (every op rounds as in the IR). Not PoCL's: its claim with ``fma`` lost the race to
    the generic kernel (2 x 128 x 96 x 128 f32, this VM), which it won without; a GPU's
    compiler contracts a multiply and an add by itself."""

    @property
    def tile(self) -> tuple[int, int]:
        return (self.block[0] * self.threads[0], self.block[1] * self.threads[1])

    @property
    def local_size(self) -> int:
        return self.threads[0] * self.threads[1] * (WARP if self.mma else 1)


CPU_VARIANTS = (
    Variant((8, 16), packed=True),
    Variant((6, 16), packed=True),
    Variant((4, 16), packed=True),
    Variant((8, 8), packed=True),
    Variant((8, 16)),
    Variant((6, 16)),
)
"""For a CPU, default first: 8 rows of 16 columns of b (two AVX2 vectors of f32 each) from
packed operands. Measured on the 2-core AVX2 host, one thread: as fast as unpacked at
1024^3 f32 (58 ms with packing, 57), and 32x faster at 256^3 (1.0 ms, 32: unpacked, 8 rows
of a and b's rows 1 KiB apart thrash the L1 cache's sets), 6x with b transposed (its 16
columns are 16 cache lines unpacked), 2-3x in f16 and bf16 (converted once)."""

AVX512_VARIANTS = (
    Variant((8, 32), packed=True, fused=True),
    Variant((4, 32), packed=True, fused=True),
)
"""For the host where its vectors are 64 bytes (AVX-512), first: 8 rows of 32 columns of
b, two AVX-512 vectors of f32 each (the host renders kernels with ``Fma``s for them,
``zyx.host.codegen``); f64's block of 4 rows (``FUSED_BLOCK_BYTES``). One thread, on this
VM's 2-core Xeon (Sapphire Rapids, two 512-bit FMA units), 1024^3 f32: 120 GFLOP/s,
where 6 x 32 ran 117, 4 x 32 105, 8 x 16 94 (76 vectorized for 256 bits), 12 x 32 and
14 x 32 about 110 (numpy's OpenBLAS 142-152 in the same runs); 512^3 f64: 4 x 32 62,
8 x 32 45, 8 x 16 43 (numpy 69; 24 by mul+add)."""

FUSED_BLOCK_BYTES = 16 * 64
"""The most bytes of accumulators of a fused variant's block: 16 AVX-512 registers of its
32 (the rest hold b's row and a's broadcasts)."""


def host_variants(vector_bytes: int) -> tuple[Variant, ...]:
    """The host's variants, default first, for its vectors of ``vector_bytes``: the CPU's
    accumulating by ``Fma`` (``Variant.fused``), after ``AVX512_VARIANTS`` where they fit,
    then the CPU's as they are (for 16-bit float outputs: ``fits``)."""
    cpu = tuple(replace(v, fused=True) for v in CPU_VARIANTS)
    return (AVX512_VARIANTS if vector_bytes >= 64 else ()) + cpu + CPU_VARIANTS


GPU_TILE = Variant((8, 8), (16, 16), 16)
"""A GPU's tile where no pipelined variant fits (other dtypes, rows not 16-byte aligned): 128
x 128 outputs of 256 work-items, 8 x 8 each, 16 along k a step, through registers into
local memory (f32 4096^3 on the H200, 2026-12-04, each variant's kernels alone: 35.96
TFLOP/s, 33.77 with 8 a step, the other unpipelined 25-32)."""

GPU_VARIANTS = (
    Variant((8, 8), (16, 16), 32, stages=2),
    Variant((8, 8), (16, 16), 16, stages=2),
    Variant((8, 8), (16, 16), 16, stages=3),
    GPU_TILE,
    Variant((8, 8), (16, 16), 8),
    Variant((4, 8), (16, 16), 16),
    Variant((8, 4), (16, 16), 8),
    Variant((4, 4), (16, 16), 16),
    Variant((4, 4), (8, 16), 32),
)
"""For a GPU, default first: pipelined (``stages``; f32 operands of 16-byte aligned rows),
``GPU_TILE``'s tile in 2 steps of 32 along k, filled by copies into local memory with no
hop through registers, one barrier a step (sm_90 ptxas: 128 registers where
``GPU_TILE`` has 102, two groups an SM either way; its loop of 16 1024 FFMA, 164 LDS and 4
LDGSTS, ``GPU_TILE``'s 1024 FFMA, 256 LDS, 16 LDG and 16 STS); then 2 or 3 steps of 16.
Their kernels alone on an H100 SXM, 2026-12-05, f32 4096^3: 3.51 ms (39.2 TFLOP/s), 3.60,
3.61, ``GPU_TILE`` 3.79, the rest 4.06-5.47 (smaller tiles for products of few)."""

WARP = 32
"""Work-items of a warp, as ``zyx.ir.Mma`` counts them."""

MMA_VARIANTS = (
    Variant((64, 64), (2, 4), 32, mma=True, ldmatrix=True, stages=4, carry=True),
    Variant((64, 64), (2, 2), 32, mma=True, ldmatrix=True, stages=4, carry=True),
    Variant((64, 64), (4, 2), 32, mma=True, ldmatrix=True, stages=3, carry=True),
    Variant((64, 64), (2, 4), 32, mma=True, ldmatrix=True, stages=3, carry=True),
    Variant((64, 32), (2, 4), 32, mma=True, ldmatrix=True),
    Variant((64, 32), (2, 4), 32, mma=True),
    Variant((64, 64), (2, 4), 32, mma=True, ldmatrix=True, stages=3),
    Variant((64, 32), (2, 4), 32, mma=True, ldmatrix=True, stages=4),
    Variant((64, 64), (2, 4), 64, mma=True, ldmatrix=True, stages=3),
    Variant((32, 32), (2, 2), 32, mma=True),
    Variant((32, 32), (2, 2), 32, mma=True, ldmatrix=True),
    Variant((64, 64), (2, 2), 16, mma=True, ldmatrix=True),
    Variant((32, 64), (4, 2), 32, mma=True, ldmatrix=True),
)
"""For a GPU with tensor cores, f16 and bf16 only (``fits``), default first: pipelined
(``stages``; operands of 16-byte aligned rows), a 128 x 256 tile of 8 warps of 64 x 64
(128 accumulators a work-item) in 4 steps of 32 along k in local memory (96 KiB), each
step's last 16 loading the next one's first fragments (``carry``). Every variant stores its
tile through local memory (``_Tiles.store_tile``). Their kernels alone on an H100 SXM,
2026-12-07 (``matmul_bench --variants``): bf16 8192^3 447, 424, 446 and 441 TFLOP/s for
the first four (the default 417 on 12-05, its stores from the fragments); bf16 64 x 512^3
266, 276, 258 and 264 (torch 239 in the same run; 151 with the fragments' stores). Where
the rows are not aligned the default is the first that fits: a 128 x 128 tile of 8 warps,
each 64 x 32 outputs (4 x 4 MMAs a step of 16 along k: 64 accumulators a work-item),
fragments by LdMatrix (H100, 12-07: 137 TFLOP/s at 64 x 512^3; H200, 12-04, stores from
the fragments: 177.9 at 8192^3, element by element 152.9). The rest for the search: 64 x
64 tiles of 4 warps for products of few tiles; without carry (fewer registers: sm_90's
ptxas 219 for warps of 64 x 64, 126 for 64 x 32, two groups of 256 on an SM; with carry
252 and 148), 128 x 256 in 3, 128 x 128 of 8 warps of 64 x 32 in 4, and 128 x 256 with 64
along k a step in 3 (144 KiB, and 66 KiB for the output's tile)."""

COPY_BYTES = 16
"""Bytes of one ``CopyAsync`` of a pipelined variant (``stages``), ``cp.async``'s largest,
and of a row's chunk in its swizzled local memory."""


def vector(dtype: DType) -> int:
    """Elements of ``dtype`` in one ``COPY_BYTES`` copy: 8 of f16 or bf16, 4 of f32."""
    return COPY_BYTES // dtype.itemsize


MMA_PAD = 8
"""Elements that pad each row of an MMA tile in local memory: a fragment's lanes then read
32 distinct banks (16-bit elements, rows of 16 to 128 elements and their pad)."""


def variants(device: Device) -> tuple[Variant, ...]:
    """The variants worth timing on ``device``, its default first."""
    info = device.info
    if info.warp_size <= 1:
        host = device.backend == "host"
        return host_variants(info.preferred_vector_size) if host else CPU_VARIANTS
    return MMA_VARIANTS + GPU_VARIANTS if _has_mma(info) else GPU_VARIANTS


def _has_mma(info: DeviceInfo, dtype: DType | None = None) -> bool:
    """Whether ``info``'s device runs ``zyx.ir.Mma`` (of ``dtype``, where given)."""
    if info.warp_size != WARP or not info.tensor_cores:
        return False
    if info.compute_capability is not None and info.compute_capability < MMA_CAPABILITY:
        return False
    halves = (DType.F16, DType.BF16) if dtype is None else (dtype,)
    return any(h in _MMA_DTYPES and info.supports(h, DTypeCapability.TENSOR_CORE) for h in halves)


_MMA_DTYPES = (DType.F16, DType.BF16)


def fits(variant: Variant, m: Matmul, device: Device) -> bool:
    """Whether ``device`` can run ``variant`` of ``m``: its work-group and local memory."""
    info = device.info
    if variant.local_size > min(info.max_local_threads, info.max_local_work_dims[0]):
        return False
    if variant.packed and (variant.local_size > 1 or variant.depth):
        return False
    if variant.fused and not _fits_fused(variant, m):
        return False
    if variant.ldmatrix and not variant.mma:
        return False
    if variant.carry and not (variant.stages and variant.mma):
        return False
    rows, cols = variant.tile
    if any(variant.depth * n % variant.local_size for n in (rows, cols)):
        return False  # each work-item copies as many elements of a tile
    if variant.mma:
        return _fits_mma(variant, m, info)
    if variant.stages:
        same = m.a.node.dtype is m.b.node.dtype is _accumulator(m)
        return same and _fits_stages(variant, m, info)
    padded = rows + cols + 2 * max(BANKS // max(variant.depth, 1), 1)
    return variant.depth * padded * _accumulator(m).itemsize <= info.local_mem_size


def _fits_fused(variant: Variant, m: Matmul) -> bool:
    """Whether fused ``variant`` suits ``m``: its block's accumulators in
    ``FUSED_BLOCK_BYTES``, and an output of the accumulator's dtype. gcc 12 leaves the k
    loop of an f16 or bf16 output's Fmas scalar (their conversions at the stores keep the
    accumulators out of vectors): 10 GFLOP/s at 512^3 where the multiply and add of
    ``CPU_VARIANTS[0]`` ran 51-57."""
    acc = _accumulator(m)
    return m.output.dtype is acc and prod(variant.block) * acc.itemsize <= FUSED_BLOCK_BYTES


def _fits_mma(variant: Variant, m: Matmul, info: DeviceInfo) -> bool:
    """Whether ``info``'s device runs tensor-core ``variant`` of ``m``: a, b and the output
    of one dtype that its tensor cores take, blocks of whole MMAs, and the tiles (padded
    by ``MMA_PAD``) in its local memory."""
    dtype = m.a.node.dtype
    if m.b.node.dtype is not dtype or m.output.dtype is not dtype or not _has_mma(info, dtype):
        return False
    rows, cols = variant.block
    if rows % 16 or cols % 8 or variant.depth % 16 or not variant.depth:
        return False
    rows, cols = variant.tile
    if variant.local_size % cols:
        return False  # the tile's stores (``_Tiles.store_tile``): whole rows at a time
    if variant.stages:
        return _fits_stages(variant, m, info)
    a_tile = _mma_tile_length(rows, variant.depth, abs(m.a.strides[-1]) == 1)
    b_tile = _mma_tile_length(cols, variant.depth, abs(m.b.strides[-1]) != 1)
    return (a_tile + b_tile + _out_tile_length(variant)) * dtype.itemsize <= info.local_mem_size


def _out_tile_length(variant: Variant) -> int:
    """Elements of a tensor-core tile's output in local memory (``_Tiles.store_tile``)."""
    rows, cols = variant.tile
    return rows * (cols + MMA_PAD)


def _fits_stages(variant: Variant, m: Matmul, info: DeviceInfo) -> bool:
    """Whether pipelined ``variant`` (``stages``) runs ``m`` on ``info``'s device: fragments
    by LdMatrix (with ``mma``); each operand contiguous along one of its last two dims, its
    other strides, its offset and its extent along that dim multiples of a copy's elements
    (``vector``) and its buffer's address of 16 (every copy 16 aligned bytes, wholly inside
    the operand or wholly past it); whole copies for each work-item, rows of a power of two
    of copies (``_Stages``), and the stages in its local memory."""
    if (variant.mma and not variant.ldmatrix) or variant.stages < 2:
        return False
    rows, cols = variant.tile
    n = vector(m.a.node.dtype)
    for x, count, shape, k_dim in ((m.a, rows, (m.n, m.k), -1), (m.b, cols, (m.k, m.m), -2)):
        inner = -1 if x.strides[-1] == 1 else -2 if x.strides[-2] == 1 else 0
        if not inner or x.offset % n or shape[inner] % n or _misaligned(x):
            return False
        if any(s % n for i, s in enumerate(x.strides) if i != len(x.strides) + inner):
            return False
        along_k = inner == k_dim
        width = variant.depth if along_k else count
        chunks, copies = width // n, count * variant.depth // n
        if width % n or chunks & (chunks - 1) or copies % variant.local_size:
            return False
    dtype = m.a.node.dtype
    along = (m.a.strides[-1] == 1, m.b.strides[-1] != 1)
    stage = sum(
        (count if k else variant.depth) * stage_stride(variant, dtype, k, count, spread)
        for count, k, spread in zip((rows, cols), along, (False, True), strict=True)
    )
    total = variant.stages * stage + (_out_tile_length(variant) if variant.mma else 0)
    return total * dtype.itemsize <= info.local_mem_size


def _misaligned(x: Operand) -> bool:
    """Whether ``x``'s buffer, where it holds one already, has an address (an int handle:
    a pointer) that is no multiple of 16 bytes: a foreign buffer adopted from a view
    (``cp.async`` faults on it). The pools' own buffers are aligned (``cuMemAlloc``'s to
    256 bytes), and zyx-cuda copies a misaligned view instead of adopting it
    (``zyx_cuda.interop.ALIGNMENT``), as plans are cached by structure, not address; this
    keeps another backend's adopted buffers out of the pipelined variants."""
    buf = x.node.buffer
    return buf is not None and isinstance(buf.handle, int) and buf.handle % 16 != 0


def _mma_tile_length(count: int, depth: int, along_k: bool) -> int:
    """Elements of an MMA tile in local memory: ``count`` rows of a (columns of b) by
    ``depth`` along k, rows padded by ``MMA_PAD`` along its contiguous dim."""
    return count * (depth + MMA_PAD) if along_k else depth * (count + MMA_PAD)


def default(m: Matmul, device: Device) -> Variant | None:
    """The variant that runs ``m`` on ``device`` without a search, or ``None``: on a CPU
    the first that fits; on a GPU the first that makes ``GPU_GROUPS`` work-groups, or else
    the one making most."""
    fitting = [v for v in variants(device) if fits(v, m, device)]
    if not fitting or device.info.warp_size <= 1:
        return fitting[0] if fitting else None
    groups = [prod(m.batch) * -(-m.n // v.tile[0]) * -(-m.m // v.tile[1]) for v in fitting]
    enough = [v for v, g in zip(fitting, groups, strict=True) if g >= GPU_GROUPS]
    return enough[0] if enough else fitting[groups.index(max(groups))]


def offer(products: Sequence[Matmul], device: Device, search: bool = False) -> list[Claim]:
    """A claim for each matmul of ``products`` (a graph's ``claims.matmuls``) on ``device``
    of at least ``MIN_WORK`` multiply-adds that a variant fits; with ``search``, on a GPU,
    one for each variant that fits, the default first: the runtime races them
    (``zyx.race``). A CPU's default is within a few percent of its best (zyx check's MLP on
    the 2-core host: 1.74 ms a run raced, 1.83 not), not worth compiling the others (3 s
    of a first run there), as the host's generated kernels are not searched either."""
    search = search and device.info.warp_size > 1
    found = []
    for m in products:
        big = prod(m.batch) * m.n * m.m * m.k >= MIN_WORK
        variant = default(m, device) if big and m.output.device is device else None
        if variant is None or m.output.dtype not in _ACCUMULATORS:
            continue
        found.append(claim(m, variant))
        if search:
            others = [v for v in variants(device) if v != variant and fits(v, m, device)]
            found += [claim(m, v) for v in others]
    return found


def claim(m: Matmul, variant: Variant) -> Claim:
    """``m`` computed by ``variant``'s kernels (built when first asked for: a claim whose
    race was lost before is offered at every plan built, and never launched)."""

    @cache
    def launches(device: Device) -> tuple[CustomLaunch, ...]:
        return build(m, variant)

    key = ("matmul", m.batch, m.n, m.m, m.k, m.a.offset, m.a.strides, m.b.offset,
           m.b.strides, m.a.node.dtype, m.b.node.dtype, m.output.dtype, variant)  # fmt: skip
    return Claim(m.output, (m.a.node, m.b.node), key, launches, scratch(m, variant), "zyx")


def build(m: Matmul, variant: Variant) -> tuple[CustomLaunch, ...]:
    """The launches that compute ``m`` as ``variant`` says, in order; each binds its params
    to ``("src", 0)`` (a), ``("src", 1)`` (b), ``("out", 0)`` and ``("scratch", j)`` (of
    the sizes ``scratch(m, variant)``), as a ``Claim``'s do. Without packing: the tiles of
    full width, then the last column of tiles where the output's width is not a multiple of
    the tile's (either may be absent)."""
    io = (("src", 0), ("src", 1), ("out", 0))
    if variant.packed:
        cols = variant.block[1]
        packed = (("scratch", 0), ("scratch", 1), ("out", 0))
        whole = _Tiles(m, variant, 0, -(-m.m // cols), clamp_cols=m.m % cols != 0)
        tiles = CustomLaunch(whole.build(), packed)
        if not m.k:  # nothing to pack: the kernel stores zeros
            return (tiles,)
        return (
            CustomLaunch(_pack(m, variant.block), (("src", 0), ("src", 1), *packed[:2])),
            tiles,
        )
    across, rest = divmod(m.m, variant.tile[1])
    found = [_Tiles(m, variant, 0, across, clamp_cols=False).build()] if across else []
    if rest:
        found.append(_Tiles(m, variant, across, 1, clamp_cols=True).build())
    return tuple(CustomLaunch(kernel, io) for kernel in found)


def arguments(launch: CustomLaunch, a: Buffer, b: Buffer, out: Buffer,
              scratch: Sequence[Buffer] = ()) -> list[Buffer]:  # fmt: skip
    """The arguments of one of ``build``'s launches, for running it outside a plan (a
    kernel search, a test): a, b, the output and the scratch buffers, as it binds them."""
    named = {("src", 0): a, ("src", 1): b, ("out", 0): out}
    bound = []
    for arg in launch.args:
        assert isinstance(arg, tuple), arg  # build binds every param to a buffer
        bound.append(named[arg] if arg in named else scratch[arg[1]])
    return bound


def scratch(m: Matmul, variant: Variant) -> tuple[int, ...]:
    """The bytes of each scratch buffer of ``variant``'s launches: packed a and b."""
    if not variant.packed:
        return ()
    itemsize, batch = _accumulator(m).itemsize, prod(m.batch)
    rows, cols = variant.block
    return tuple(
        max(batch * -(-size // block) * block * m.k * itemsize, 1)
        for size, block in ((m.n, rows), (m.m, cols))
    )


def _pack(m: Matmul, block: tuple[int, int]) -> Kernel:
    """a and b packed, in one launch (on a busy CPU each parallel launch may wait for a
    descheduled thread): params ``(a, b, packed a, packed b)``; see ``_pack_one``."""
    kb = KernelBuilder(f"matmul_pack_{m.n}x{m.m}x{m.k}")
    acc = _accumulator(m)
    sources = kb.param(m.a.node.dtype, name="a"), kb.param(m.b.node.dtype, name="b")
    outs = (
        kb.param(acc, ParamKind.GLOBAL_MUT, name="a_packed"),
        kb.param(acc, ParamKind.GLOBAL_MUT, name="b_packed"),
    )
    parts = ((m.a, m.n, block[0], -2), (m.b, m.m, block[1], -1))
    totals = [prod(m.batch) * -(-size // n) * n * m.k for _, size, n, _ in parts]
    item = kb.group(0, -(-sum(totals) // PACK_LOCAL)) * PACK_LOCAL + kb.local(0, PACK_LOCAL)
    with kb.if_(item < totals[0]):
        _pack_one(kb, m, sources[0], outs[0], item, *parts[0])
    with kb.if_((item >= totals[0]) & (item < sum(totals))):
        _pack_one(kb, m, sources[1], outs[1], item - totals[0], *parts[1])
    return kb.build()


def _pack_one(
    kb: KernelBuilder, m: Matmul, src: Value, out: Value, item: Value,
    x: Operand, size: int, block: int, along: int,
) -> None:  # fmt: skip
    """Element ``item`` of ``x`` (a, rows along its dim -2; or b, columns along -1) in
    ``block``s: element ``((batch * tiles + tile) * k + t) * block + i`` of ``out`` is row
    (column) ``tile * block + i`` (the last where that is past ``size``) at ``t`` along k,
    in the accumulator's dtype. Adjacent work-items read adjacent elements of ``x``: along
    k where ``x`` is contiguous along k, else along its rows (columns), across the tiles."""
    tiles, other = -(-size // block), -1 if along == -2 else -2
    width = tiles * block
    if abs(x.strides[other]) == 1:  # (batch, row, t)
        t, index, batch = item % m.k, item / m.k % width, item / (m.k * width)
    else:  # (batch, t, row)
        index, t, batch = item % width, item / width % m.k, item / (m.k * width)
    tile, i = index / block, index % block
    clamped = kb.minimum(index, size - 1) if width > size else index
    at = _batch_offset(x, m.batch, batch) + clamped * x.strides[along] + t * x.strides[other]
    out[((batch * tiles + tile) * m.k + t) * block + i] = src[at].cast(_accumulator(m))


_ACCUMULATORS = {
    DType.F16: DType.F32, DType.BF16: DType.F32, DType.F32: DType.F32, DType.F64: DType.F64,
    DType.I8: DType.I8, DType.I16: DType.I16, DType.I32: DType.I32, DType.I64: DType.I64,
    DType.U8: DType.U8, DType.U16: DType.U16, DType.U32: DType.U32, DType.U64: DType.U64,
}  # fmt: skip
"""The dtype a product accumulates in: f32 for the 16-bit floats, else its own."""


def _accumulator(m: Matmul) -> DType:
    return _ACCUMULATORS.get(m.output.dtype, m.output.dtype)


def _batch_offset(x: Operand, batch: tuple[int, ...], flat: Value) -> Value:
    """``x``'s offset of the batch whose flat index (row-major over ``batch``) is ``flat``."""
    offset = flat * 0 + x.offset
    rest = flat
    for size, stride in zip(reversed(batch), reversed(x.strides[:-2]), strict=True):
        if stride and size > 1:
            offset = offset + rest % size * stride
        rest = rest / size
    return offset


class _Tiles:
    """A kernel over ``count`` columns of tiles from column ``first`` (in tiles), every
    row of tiles and every batch: one work-group per tile (see the module docstring).

    Rows past the output's last (where its height is not a multiple of the tile's) read
    a's last row and store nothing; so do columns past its last with ``clamp_cols``.
    """

    def __init__(
        self, m: Matmul, variant: Variant, first: int, count: int, clamp_cols: bool
    ) -> None:
        self.m, self.v = m, variant
        self.first, self.count = first, count
        self.clamp_rows, self.clamp_cols = m.n % variant.tile[0] != 0, clamp_cols
        edge = "_packed" if variant.packed else "_edge" if clamp_cols else ""
        kind = "_mma" if variant.mma else ""
        self.kb = kb = KernelBuilder(f"matmul{kind}{edge}_{m.n}x{m.m}x{m.k}")
        self.acc = _accumulator(m)
        self.a = kb.param(self.acc if variant.packed else m.a.node.dtype, name="a")
        self.b = kb.param(self.acc if variant.packed else m.b.node.dtype, name="b")
        self.out = kb.param(m.output.dtype, ParamKind.GLOBAL_MUT, name="out")

    def build(self) -> Kernel:
        kb, m, v = self.kb, self.m, self.v
        down = -(-m.n // v.tile[0])
        per_batch = down * self.count
        group = kb.group(0, prod(m.batch) * per_batch)
        batch, tile = group / per_batch, group % per_batch
        # Tiles down a column of the output follow each other: on a CPU, where each
        # thread runs a contiguous run of groups, they share b's columns in its cache.
        row0 = tile % down * v.tile[0]
        col0 = (tile / down + self.first) * v.tile[1]
        self.a_base = _batch_offset(m.a, m.batch, batch)
        self.b_base = _batch_offset(m.b, m.batch, batch)
        if v.mma:
            through = self.pipelined_mma if v.stages else self.tensor_cores
            through(kb.local(0, v.local_size), batch * (m.n * m.m), row0, col0)
            return kb.build()
        acc = kb.define(self.acc, v.block[0] * v.block[1])
        for i in range(v.block[0] * v.block[1]):
            acc[i] = kb.const(0, self.acc)
        if v.packed:
            self.from_packed(acc, batch * down + tile % down, batch * self.count + tile / down)
        elif v.local_size == 1:
            row0, col0 = row0 * 1, col0 * 1  # values, also where a tile's origin is 0
            self.direct(acc, row0, col0, 0, m.k)
        else:
            lid = kb.local(0, v.local_size)
            ty, tx = lid / v.threads[1], lid % v.threads[1]
            self.staged(acc, lid, row0, col0)
            row0, col0 = row0 + ty, col0 + tx
        out_base = batch * (m.n * m.m)
        for r in range(v.block[0]):
            for c in range(v.block[1]):
                row, col = row0 + r * v.threads[0], col0 + c * v.threads[1]
                self.store(out_base, row, col, acc[r * v.block[1] + c])
        return kb.build()

    def store(self, base: Value, row: Value, col: Value, value: Value) -> None:
        """The output at (``row``, ``col``), where it is one of the output's."""
        m, kb = self.m, self.kb
        value = value if value.dtype is m.output.dtype else value.cast(m.output.dtype)
        inside = [row < m.n] if self.clamp_rows else []
        inside += [col < m.m] if self.clamp_cols else []
        if not inside:
            self.out[base + row * m.m + col] = value
            return
        with kb.if_(inside[0] if len(inside) == 1 else inside[0] & inside[1]):
            self.out[base + row * m.m + col] = value

    def load_a(self, row: Value, depth: Value | int, cast: bool = True) -> Value:
        """a's element at ``row`` (of the output, clamped to it) and ``depth`` along k, in
        the accumulator's dtype (or, not ``cast``, its own)."""
        s = self.m.a.strides
        row = self.kb.minimum(row, self.m.n - 1) if self.clamp_rows else row
        x = self.a[self.a_base + row * s[-2] + depth * s[-1]]
        return x.cast(self.acc) if cast else x

    def load_b(self, depth: Value | int, col: Value, cast: bool = True) -> Value:
        s = self.m.b.strides
        col = self.kb.minimum(col, self.m.m - 1) if self.clamp_cols else col
        x = self.b[self.b_base + depth * s[-2] + col * s[-1]]
        return x.cast(self.acc) if cast else x

    def from_packed(self, acc: Value, a_tile: Value, b_tile: Value) -> None:
        """``acc`` over k from the packed operands (``_pack``), whose tiles of this
        work-item's rows and columns are ``a_tile`` and ``b_tile``."""
        rows, cols = self.v.block
        a_base, b_base = a_tile * (self.m.k * rows), b_tile * (self.m.k * cols)
        with self.kb.loop(self.m.k) as t:
            a_step, b_step = a_base + t * rows, b_base + t * cols
            self.product(acc, lambda r: self.a[a_step + r], lambda c: self.b[b_step + c])

    def direct(self, acc: Value, row0: Value, col0: Value, start: int, stop: int) -> None:
        """``acc`` over k from ``start`` to ``stop``, its operands from global memory, for
        the work-item whose first output is (``row0``, ``col0``)."""
        v = self.v
        with self.kb.loop(stop - start) as t:
            depth = t + start if start else t
            self.product(acc, lambda r: self.load_a(row0 + r * v.threads[0], depth),
                         lambda c: self.load_b(depth, col0 + c * v.threads[1]))  # fmt: skip

    def staged(self, acc: Value, lid: Value, row0: Value, col0: Value) -> None:
        """The blocks of a work-group through local memory, ``depth`` of k at a time, then
        the rest of k past the last full step from global memory."""
        kb, m, v = self.kb, self.m, self.v
        rows, cols = v.tile
        ty, tx = lid / v.threads[1], lid % v.threads[1]
        if v.stages:

            def step_of(a: _Stages, b: _Stages, step: Value, ahead: Callable[[], None]) -> None:
                ahead()
                for d in range(v.depth):  # unrolled: the tiles' addresses are constant offsets
                    self.from_tiles(acc, a, b, d, ty, tx)

            self.pipelined(lid, row0, col0, step_of)
            return
        steps = m.k // v.depth
        if steps:
            a_copy = _Copy(kb, self.acc, lid, v, rows, along_k=abs(m.a.strides[-1]) == 1)
            b_copy = _Copy(kb, self.acc, lid, v, cols, along_k=abs(m.b.strides[-1]) != 1)

            def read(k0: Value | int) -> None:
                a_copy.read(lambda e, d: self.load_a(row0 + e, d + k0))
                b_copy.read(lambda e, d: self.load_b(d + k0, col0 + e))

            def compute() -> None:
                for d in range(v.depth):  # unrolled: the tiles' addresses are constant offsets
                    self.from_tiles(acc, a_copy, b_copy, d, ty, tx)

            self.k_loop(steps, a_copy, b_copy, read, compute)
        if m.k % v.depth:
            self.direct(acc, row0 + ty, col0 + tx, steps * v.depth, m.k)

    def k_loop(
        self, steps: int, a_copy: _Copy, b_copy: _Copy, read: Callable[[Value | int], None],
        compute: Callable[[], None],
    ) -> None:  # fmt: skip
        """The k loop through local memory: each step's tiles written, the next step's
        operands read into registers (global memory's latency hidden behind this step's
        work), this step computed from the tiles."""
        kb = self.kb
        read(0)
        with kb.loop(steps) as step:
            a_copy.write()
            b_copy.write()
            kb.barrier()
            read(kb.minimum(step + 1, steps - 1) * self.v.depth)  # the next step's (no branch)
            compute()
            kb.barrier()

    def tensor_cores(self, lid: Value, out_base: Value, row0: Value, col0: Value) -> None:
        """The tile by tensor cores (``Variant.mma``): through local memory ``depth`` of k
        at a time as ``staged``, the last step where ``depth`` does not divide k reading
        zeros past k; then each warp stores its block."""
        kb, m, v = self.kb, self.m, self.v
        rows, cols = v.tile
        a_copy = _Copy(kb, m.a.node.dtype, lid, v, rows, along_k=abs(m.a.strides[-1]) == 1)
        b_copy = _Copy(kb, m.b.node.dtype, lid, v, cols, along_k=abs(m.b.strides[-1]) != 1)
        warp = _Warp(kb, lid, v)

        def read(k0: Value | int, past_k: bool = False) -> None:
            def within(load: Callable[[Value | int], Value], d: Value) -> Value:
                if not past_k:
                    return load(d)  # every step but a last partial one: d < k
                return kb.where(d < m.k, load(kb.minimum(d, m.k - 1)), 0)

            a_copy.read(lambda e, d: within(lambda t: self.load_a(row0 + e, t, False), d + k0))
            b_copy.read(lambda e, d: within(lambda t: self.load_b(t, col0 + e, False), d + k0))

        steps, rest = divmod(m.k, v.depth)
        if steps:
            self.k_loop(steps, a_copy, b_copy, read, lambda: warp.step(a_copy, b_copy))
        if rest:
            read(steps * v.depth, past_k=True)
            a_copy.write()
            b_copy.write()
            kb.barrier()
            warp.step(a_copy, b_copy)
        self.store_tile(warp, lid, out_base, row0, col0)

    def pipelined_mma(self, lid: Value, out_base: Value, row0: Value, col0: Value) -> None:
        """The tile by tensor cores through ``pipelined``'s stages; each warp loads its
        fragments of 16 along k before the MMAs of the 16 before (their loads' latency
        hidden behind them); with ``carry`` a step's wait and barrier move to before its
        last 16, which load the next step's first. Then each warp stores its block."""
        v = self.v
        warp = _Warp(self.kb, lid, v)
        carried: list[tuple[Value, Value]] = []  # with carry: a step's first fragments

        def compute(a: _Stages, b: _Stages, step: Value, ahead: Callable[[], None]) -> None:
            held = carried[0] if carried else warp.fragments(a, b, 0)
            for k0 in range(0, v.depth, 16):
                if k0 == 0:
                    ahead()
                if k0 + 16 < v.depth:
                    following = warp.fragments(a, b, k0 + 16)
                elif carried:
                    self.await_step(step + 1)
                    following = warp.fragments(a, b, 0, into=carried[0])
                else:
                    following = held  # the step's last 16: the next step loads its own
                warp.multiply(*held)
                held = following

        def first(a: _Stages, b: _Stages) -> None:
            carried.append(warp.fragments(a, b, 0))

        self.pipelined(lid, row0, col0, compute, first if v.carry else None)
        self.store_tile(warp, lid, out_base, row0, col0)

    def store_tile(
        self, warp: _Warp, lid: Value, out_base: Value, row0: Value, col0: Value
    ) -> None:
        """The warps' blocks stored into the output through local memory. From its MMA
        fragments a warp's store writes 2 of 8 bytes in each of 8 rows: 8 sectors for 2
        sectors' bytes. So the work-group first writes its tile, in the output's dtype, to
        local memory (rows padded by ``MMA_PAD``: a fragment's 8 rows x 4 pairs in 32
        banks), and then stores it row by row, a warp's store 32 consecutive elements, as
        CUTLASS's epilogue does. H100 SXM, 2026-12-07, the default's kernel alone: bf16
        8192^3 448 TFLOP/s where the fragments' stores ran 416, 64 x 512^3 272 where 151
        (with no stores at all 453 and 327)."""
        kb, m, v = self.kb, self.m, self.v
        rows, cols = v.tile
        stride = cols + MMA_PAD
        tile = kb.define(m.output.dtype, _out_tile_length(v), Storage.LOCAL)
        for row, col, value in warp.outputs():
            tile[row * stride + col] = value.cast(m.output.dtype)
        kb.barrier()
        first, col = lid / cols, lid % cols  # a work-item's column: the same in each row
        per_pass = v.local_size // cols  # rows the group stores at once (``_fits_mma``)
        for q in range(rows // per_pass):
            row = first + q * per_pass
            self.store(out_base, row0 + row, col0 + col, tile[row * stride + col])

    def pipelined(
        self, lid: Value, row0: Value, col0: Value,
        compute: Callable[[_Stages, _Stages, Value, Callable[[], None]], None],
        carried: Callable[[_Stages, _Stages], None] | None = None,
    ) -> None:  # fmt: skip
        """The k loop through ``stages`` steps of k in local memory (``Variant.stages``), as
        CUTLASS's multistage main loop: the copies of the first ``stages - 1`` steps are
        issued before the loop, a group each. Each step starts with a wait for its own
        group (the newer ``stages - 2`` may stay in flight) and a barrier (every warp's
        copies seen, and every warp done with the step before: ``await_step``);
        ``compute(a, b, step, ahead)`` then computes it from the stages, calling ``ahead()``
        to issue the copies of the step ``stages - 1`` ahead, into the stage of the step
        before. With ``carried`` (``carry``) ``compute`` awaits the next step itself, before
        its end, and ``carried(a, b)`` first loads what the first step needs of it. Past k
        (the last step where ``depth`` does not divide it) the copies are of zeros; rows
        and columns past the output's are clamped, as ``load_a`` clamps."""
        kb, m, v = self.kb, self.m, self.v
        rows, cols = v.tile
        a = _Stages(kb, m.a.node.dtype, lid, v, rows, along_k=m.a.strides[-1] == 1)
        b = _Stages(kb, m.b.node.dtype, lid, v, cols, along_k=m.b.strides[-1] != 1, spread=True)
        self.tiles = (a, b)
        steps = -(-m.k // v.depth)
        sa, sb = m.a.strides, m.b.strides

        def issue(step: Value | int) -> None:
            k0 = step * v.depth
            stage = step % v.stages

            def inside(d: Value) -> Value | bool:
                return True if m.k % v.depth == 0 else k0 + d < m.k

            def a_at(e: Value, d: Value) -> Value:
                row = kb.minimum(row0 + e, m.n - (1 if a.k_inner else a.vector))
                return self.a_base + row * sa[-2] + (k0 + d) * sa[-1]

            def b_at(e: Value, d: Value) -> Value:
                col = kb.minimum(col0 + e, m.m - (1 if b.k_inner else b.vector))
                return self.b_base + (k0 + d) * sb[-2] + col * sb[-1]

            a.issue(self.a, stage, a_at, inside)
            b.issue(self.b, stage, b_at, inside)

        for first in range(v.stages - 1):
            if first < steps:
                issue(first)
            kb.commit_copies()  # a group each, however few the steps: the waits count them
        if carried is not None:
            self.await_step(0)
            carried(a, b)
        with kb.loop(steps) as step:
            if carried is None:
                self.await_step(step)
            else:
                self.read_step(step)

            def ahead() -> None:
                with kb.if_(step + (v.stages - 1) < steps):
                    issue(step + (v.stages - 1))
                kb.commit_copies()
                self.read_step(step)

            compute(a, b, step, ahead)
        kb.wait_copies(0)  # none is left in flight at the kernel's end (all empty groups)

    def await_step(self, step: Value | int) -> None:
        """``step``'s copies waited for, a barrier, then its stages read."""
        self.kb.wait_copies(self.v.stages - 2)
        self.kb.barrier()
        self.read_step(step)

    def read_step(self, step: Value | int) -> None:
        """The stages of ``step`` read from now on (``_Stages.base``)."""
        for tile in self.tiles:
            tile.base = step % self.v.stages * tile.length

    def from_tiles(self, acc: Value, a: _Tile, b: _Tile, d: int, ty: Value, tx: Value) -> None:
        """``acc += a * b`` for step ``d`` of the tiles in local memory."""
        t0, t1 = self.v.threads
        self.product(acc, lambda r: a.at(d, ty + r * t0), lambda c: b.at(d, tx + c * t1))

    def product(
        self, acc: Value, a_at: Callable[[int], Value], b_at: Callable[[int], Value]
    ) -> None:
        """``acc += a * b`` for one step of k: ``a_at(r)`` is the work-item's row ``r`` of
        a, ``b_at(c)`` its column ``c`` of b; floats by ``Fma`` where ``Variant.fused``."""
        rows, cols = self.v.block
        fused = self.v.fused and self.acc.is_float
        y = [b_at(c) for c in range(cols)]
        for r in range(rows):
            x = a_at(r)
            for c in range(cols):
                at = r * cols + c
                acc[at] = self.kb.fma(x, y[c], acc[at]) if fused else acc[at] + x * y[c]


class _Warp:
    """A warp's block of an MMA tile (``Variant.mma``): its accumulators, in ``Mma``'s C
    fragments of 16 x 8 outputs (row-major over the block), and its steps along k."""

    def __init__(self, kb: KernelBuilder, lid: Value, v: Variant) -> None:
        self.kb, self.v = kb, v
        self.across, self.down = v.block[1] // 8, v.block[0] // 16  # MMAs along a row, down
        lane, warp = lid % WARP, lid / WARP
        self.g, self.t = lane / 4, lane % 4
        self.matrix, self.row = lane / 8, lane % 8  # whose row's address a lane gives LdMatrix
        self.row0 = warp / v.threads[1] * v.block[0]  # the block's origin in the tile
        self.col0 = warp % v.threads[1] * v.block[1]
        self.acc = kb.define(DType.F32, self.down * self.across * 4)
        for i in range(self.down * self.across * 4):
            self.acc[i] = kb.const(0, DType.F32)

    def step(self, a: _Copy, b: _Copy) -> None:
        """``acc += a @ b`` over the tiles' ``depth``, 16 along k an MMA; each 16 loads the
        fragments of a's rows and b's columns of this warp's block first."""
        for k0 in range(0, self.v.depth, 16):
            self.multiply(*self.fragments(a, b, k0))

    def fragments(
        self, a: _Tile, b: _Tile, k0: int, into: tuple[Value, Value] | None = None
    ) -> tuple[Value, Value]:
        """This warp's fragments of a and b at ``k0`` along k of the tiles, in new
        registers or ``into`` these."""
        kb = self.kb
        fa, fb = into or (
            kb.define(a.tile.dtype, self.down * 8),
            kb.define(b.tile.dtype, self.across * 4),
        )
        (self.matrices if self.v.ldmatrix else self.elements)(a, b, fa, fb, k0)
        return fa, fb

    def multiply(self, fa: Value, fb: Value) -> None:
        """``acc += a @ b`` of 16 along k, from fragments ``fa`` and ``fb``."""
        for r in range(self.down):
            for c in range(self.across):
                self.kb.mma(self.acc, fa, fb, (r * self.across + c) * 4, r * 8, c * 4)

    def elements(self, a: _Tile, b: _Tile, fa: Value, fb: Value, k0: int) -> None:
        """The fragments at ``k0`` along k, element by element, as ``Mma`` lays them out."""
        g, t = self.g, self.t
        a_rows, b_cols = self.row0 + g, self.col0 + g
        for r in range(self.down):
            for i in range(8):
                d = k0 + i % 2 + i // 4 * 8
                fa[r * 8 + i] = a.at(t * 2 + d, a_rows + (r * 16 + i // 2 % 2 * 8))
        for c in range(self.across):
            for i in range(4):
                fb[c * 4 + i] = b.at(t * 2 + (k0 + i % 2 + i // 2 * 8), b_cols + c * 8)

    def matrices(self, a: _Tile, b: _Tile, fa: Value, fb: Value, k0: int) -> None:
        """The fragments at ``k0`` along k by ``LdMatrix``, four 8 x 8 matrices at a time:
        an A fragment's (rows, then k: 0-7 x 0-7, 8-15 x 0-7, 0-7 x 8-15, 8-15 x 8-15) and two
        B fragments' (k, then columns: 0-7 x 0-7, 8-15 x 0-7, then 8-15 columns), transposed
        where the tile holds k outer."""
        kb, j = self.kb, self.matrix
        for r in range(self.down):
            rows, depths = self.row0 + (r * 16) + j % 2 * 8, j / 2 * 8 + k0
            kb.ldmatrix(fa, a.tile, self.start(a, depths, rows), 4, not a.k_inner, r * 8)
        for c in range(0, self.across, 2):
            count = 4 if c + 1 < self.across else 2
            cols, depths = self.col0 + (c * 8) + j / 2 * 8, j % 2 * 8 + k0
            kb.ldmatrix(fb, b.tile, self.start(b, depths, cols), count, not b.k_inner, c * 4)

    def start(self, tile: _Tile, d: Value, e: Value) -> Value:
        """Where this lane's row of its matrix starts in ``tile``: the matrix's origin at
        ``d`` along k and ``e`` along the rows (columns), moved by the lane's row along the
        tile's contiguous dim's other."""
        return tile.offset(d, e + self.row) if tile.k_inner else tile.offset(d + self.row, e)

    def outputs(self) -> list[tuple[Value, Value, Value]]:
        """(row, column) in the tile and value of each of this work-item's outputs."""
        rows, cols = self.row0 + self.g, self.col0 + self.t * 2
        found = []
        for r in range(self.down):
            for c in range(self.across):
                for i in range(4):
                    value = self.acc[(r * self.across + c) * 4 + i]
                    found.append((rows + (r * 16 + i // 2 * 8), cols + (c * 8 + i % 2), value))
        return found


class _Copy:
    """A work-group's copy of an operand's tile (``depth`` x ``count`` elements: rows of a
    or columns of b) from global memory into local memory, through registers.

    Each work-item copies elements ``lid + q * local_size``; consecutive elements run along
    k where the operand is contiguous along k (``along_k``), else along its rows or columns,
    so that adjacent work-items read adjacent addresses. The tile is held ``[d][e]``, so
    that adjacent work-items' reads of it are adjacent too; copied along k, a row of it is
    padded by ``BANKS // depth`` elements, so that the work-items of a warp, storing
    ``BANKS // depth`` rows of ``depth``, each store to a bank of their own.

    For tensor cores (``mma``) the tile is held with k contiguous where the operand is
    (``[e][d]`` along k, else ``[d][e]``), each row padded by ``MMA_PAD``: a warp's stores
    are adjacent, and its fragments' loads (``Mma``: 8 rows by 4 pairs along k) each hit a
    bank of their own.
    """

    def __init__(
        self, kb: KernelBuilder, dtype: DType, lid: Value, v: Variant, count: int, along_k: bool
    ) -> None:
        self.k_inner = v.mma and along_k
        if v.mma:
            self.stride = (v.depth if along_k else count) + MMA_PAD
            length = _mma_tile_length(count, v.depth, along_k)
        else:
            self.stride = count + (max(BANKS // v.depth, 1) if along_k else 0)
            length = v.depth * self.stride
        self.tile = kb.define(dtype, length, Storage.LOCAL)
        per_item = v.depth * count // v.local_size
        self.held = kb.define(dtype, per_item)
        self.places: list[tuple[Value, Value]] = []
        run = v.depth if along_k else count  # consecutive elements along the contiguous dim
        if v.local_size % run == 0:
            # Element q's place is the first's, moved by a constant: its address too, an
            # immediate offset, where the division of each element's index is a register.
            step = v.local_size // run
            e0, d0 = (lid / run, lid % run) if along_k else (lid % run, lid / run)
            for q in range(per_item):
                self.places.append((e0 + q * step, d0) if along_k else (e0, d0 + q * step))
        for q in range(len(self.places), per_item):
            e = lid + q * v.local_size
            self.places.append((e / v.depth, e % v.depth) if along_k else (e % count, e / count))

    def read(self, load: Callable[[Value, Value], Value]) -> None:
        """Hold this work-item's elements: ``load(e, d)`` reads element ``e`` of the tile's
        rows or columns at ``d`` along k."""
        for q, (e, d) in enumerate(self.places):
            self.held[q] = load(e, d)

    def write(self) -> None:
        for q, (e, d) in enumerate(self.places):
            self.tile[self.offset(d, e)] = self.held[q]

    def at(self, d: Value | int, e: Value) -> Value:
        """Element ``e`` of the tile at ``d`` along k (once written)."""
        return self.tile[self.offset(d, e)]

    def offset(self, d: Value | int, e: Value) -> Value:
        return e * self.stride + d if self.k_inner else e + d * self.stride


class _Stages:
    """A work-group's ``stages`` tiles of an operand in local memory (``Variant.stages``),
    each ``depth`` x ``count`` elements (rows of a or columns of b), copied by
    ``CopyAsync``s of ``vector`` elements (16 bytes) along the operand's contiguous dim.

    A stage is held as ``_Copy`` holds its tile for tensor cores, with k contiguous where
    the operand is (``[e][d]``), else ``[d][e]``, but unpadded: its rows of ``width``
    elements are chunks of 16 bytes, for tensor cores chunk ``c`` of row ``r`` held at chunk
    ``c ^ (r / R % min(chunks, 8))``, ``R`` the rows of a 128-byte line (``8 / chunks``, at
    least 1). The 8 rows an ``LdMatrix`` matrix reads (8 consecutive, from a multiple of 8,
    one chunk each) then lie in 8 different 16-byte columns of banks, and so do the
    chunks each 8 work-items of a warp copy (consecutive chunks of a row or two); the
    elements of one chunk stay consecutive.
    """

    def __init__(
        self, kb: KernelBuilder, dtype: DType, lid: Value, v: Variant, count: int, along_k: bool,
        spread: bool = False,
    ) -> None:  # fmt: skip
        self.kb = kb
        self.k_inner = along_k
        self.swizzle = v.mma
        """Only for tensor cores: ``LdMatrix``'s rows of a chunk each meet in one bank
        unswizzled. The others pad instead (``stage_stride``), which keeps their addresses
        constant offsets."""
        self.vector = vector(dtype)
        self.width = v.depth if along_k else count
        self.stride = stage_stride(v, dtype, along_k, count, spread)
        """Elements from a row of a stage to the next: ``width``, or with a pad."""
        self.length = (count if along_k else v.depth) * self.stride
        """Elements of one stage."""
        self.tile = kb.define(dtype, v.stages * self.length, Storage.LOCAL)
        self.base: Value | int = 0
        """Where the stage that ``offset`` reads starts (the k loop sets it)."""
        chunks = self.width // self.vector
        step = v.local_size // chunks if v.local_size % chunks == 0 else 0
        self.places: list[tuple[Value, Value]] = []
        for q in range(count * v.depth // self.vector // v.local_size):
            if step:  # a work-item's chunk is the same in each row it copies: one register
                row, chunk = lid / chunks + q * step, lid % chunks
            else:
                copy = lid + q * v.local_size
                row, chunk = copy / chunks, copy % chunks
            self.places.append((row, chunk))
        self.held = [self.chunk_at(row, chunk) for row, chunk in self.places]
        """Where each of a work-item's copies lies in a stage."""

    def chunk_at(self, row: Value, chunk: Value) -> Value:
        """Where ``chunk`` of ``row`` starts in a stage."""
        if not self.swizzle:
            return row * self.stride + chunk * self.vector
        return swizzled(row, chunk, self.width, self.vector)

    def issue(
        self, src: Value, stage: Value | int, at: Callable[[Value, Value], Value],
        inside: Callable[[Value], Value | bool],
    ) -> None:  # fmt: skip
        """This work-item's copies into ``stage``: ``at(e, d)`` is where the copy of element
        ``e`` of the tile's rows or columns at ``d`` along k starts in ``src``, and the
        copy is of zeros where ``inside(d)`` is false."""
        for (row, chunk), held in zip(self.places, self.held, strict=True):
            line = chunk * self.vector
            e, d = (row, line) if self.k_inner else (line, row)
            where = stage * self.length + held
            self.kb.copy_async(self.tile, where, src, at(e, d), self.vector, inside(d))

    def offset(self, d: Value | int, e: Value) -> Value:
        """Where element ``e`` of the tile's rows or columns at ``d`` along k lies, in the
        stage from ``base``."""
        kb, shift = self.kb, self.vector.bit_length() - 1
        row, line = (e, d) if self.k_inner else (d, e)
        if not self.swizzle:
            return kb.value(row, INDEX) * self.stride + line + self.base
        row, line = kb.value(row, INDEX), kb.value(line, INDEX)
        start = self.chunk_at(row, line >> shift)
        return start + (line & (self.vector - 1)) + self.base

    def at(self, d: Value | int, e: Value) -> Value:
        """Element ``e`` of the tile's rows or columns at ``d`` along k, in the stage read."""
        return self.tile[self.offset(d, e)]


def stage_stride(v: Variant, dtype: DType, along_k: bool, count: int, spread: bool) -> int:
    """Elements from a row of a ``_Stages`` stage to the next: its ``width``; without tensor
    cores, where k is contiguous and a warp's work-items read the tile's rows or columns
    spread over their lanes (``spread``: b's columns ``tx + c * threads[1]``), one copy (16
    bytes) more. A warp's loads of one element along k of 16 columns of b, ``depth``
    elements apart, met unpadded in 2 banks (f32: 8-way conflicts at 16 along k a step,
    16-way at 32, ``zyx.ir.access``); padded 2-way, and none where ptxas merges each
    column's 4 along k into one 16-byte load, as it does (sm_90: 67 LDS a step of 16 for
    ``GPU_VARIANTS[1]``, 2 steps of 16, of a transposed b, where 163 unpadded). a's rows
    need no pad: the warp reads 2 of them, in 16-byte loads (each quarter-warp one
    address). The pad keeps each row's 16-byte chunks aligned for the copies and the
    addresses constant offsets (an XOR swizzle of the chunks did not: sm_90 ptxas 254
    registers where the pad has 154)."""
    width = v.depth if along_k else count
    return width + (vector(dtype) if along_k and spread and not v.mma else 0)


Index = TypeVar("Index", int, Value)


def swizzled(row: Index, chunk: Index, width: int, per_chunk: int) -> Index:
    """Where chunk ``chunk`` (16 bytes: ``per_chunk`` elements) of row ``row`` of a
    ``_Stages`` stage, rows of ``width`` elements (a power of two of chunks), starts in it."""
    chunks = width // per_chunk
    lines = (max(8 // chunks, 1)).bit_length() - 1  # log2 of the rows of a 128-byte line
    return row * width + (chunk ^ ((row >> lines) & (min(chunks, 8) - 1))) * per_chunk


_Tile = _Copy | _Stages
"""An operand's tile in local memory, as ``_Warp`` reads it."""
