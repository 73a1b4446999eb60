"""Core's generated matmul (``zyx.graph.matmul``) on the host: every variant's kernels,
every float dtype, against numpy in float64 into poisoned outputs; ``zyx.matmul`` taking
it where it wins its race. PoCL's are in tests/opencl/test_opencl_matmul.py."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.graph import matmul
from zyx.graph.claims import matmuls
from zyx.graph.schedule import Graph
from zyx.host.codegen import PARALLEL_LOADS, HostDialect
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir import Kernel
from zyx.ir.ops import Storage
from zyx.testing.matmul import (
    ALIGNED_CASES,
    CASES,
    Case,
    check_front_end,
    check_variant,
    found,
    held,
    interpreted,
    operands,
    reference,
    run_variant,
)
from zyx.testing.numerics import assert_close

HOST_DEFAULTS = (*matmul.AVX512_VARIANTS, replace(matmul.CPU_VARIANTS[0], fused=True))
"""The host's defaults, accumulating by Fma: for AVX-512 (the host runs it on any CPU) and
for AVX2."""
VARIANTS = HOST_DEFAULTS + matmul.CPU_VARIANTS + matmul.GPU_VARIANTS


@pytest.fixture(scope="module")
def host() -> Device:
    return zyx.device("host")


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_every_variant_matches_numpy(host: Device, variant: matmul.Variant) -> None:
    """Each variant on one case in turn (CPU and GPU variants alike: the host runs both;
    the pipelined ones, which take rows of 16 bytes only, copying at once): the first case
    from the variant's place in the list on that fits the host's local memory."""
    cases = ALIGNED_CASES if variant.stages else CASES
    start = VARIANTS.index(variant) % len(cases)
    rng = np.random.default_rng(0)

    def fitting(c: Case) -> bool:
        return matmul.fits(variant, found(host, c, *operands(rng, DType.F32, c)), host)

    case = next(c for c in cases[start:] + cases[:start] if fitting(c))
    check_variant(host, variant, DType.F32, case)


@pytest.mark.parametrize("variant", [v for v in matmul.GPU_VARIANTS if v.stages], ids=str)
def test_pipelined_gpu_variants_match_numpy_in_the_interpreter(
    host: Device, variant: matmul.Variant
) -> None:
    """Whose copies complete only at their waits, as a GPU's (tests/core/test_ir_copies.py)."""
    for seed, case in enumerate(ALIGNED_CASES):
        a, b = operands(np.random.default_rng(seed), DType.F32, case)
        m = found(host, case, a, b)
        got = interpreted(variant, m, held(a, case.a_transposed), held(b, case.b_transposed))
        assert_close(got, reference(a, b), DType.F32, f"{variant} {case}")


@pytest.mark.parametrize("dtype", [DType.F64, DType.F16, DType.BF16], ids=str)
def test_every_float_dtype_matches_numpy(host: Device, dtype: DType) -> None:
    """The default CPU variant, and the default GPU one (local memory, the rest of k from
    global memory), in f64 and in the 16-bit floats that accumulate in f32."""
    check_variant(host, matmul.CPU_VARIANTS[0], dtype, CASES[1])
    check_variant(host, matmul.Variant((8, 16)), dtype, CASES[0])  # unpacked: converted at use
    check_variant(host, matmul.GPU_TILE, dtype, CASES[2])


@pytest.mark.parametrize("dtype", [DType.F32, DType.F64], ids=str)
@pytest.mark.parametrize("variant", HOST_DEFAULTS, ids=str)
def test_the_hosts_fused_matmul_is_the_interpreters_bit_for_bit(
    host: Device, variant: matmul.Variant, dtype: DType
) -> None:
    """Its Fmas round once in C as in the IR (the host fuses nothing else): the compiled
    kernels' output is the interpreter's, bit for bit; one rounding is not two either."""
    case = CASES[1]
    a, b = operands(np.random.default_rng(3), dtype, case)
    m = found(host, case, a, b)
    want = interpreted(variant, m, held(a, case.a_transposed), held(b, case.b_transposed))
    np.testing.assert_array_equal(run_variant(host, variant, m), want)
    unfused = interpreted(replace(variant, fused=False), m, held(a, case.a_transposed),
                          held(b, case.b_transposed))  # fmt: skip
    assert np.any(unfused != want)


def test_the_hosts_fused_variants_fit_f32_and_f64_blocks_of_16_vectors(host: Device) -> None:
    """f64 by the 4 x 32 block; f16 and bf16 outputs by the multiply and add of the CPU's
    default (gcc leaves their Fmas' k loop scalar)."""
    check_variant(host, matmul.AVX512_VARIANTS[1], DType.F64, CASES[2])
    check_variant(host, HOST_DEFAULTS[-1], DType.F64, CASES[0])
    rng = np.random.default_rng(2)
    want = {DType.F32: HOST_DEFAULTS[0], DType.F64: matmul.AVX512_VARIANTS[1]}
    for dtype in (DType.F32, DType.F64, DType.F16, DType.BF16):
        m = found(host, CASES[1], *operands(rng, dtype, CASES[1]))
        fitting = [v for v in matmul.host_variants(64) if matmul.fits(v, m, host)]
        assert fitting[0] == want.get(dtype, matmul.CPU_VARIANTS[0]), dtype


