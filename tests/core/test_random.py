"""``zyx.random``: Threefry-2x32-20 against Random123's known answers and a reference in
Python ints, the same bits on every installed device, distributions by fixed-seed
statistical bounds, and laziness (a draw is fused into the kernel that reads it)."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import zyx
import zyx.random as zr
from zyx.errors import DTypeError
from zyx.random import MASK, IntWords, threefry2x32

N = 1 << 16


def reference_bits(seed: int, draw: int, n: int, block: int = 0) -> np.ndarray[Any, Any]:
    """The documented stream, in Python ints: element ``i`` of draw ``draw``'s block is
    ``threefry2x32(threefry2x32(seed, (draw, block)), (i, 0))``; two u32 words each."""
    ints = IntWords()
    key = threefry2x32(ints, (seed & MASK, seed >> 32), (draw, block))
    return np.array([threefry2x32(ints, key, (i & MASK, i >> 32)) for i in range(n)], np.uint64)


def ks_statistic(sample: np.ndarray[Any, Any], cdf: Any) -> float:
    """Kolmogorov-Smirnov's D of ``sample`` against the distribution function ``cdf``."""
    x = np.sort(sample.astype(np.float64))
    f = cdf(x)
    n = len(x)
    return float(max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max()))


KS_CRITICAL = 1.95
"""sqrt(n) * D above which a sample is rejected at the 0.1 % level (two-sided)."""


# ---- the generator ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counter", "key", "expected"),
    [
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((MASK, MASK), (MASK, MASK), (0x1CB996FC, 0xBB002BE7)),
        ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
    ],
)
def test_threefry_known_answers(
    counter: tuple[int, int], key: tuple[int, int], expected: tuple[int, int]
) -> None:
    # Random123's kat_vectors: "threefry2x32 20 ctr0 ctr1 key0 key1 out0 out1".
    assert threefry2x32(IntWords(), key, counter) == expected


def test_the_same_bits_on_every_device(array_device: Any) -> None:
    seed, n = 0x0123456789ABCDEF, 4099
    rng = zr.default_rng(seed)
    bits = rng.integers(0, 1 << 32, n, dtype=zyx.uint32, device=array_device).numpy()
    # A power-of-two range is the low bits of the u64 word pair: the pair's second word.
    np.testing.assert_array_equal(bits, reference_bits(seed, 0, n)[:, 1])
    uniform = rng.uniform(0.0, 1.0, n, device=array_device).numpy()
    expected = (reference_bits(seed, 1, n)[:, 0] >> 8).astype(np.float32) * np.float32(2**-24)
    np.testing.assert_array_equal(uniform, expected)


def test_float64_uniform_takes_53_bits(array_device: Any) -> None:
    if not array_device.info.supports(zyx.float64):
        pytest.skip(f"{array_device.name} has no float64")
    got = zr.default_rng(5).random(1000, dtype=zyx.float64, device=array_device).numpy()
    words = reference_bits(5, 0, 1000)
    expected = ((words[:, 0] >> 5) * 2.0**26 + (words[:, 1] >> 6)) * 2.0**-53
    np.testing.assert_array_equal(got, expected)


def test_reproducible_and_distinct_streams() -> None:
    def draws(seed: int) -> list[np.ndarray[Any, Any]]:
        rng = zr.default_rng(seed)
        return [rng.random(64, device="host").numpy() for _ in range(3)]

    first, again, other = draws(7), draws(7), draws(8)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1]), "each draw takes the next key"
    assert not np.array_equal(first[0], other[0]), "another seed, other numbers"
    assert not np.array_equal(
        zr.default_rng().random(8).numpy(), zr.default_rng().random(8).numpy()
    )


def test_shape_is_over_the_flat_index() -> None:
    flat = zr.default_rng(3).random(24, device="host").numpy()
    shaped = zr.default_rng(3).random((2, 3, 4), device="host").numpy()
    np.testing.assert_array_equal(shaped.reshape(-1), flat)
    assert zr.default_rng(3).random(device="host").shape == ()
    assert zr.default_rng(3).normal(0, 1, (0, 5), device="host").numpy().shape == (0, 5)


