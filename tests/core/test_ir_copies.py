"""``zyx.ir.CopyAsync``, ``CommitCopies`` and ``WaitCopies``: a work-item's copies from global
into local memory that complete at a later wait (PTX's ``cp.async``). The interpreter
completes them at their wait and poisons their destination until then, so a pipeline that
reads a stage before its copies completed reads NaN; the C dialects copy at once, and the
host compiles and runs them. CUDA renders ``cp.async`` (tests/cuda/test_cuda_mma.py)."""

from __future__ import annotations

import numpy as np
import pytest

import zyx
from zyx.dtypes import DType
from zyx.errors import IRError
from zyx.ir import Kernel, KernelBuilder, ParamKind, Storage
from zyx.ir.extent import extents
from zyx.ir.interpreter import interpret
from zyx.testing.kernels import COPY_ITEMS as ITEMS
from zyx.testing.kernels import staged_copies as staged
from zyx.testing.kernels import staged_copies_expected as expected
from zyx.testing.numerics import random


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize(("dtype", "count"), [(DType.BF16, 8), (DType.F16, 4), (DType.F32, 4),
                                              (DType.F32, 1), (DType.I8, 16)], ids=str)  # fmt: skip
def test_a_pipeline_of_copies_matches_in_the_interpreter(
    dtype: DType, count: int, stages: int
) -> None:
    tiles = 5
    x = random(np.random.default_rng(stages), dtype, tiles * ITEMS * count, -2.0, 2.0)
    out = np.zeros_like(x)
    interpret(staged(dtype, count, tiles, stages), [x, out])
    np.testing.assert_array_equal(out, expected(x, count))


@pytest.mark.parametrize("stages", [2, 3])
def test_the_host_copies_at_once(stages: int) -> None:
    tiles, count = 3, 8
    host = zyx.device("host")
    x = random(np.random.default_rng(0), DType.BF16, tiles * ITEMS * count, -2.0, 2.0)
    out = np.zeros_like(x)
    buffers = [host.pool.allocate(a.nbytes) for a in (x, out)]
    try:
        host.pool.write(buffers[0], x)
        host.launch(host.compile(staged(DType.BF16, count, tiles, stages)), buffers)
        host.pool.read(buffers[1], out)
    finally:
        for buf in buffers:
            host.pool.release(buf)
    np.testing.assert_array_equal(out, expected(x, count))


def test_a_stage_read_before_its_wait_reads_poison() -> None:
    """Waiting for one group fewer than the pipeline needs reads a stage still in flight."""
    x = random(np.random.default_rng(1), DType.F32, 4 * ITEMS * 4, -2.0, 2.0)
    out = np.zeros_like(x)
    interpret(staged(DType.F32, 4, 4, 3, pending=2), [x, out])
    assert np.isnan(out).any()


def test_copies_past_the_condition_are_zeros() -> None:
    kb = KernelBuilder("zeros")
    x = kb.param(DType.F32)
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    lid = kb.local(0, ITEMS)
    tile = kb.define(DType.F32, ITEMS * 4, Storage.LOCAL)
    kb.copy_async(tile, lid * 4, x, lid * 4, 4, lid < 16)
    kb.commit_copies()
    kb.wait_copies()
    for j in range(4):
        out[lid * 4 + j] = tile[lid * 4 + j]
    x_ = np.arange(ITEMS * 4, dtype=np.float32) + 1
    got = np.full_like(x_, np.nan)
    interpret(kb.build(), [x_, got])
    np.testing.assert_array_equal(got, np.where(np.arange(ITEMS * 4) < 64, x_, 0))


def _copy(dst: DType = DType.F32, src: DType = DType.F32, count: int = 4, local: bool = True,
          index: int = 0) -> Kernel:  # fmt: skip
    kb = KernelBuilder("copy")
    x = kb.param(src)
    tile = kb.define(dst, 64, Storage.LOCAL if local else Storage.REGISTER)
    kb.local(0, ITEMS)
    kb.copy_async(tile, index, x, 0, count)
    return kb.build()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: _copy(count=3), "CopyAsync of 3 f32 elements: 4, 8 or 16 bytes"),
        (lambda: _copy(count=8), "CopyAsync of 8 f32 elements"),
        (lambda: _copy(dst=DType.F16), "CopyAsync copies f32 into f16"),
        (lambda: _copy(local=False), "is not a local Define"),
    ],
)
def test_malformed_copies_are_refused(make: object, message: str) -> None:
    with pytest.raises(IRError, match=message):
        make()  # type: ignore[operator]


def test_a_misaligned_copy_is_refused_by_the_interpreter() -> None:
    with pytest.raises(IRError, match="no multiple of 4"):
        interpret(_copy(index=2), [np.zeros(64, np.float32)])


def test_the_launch_check_knows_how_far_a_copy_reads() -> None:
    """``count`` elements from its index. A guarded copy's index was computed before its
    guard, so where it uses the guarded range its reach is unknown (not checked)."""
    for guarded in (False, True):
        kb = KernelBuilder("reach")
        x = kb.param(DType.F32)
        lid = kb.local(0, ITEMS)
        tile = kb.define(DType.F32, ITEMS * 4, Storage.LOCAL)
        kb.copy_async(tile, lid * 4, x, lid * 4, 4, lid < 16 if guarded else True)
        found = extents(kb.build())
        if guarded:
            assert [a.kind for a in found.unchecked] == ["CopyAsync"]
        else:
            assert not found.unchecked and found.static == (ITEMS * 4 * 4,)
