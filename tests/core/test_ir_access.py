"""``zyx.ir.access``: the bank conflicts and sectors of a kernel's memory ops, counted from the
interpreter's addresses, on patterns whose costs are known: local memory by stride (1 and
odd: conflict-free; 32: a 32-way conflict; a broadcast), 8- and 16-byte copies a phase of
half or quarter warps, LdMatrix's rows a phase a matrix; global loads coalesced or strided.
The matmul variants' own are in tests/core/test_matmul_access.py."""

from __future__ import annotations

import numpy as np
import pytest

from zyx.dtypes import DType
from zyx.ir import Kernel, KernelBuilder, ParamKind, Storage
from zyx.ir.access import Access, analyze


def strided_local(stride: int, dtype: DType = DType.F32) -> Kernel:
    """A warp storing and loading its lane's element ``lid * stride`` of local memory."""
    kb = KernelBuilder("strided_local")
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    lid = kb.local(0, 64)
    tile = kb.define(dtype, 64 * max(stride, 1) + 1, Storage.LOCAL)
    tile[lid * stride] = kb.const(1, dtype)
    kb.barrier()
    out[lid] = tile[lid * stride]
    return kb.build()


def local_of(kernel: Kernel, args: list[np.ndarray]) -> list[Access]:
    return [a for a in analyze(kernel, args) if a.space == "local"]


@pytest.mark.parametrize(("stride", "ways"), [(1, 1), (3, 1), (2, 2), (8, 8), (32, 32), (0, 1)])
def test_a_warps_4_byte_accesses_conflict_by_their_stride(stride: int, ways: int) -> None:
    store, load = local_of(strided_local(stride), [np.zeros(64, np.float32)])
    for access in (store, load):
        assert access.requests == 2  # two warps, once each
        assert access.ways == ways and access.conflicts == ways


def test_16_bit_elements_of_one_word_are_one_access() -> None:
    """Lanes 2i and 2i + 1 read the two halves of one word: stride 1 of bf16 is 16 words."""
    (store, load) = local_of(strided_local(1, DType.BF16), [np.zeros(64, DType.BF16.numpy)])
    assert load.conflicts == 1 and load.ways == 1
    (_, load) = local_of(strided_local(64, DType.BF16), [np.zeros(64, DType.BF16.numpy)])
    assert load.ways == 32  # 128 bytes apart: one bank


def copies(count: int, stride: int) -> Kernel:
    """A warp's ``CopyAsync`` of ``count`` f32 a lane, lane ``l``'s to ``l * stride``
    copies of local memory, from consecutive copies of global memory."""
    kb = KernelBuilder("copies")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    lid = kb.local(0, 32)
    tile = kb.define(DType.F32, 32 * stride * count, Storage.LOCAL)
    kb.copy_async(tile, lid * (stride * count), x, lid * count, count, kb.const(True, DType.BOOL))
    kb.commit_copies()
    kb.wait_copies(0)
    kb.barrier()
    out[lid] = tile[lid * (stride * count)]
    return kb.build()


@pytest.mark.parametrize("count", [2, 4])
def test_wide_accesses_are_served_a_phase_of_lanes_at_a_time(count: int) -> None:
    """8 bytes a lane: half-warps; 16: quarter-warps; consecutive, each phase conflict-free."""
    x = np.zeros(32 * count, np.float32)
    write, _ = local_of(copies(count, 1), [x, np.zeros(32, np.float32)])
    assert (write.kind, write.width, write.conflicts, write.ways) == ("copy", 4 * count, 1, 1)
    assert write.wavefronts == count  # phases
    write, _ = local_of(copies(count, 2), [x, np.zeros(32, np.float32)])
    assert write.conflicts == 2  # every other 4 * count bytes: each phase's words twice a bank


def ldmatrix_rows(row_stride: int) -> Kernel:
    """A warp's LdMatrix of four 8 x 8 bf16 matrices whose rows are ``row_stride`` apart."""
    kb = KernelBuilder("rows")
    out = kb.param(DType.BF16, ParamKind.GLOBAL_MUT)
    lane = kb.local(0, 32)
    tile = kb.define(DType.BF16, 32 * row_stride, Storage.LOCAL)
    for i in range(row_stride):
        tile[lane * row_stride + i] = kb.const(1.0, DType.BF16)
    kb.barrier()
    fragment = kb.define(DType.BF16, 8)
    kb.ldmatrix(fragment, tile, lane * row_stride, 4)
    for i in range(8):
        out[lane * 8 + i] = fragment[i]
    return kb.build()


@pytest.mark.parametrize(("row_stride", "conflicts"), [(8, 1), (16, 2), (64, 8), (72, 1)])
def test_ldmatrix_is_a_phase_a_matrix_of_its_8_rows(row_stride: int, conflicts: int) -> None:
    """Rows of 16 bytes back to back, or padded by 16 bytes: each matrix one wavefront;
    128 bytes apart: its 8 rows in the same 4 banks."""
    accesses = analyze(ldmatrix_rows(row_stride), [np.zeros(256, DType.BF16.numpy)])
    (ld,) = [a for a in accesses if a.kind == "ldmatrix"]
    assert (ld.width, ld.least, ld.conflicts) == (16, 4, conflicts)


@pytest.mark.parametrize(("stride", "per_request"), [(1, 4), (2, 8), (8, 32), (64, 32), (0, 1)])
def test_global_loads_touch_sectors_by_their_stride(stride: int, per_request: int) -> None:
    kb = KernelBuilder("gather")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    lid = kb.local(0, 32)
    out[lid] = x[lid * stride]
    (load, store) = analyze(kb.build(), [np.zeros(32 * 64, np.float32), np.zeros(32, np.float32)])
    assert (load.kind, load.space, load.requests) == ("load", "global", 1)
    assert load.per_request == per_request
    assert load.excess == per_request / (1 if stride == 0 else 4)
    assert store.per_request == 4 and store.excess == 1


def test_masked_work_items_make_no_request() -> None:
    kb = KernelBuilder("masked")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    lid = kb.local(0, 64)
    with kb.if_(lid < 8):
        out[lid] = x[lid * 32]
    (load, _) = analyze(kb.build(), [np.zeros(2048, np.float32), np.zeros(64, np.float32)])
    assert load.requests == 1 and load.sectors == 8 and load.least == 1