def test_spawned_generators_are_independent_and_reproducible() -> None:
    children = zr.default_rng(11).spawn(2)
    again = zr.default_rng(11).spawn(2)
    values = [c.random(32, device="host").numpy() for c in children]
    np.testing.assert_array_equal(values[0], again[0].random(32, device="host").numpy())
    assert not np.array_equal(values[0], values[1])


# ---- laziness -----------------------------------------------------------------------------------


def test_a_draw_is_fused_into_its_reader_and_reuses_the_plan() -> None:
    rng = zr.default_rng(1)
    before = zyx.stats()
    total = float(rng.uniform(0.0, 1.0, (256, 256), device="host").sum())
    done = zyx.stats() - before
    assert done.kernels_scheduled == 1, "the random numbers live inside the sum's kernel"
    assert abs(total / 65536 - 0.5) < 0.01
    before = zyx.stats()
    float(rng.uniform(2.0, 3.0, (256, 256), device="host").sum())  # new key, low and high
    done = zyx.stats() - before
    assert done.plans_reused == 1 and done.kernels_compiled == 0


# ---- distributions ------------------------------------------------------------------------------


def test_uniform_statistics(array_device: Any) -> None:
    x = zr.default_rng(2024).uniform(-1.0, 3.0, N, device=array_device).numpy()
    assert x.min() >= -1.0 and x.max() < 3.0
    assert abs(x.mean() - 1.0) < 5 * math.sqrt(16 / 12 / N)
    assert abs(x.var() - 16 / 12) < 0.03
    assert math.sqrt(N) * ks_statistic(x, lambda v: (v + 1) / 4) < KS_CRITICAL