def test_the_hosts_matmul_is_vectorized_as_wide_as_its_block(host: Device) -> None:
    """The kernel of Fmas asks for 512-bit vectors (gcc's choice, 256, halves its speed);
    the packing kernel keeps the compiler's choice."""
    x = zyx.zeros((64, 64), device=host)
    (m,) = matmuls(Graph([zyx.matmul(x, x).node]))
    pack, tiles = (launch.kernel for launch in matmul.build(m, HOST_DEFAULTS[0]))
    assert isinstance(pack, Kernel) and isinstance(tiles, Kernel)
    wide = '__attribute__((target("prefer-vector-width=512")))'
    dialect = HostDialect(wide_vectors=True)
    assert wide in dialect.render(tiles).code and wide not in dialect.render(pack).code
    assert wide not in HostDialect().render(tiles).code


def test_the_default_fits_the_device_and_strides_are_baked_in(host: Device) -> None:
    rng = np.random.default_rng(1)
    case = CASES[1]
    m = found(host, case, *operands(rng, DType.F32, case))
    assert matmul.default(m, host) == matmul.variants(host)[0]
    assert m.a.strides[-2:] == (1, case.n)  # a transposed: read through its strides
    # The GPU default through local memory: 128 x 128 outputs per group of 256 items.
    v = matmul.GPU_TILE
    assert v.tile == (128, 128) and v.local_size == 256
    (tiles, edge) = (launch.kernel for launch in matmul.build(m, v))  # 140 columns: 128 + 12
    assert isinstance(tiles, Kernel) and isinstance(edge, Kernel)
    assert tiles.local_size == (256, 1, 1) and edge.name.startswith("matmul_edge")
    assert any(getattr(op, "storage", None) is Storage.LOCAL for op in tiles.ops)
    # Packed: a and b copied (in f32) as the kernel reads them, one kernel over every tile.
    packed = matmul.CPU_VARIANTS[0]
    assert packed.packed
    packs = matmul.build(m, packed)
    assert [launch.args for launch in packs] == [
        (("src", 0), ("src", 1), ("scratch", 0), ("scratch", 1)),
        (("scratch", 0), ("scratch", 1), ("out", 0)),
    ]  # fmt: skip
    assert matmul.scratch(m, packed) == (2 * 136 * 37 * 4, 2 * 144 * 37 * 4)
    too_big = matmul.Variant((8, 8), (64, 64), 16)
    assert not matmul.fits(too_big, m, host)


@pytest.mark.usefixtures("zyx_tuning_cache")  # its races counted
def test_zyx_matmul_takes_the_generated_matmul_where_it_wins() -> None:
    """Taken once raced (2.3x faster than the generic lowering here, one thread), then
    reused without a race; batched, a transposed operand.
    On a host of one thread: on this loaded 2-core VM a parallel launch may wait a time
    slice for a descheduled thread, and decide the race. Smaller products (2 x 56 x 48 x
    128) the generic lowering, a strip of b's row per step of k (``zyx.graph.cpu``),
    computes faster."""
    host = HostDevice(HostPool(), threads=1)
    case = Case((2,), (2,), 256, 256, 256, a_transposed=True)
    first = check_front_end(host, DType.F32, case, seed=2)
    assert first.claims_offered == 1 and first.claim_races == 1 and first.claims_taken == 1
    assert first.kernels_scheduled == 0
    again = check_front_end(host, DType.F32, case, seed=3)
    assert again.plans_reused == 1 and again.claim_races == 0


@pytest.mark.parametrize("variant", [matmul.CPU_VARIANTS[0], matmul.Variant((8, 16)),
                                     matmul.GPU_TILE], ids=str)  # fmt: skip
def test_vectors_and_empty_contractions_match_numpy(host: Device, variant: matmul.Variant) -> None:
    """The edges of the shapes: a column of one (a matrix times a vector), k = 0 (zeros)."""
    check_variant(host, variant, DType.F32, Case((), (), 5, 1, 7))
    check_variant(host, variant, DType.F32, Case((3,), (3,), 3, 4, 0))


def test_a_gpu_takes_the_largest_tile_that_keeps_it_busy(host: Device) -> None:
    """No GPU here: the host's DeviceInfo with a warp of 32 stands in for one (only
    ``info`` is read)."""
    gpu: Any = SimpleNamespace(info=replace(host.info, warp_size=32))
    for n, want in [(4096, (128, 128)), (1024, (64, 64)), (40, (32, 64))]:
        x = zyx.zeros((n, n), device=host)
        (m,) = matmuls(Graph([zyx.matmul(x, x).node]))
        chosen = matmul.default(m, gpu)
        assert chosen is not None and chosen.tile == want and chosen.depth, (n, chosen)


def test_the_host_spreads_a_matmul_over_its_threads(host: Device) -> None:
    """A work-item's loads in its loop over k count as that much work (host codegen's
    PARALLEL_LOADS): 1024^2 outputs in 8192 work-items of 8 x 16 would otherwise run on one
    thread."""
    x = zyx.zeros((1024, 1024), device=host)
    (m,) = matmuls(Graph([zyx.matmul(x, x).node]))
    (launch,) = matmul.build(m, matmul.Variant((8, 16)))
    assert isinstance(launch.kernel, Kernel)
    dialect = HostDialect()
    work = dialect.loop_work(launch.kernel)
    assert isinstance(work, int) and 8192 * work >= PARALLEL_LOADS > 8192 * 16
    assert f"if(G0 * {work} >= {PARALLEL_LOADS})" in dialect.render(launch.kernel).code