def test_normal_statistics_and_devices_agree(array_device: Any) -> None:
    x = zr.default_rng(99).normal(2.0, 0.5, N, device=array_device).numpy()
    assert abs(x.mean() - 2.0) < 5 * 0.5 / math.sqrt(N)
    assert abs(x.std() - 0.5) < 0.01
    erf = np.frompyfunc(math.erf, 1, 1)
    cdf = lambda v: 0.5 * (1 + erf((v - 2.0) / (0.5 * math.sqrt(2))).astype(np.float64))  # noqa: E731
    assert math.sqrt(N) * ks_statistic(x, cdf) < KS_CRITICAL
    on_host = zr.default_rng(99).normal(2.0, 0.5, N, device="host").numpy()
    # log, sqrt and cos differ between devices' math libraries by a few ulps.
    np.testing.assert_allclose(x, on_host, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_float_dtypes(array_device: Any, dtype: str) -> None:
    zdtype = getattr(zyx, dtype)
    if not array_device.info.supports(zdtype):
        with pytest.raises(DTypeError):
            zr.default_rng(0).random(8, dtype=zdtype, device=array_device)
        return
    rng = zr.default_rng(0)
    u = rng.random(4096, dtype=zdtype, device=array_device)
    z = rng.normal(0.0, 1.0, 4096, dtype=zdtype, device=array_device)
    assert u.dtype == zdtype and z.dtype == zdtype
    values = u.astype(zyx.float64).numpy()
    bits = zr.FLOAT_BITS[zdtype]
    assert values.min() >= 0 and values.max() < 1
    np.testing.assert_array_equal(values * 2**bits, np.floor(values * 2**bits))
    assert abs(values.mean() - 0.5) < 0.02
    assert abs(z.astype(zyx.float64).numpy().std() - 1) < 0.05


def test_integers_chi_square(array_device: Any) -> None:
    x = zr.default_rng(5).integers(3, 13, N, device=array_device).numpy()
    assert x.dtype == np.int64 and x.min() == 3 and x.max() == 12
    counts = np.bincount(x - 3, minlength=10)
    chi2 = float(((counts - N / 10) ** 2 / (N / 10)).sum())
    assert chi2 < 27.88  # 9 degrees of freedom, 0.1 %


def test_integers_reject_instead_of_folding() -> None:
    # [0, 3 * 2**62): a plain 64-bit modulo would give values below 2**62 half the time.
    span = 3 << 62
    x = zr.default_rng(8).integers(0, span, N, dtype=zyx.uint64, device="host").numpy()
    assert x.max() < span
    low = float((x < (1 << 62)).mean())
    assert abs(low - 1 / 3) < 5 * math.sqrt(2 / 9 / N)


@pytest.mark.parametrize(
    ("low", "high", "dtype", "endpoint"),
    [
        (-5, 5, "int8", True),
        (-128, 127, "int8", True),
        (0, 255, "uint8", True),
        (-(1 << 63), (1 << 63) - 1, "int64", True),
        (0, (1 << 64) - 1, "uint64", True),
        (7, 8, "int32", False),
        (-(1 << 31), 1 << 31, "int64", False),
    ],
)
def test_integer_ranges(low: int, high: int, dtype: str, endpoint: bool) -> None:
    x = zr.default_rng(4).integers(
        low, high, 4096, dtype=getattr(zyx, dtype), endpoint=endpoint, device="host"
    )
    values = x.numpy().astype(object)
    top = high if endpoint else high - 1
    assert values.min() >= low and values.max() <= top
    if top - low < 300:
        assert set(values) == set(range(low, top + 1)), "every value of a small range comes"
    else:
        assert values.min() < low + (top - low) // 8 and values.max() > top - (top - low) // 8


def test_permutation(array_device: Any) -> None:
    rng = zr.default_rng(12)
    p = rng.permutation(1000, device=array_device).numpy()
    np.testing.assert_array_equal(np.sort(p), np.arange(1000))
    assert (p != np.arange(1000)).sum() > 900
    rows = zyx.asarray(np.arange(15).reshape(5, 3), device=array_device)
    shuffled = rng.permutation(rows).numpy()
    assert shuffled.shape == (5, 3)
    np.testing.assert_array_equal(np.sort(shuffled[:, 0]), np.arange(0, 15, 3))
    np.testing.assert_array_equal(shuffled - shuffled[:, :1], [[0, 1, 2]] * 5)
    on_host = zr.default_rng(12).permutation(1000, device="host").numpy()
    np.testing.assert_array_equal(p, on_host)


def test_permutations_are_uniform() -> None:
    rng = zr.default_rng(21)
    draws = 480
    seen: dict[tuple[int, ...], int] = {}
    for _ in range(draws):
        order = tuple(rng.permutation(4, device="host").numpy().tolist())
        seen[order] = seen.get(order, 0) + 1
    assert len(seen) == 24
    chi2 = sum((c - draws / 24) ** 2 / (draws / 24) for c in seen.values())
    assert chi2 < 49.73  # 23 degrees of freedom, 0.1 %


# ---- errors -------------------------------------------------------------------------------------


def test_errors_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
        zr.default_rng(-1)
    rng = zr.default_rng(0)
    with pytest.raises(TypeError, match="floating"):
        rng.uniform(0, 1, 3, dtype=zyx.int32)
    with pytest.raises(TypeError, match="integer arrays"):
        rng.integers(0, 3, 3, dtype=zyx.float32)
    with pytest.raises(ValueError, match="non-empty"):
        rng.integers(5, 5)
    with pytest.raises(ValueError, match="within"):
        rng.integers(0, 300, dtype=zyx.uint8)
    with pytest.raises(ValueError, match="negative"):
        rng.random((2, -1))
    with pytest.raises(TypeError, match="low must be"):
        rng.uniform("0", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="0-D"):
        rng.permutation(zyx.asarray(np.array(3.0)))


def test_zyx_random_after_import_zyx() -> None:
    code = "import zyx; print(zyx.random.default_rng(1))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "zyx.random.Generator(seed=1)", done.stderr
