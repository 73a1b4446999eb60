"""The host device: compiled C matches the interpreter; compile errors, the disk cache (also
across processes, through the front end), the interpreter fallback, barriers, half
precision and launch arguments."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zyx.host.device as host_device
from zyx.codegen.c import Source
from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx.host.codegen import HostDialect
from zyx.host.compiler import HostCompiler, Toolchain, toolchain
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir import Kernel, KernelBuilder, ParamKind, Storage, Value, ceil_div
from zyx.ir.interpreter import interpret
from zyx.testing.examples import examples, saxpy
from zyx.testing.harness import reference, run
from zyx.testing.kernels import cast, elementwise, nextafter_steps
from zyx.testing.numerics import assert_close, poisoned, random
from zyx.testing.test_dtypes import NEAR_TIES

needs_cc = pytest.mark.skipif(toolchain() is None, reason="no working C compiler")


@pytest.fixture(autouse=True)
def private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Each test compiles into an empty cache of its own."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "host"


@pytest.fixture
def device() -> HostDevice:
    return HostDevice(HostPool())


@pytest.fixture
def interpreted(monkeypatch: pytest.MonkeyPatch) -> Iterator[HostDevice]:
    """A host device opened with ``ZYX_HOST_COMPILER=none``."""
    monkeypatch.setenv("ZYX_HOST_COMPILER", "none")
    toolchain.cache_clear()
    try:
        yield HostDevice(HostPool())
    finally:
        toolchain.cache_clear()


def check_against_reference(device: HostDevice, kernel: Kernel, args: list[Any]) -> None:
    got, want = run(device, kernel, args), reference(kernel, args)
    buffers = [p for p in kernel.params if p.kind is not ParamKind.VARIABLE]
    for param, out, ref in zip(buffers, got, want):
        assert_close(out, ref, param.dtype, what=f"{kernel.name} {param}")


@needs_cc
@pytest.mark.parametrize("example", examples(), ids=lambda e: e.name)
def test_sample_kernels_match_the_reference(device: HostDevice, example: Any) -> None:
    assert not device.interpreted
    check_against_reference(device, example.kernel, example.arguments(np.random.default_rng(1)))


@pytest.mark.parametrize("example", examples(), ids=lambda e: e.name)
def test_without_a_compiler_kernels_are_interpreted(interpreted: HostDevice, example: Any) -> None:
    assert interpreted.interpreted
    assert "numpy interpreter" in interpreted.info.name
    args = example.arguments(np.random.default_rng(2))
    check_against_reference(interpreted, example.kernel, args)


@needs_cc
def test_a_compile_error_carries_the_compilers_log(private_cache: Path) -> None:
    found = toolchain()
    assert found is not None
    broken = Source("broken", "void broken(void* const* args, int nthreads) { oops }\n", "host-c")
    with pytest.raises(BackendError) as caught:
        HostCompiler(found).compile(broken)
    assert caught.value.status is ErrorStatus.KERNEL_COMPILATION
    assert "oops" in caught.value.log and "error" in caught.value.log
    assert "--- compiler log ---" in str(caught.value)


def logged_compiler(tmp_path: Path, before: str = "") -> tuple[Path, Path]:
    """A log file and a wrapper of the C compiler that writes each command line to it,
    runs the shell code ``before``, and then the compiler."""
    found = toolchain()
    assert found is not None
    log, wrapper = tmp_path / "compiler.log", tmp_path / "cc"
    log.write_text("")
    wrapper.write_text(
        f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\n{before}'
        f'exec {shlex.quote(found.command)} "$@"\n'
    )
    wrapper.chmod(0o755)
    return log, wrapper


# An assembler that refuses -march=native code for kernels (as gcc 12.2's did for some
# AVX-512 code): the message GNU as prints, the C itself fine.
REFUSING = """case "$*" in *-march=native*kernel.c*)
  echo "/tmp/cc.s: Assembler messages:" >&2
  echo "/tmp/cc.s:42: Error: no such instruction: \\`vinsert<i128vldq> \\$1,%ymm1,%zmm0,%zmm0'" >&2
  exit 1;;
esac
"""


@pytest.fixture
def refusing_assembler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """Host devices opened from now on build with ``logged_compiler(REFUSING)``; returns a
    function that reads the command lines it ran."""
    found = toolchain()
    assert found is not None
    log, wrapper = logged_compiler(tmp_path, REFUSING)
    flags = tuple(f for f in found.flags if f != "-march=native") + ("-march=native",)
    chain = dataclasses.replace(found, command=str(wrapper), flags=flags)
    monkeypatch.setattr(host_device, "toolchain", lambda: chain)
    return lambda: log.read_text().splitlines()


@needs_cc
def test_code_the_assembler_refuses_is_built_without_march_native(
    refusing_assembler: Callable[[], list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    device = HostDevice(HostPool())
    example = saxpy(1000)
    with caplog.at_level("WARNING", logger="zyx.compile"):
        check_against_reference(device, example.kernel, example.arguments(np.random.default_rng(4)))
    runs = [line for line in refusing_assembler() if "kernel.c" in line]
    assert len(runs) == 2 and "-march=native" in runs[0] and "-march=native" not in runs[1]
    assert "vinsert<i128vldq>" in caplog.text and "built without it" in caplog.text
    HostDevice(HostPool()).compile(example.kernel)  # the portable build is what was cached
    assert len([line for line in refusing_assembler() if "kernel.c" in line]) == 2


@needs_cc
def test_a_c_error_is_not_retried_without_march_native(tmp_path: Path) -> None:
    found = toolchain()
    assert found is not None
    if "-march=native" not in found.flags:
        pytest.skip(f"{found.command} does not take -march=native")
    log, wrapper = logged_compiler(tmp_path)
    broken = Source("broken", "void broken(void* const* args, int nthreads) { oops }\n", "host-c")
    with pytest.raises(BackendError) as caught:
        HostCompiler(dataclasses.replace(found, command=str(wrapper))).compile(broken)
    assert "oops" in caught.value.log
    assert len(log.read_text().splitlines()) == 1


@needs_cc
def test_the_second_compile_is_a_cache_hit(
    device: HostDevice, private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = saxpy(1000).kernel
    device.compile(kernel)
    assert len(list(private_cache.iterdir())) == 1

    def no_compiler(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"the compiler ran again: {args}")

    monkeypatch.setattr(subprocess, "run", no_compiler)
    program = HostDevice(HostPool()).compile(kernel)  # a new device: no in-memory state
    assert program.name == "saxpy"
    assert len(list(private_cache.iterdir())) == 1


FIRST_REALIZE = """
import json, sys
from pathlib import Path
import numpy as np, zyx
log = Path({log!r})
x = np.linspace(-4, 4, 1024, dtype=np.float32)
a = zyx.asarray(x, device=zyx.device("host"))
runs, modules = len(log.read_text().splitlines()), set(sys.modules)
y = (zyx.sin(a) + 1).numpy()
print(json.dumps({{
    "compiler_runs": len(log.read_text().splitlines()) - runs,
    "imported": sorted(set(sys.modules) - modules),
    "error": float(np.max(np.abs(y - (np.sin(x.astype(np.float64)) + 1)))),
}}))
"""


@needs_cc
def test_a_new_processs_first_realize_finds_its_kernel_on_disk(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    """The first realize of a small op in a new process, after an earlier process built its
    kernel: the C compiler (a wrapper that logs its runs) does not run, and nothing is
    imported on the way (a module the op does not need, core's matmul, costs more than
    the rest of such a realize)."""
    log, wrapper = logged_compiler(tmp_path)
    env = {**environ, "ZYX_HOST_COMPILER": str(wrapper), "ZYX_CACHE_DIR": str(tmp_path / "cache")}
    code = FIRST_REALIZE.format(log=str(log))
    cold, warm = (
        json.loads(
            subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(2)
    )
    assert cold["compiler_runs"] >= 1  # an empty cache: the kernel is built
    assert warm["compiler_runs"] == 0 and warm["imported"] == []
    assert cold["error"] < 1e-6 and warm["error"] < 1e-6


@needs_cc
def test_an_unwritable_cache_still_compiles(
    device: HostDevice, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("ZYX_CACHE_DIR", str(blocker))
    example = saxpy(100)
    check_against_reference(device, example.kernel, example.arguments(np.random.default_rng(3)))


@needs_cc
def test_a_damaged_cache_entry_is_rebuilt(device: HostDevice) -> None:
    example = saxpy(100)
    found = toolchain()
    assert found is not None
    compiler = HostCompiler(found)
    source = HostDialect(native_f16=found.native_f16).render(example.kernel)
    entry = compiler.cache.folder / compiler.key(source)
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"")  # as a full disk or a killed writer might leave it
    check_against_reference(device, example.kernel, example.arguments(np.random.default_rng(4)))
    assert entry.stat().st_size > 0


@needs_cc
def test_a_kernel_name_past_the_file_systems_limit_compiles(device: HostDevice) -> None:
    kb = KernelBuilder("k" * 300)
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    i = kb.local(0, 8)
    out[i] = x[i] * 2.0
    args = [random(np.random.default_rng(5), DType.F32, 8), poisoned(DType.F32, 8)]
    check_against_reference(device, kb.build(), args)


def barrier_kernel(groups: int, local: int) -> Kernel:
    """Values and registers that live across barriers, and a barrier inside a loop:
    ``out[i] = 2 * x[i] + x[mirror(i)] + sum over k < 3 of x[(i + k) % local in group]``."""
    kb = KernelBuilder("phases")
    x = kb.param(DType.F32)
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    g, item = kb.group(0, groups), kb.local(0, local)
    shared = kb.define(DType.F32, local, Storage.LOCAL)
    acc = kb.define(DType.F32)
    i = g * local + item
    mine = x[i]  # a per-item value used after the barriers: spilled
    acc[0] = mine * 2.0  # a register used after the barriers: spilled
    shared[item] = mine
    kb.barrier()
    acc[0] = acc[0] + shared[local - 1 - item]
    with kb.loop(3) as k:
        kb.barrier()
        shared[item] = x[g * local + (item + k) % local]
        kb.barrier()
        acc[0] = acc[0] + shared[item]
    out[i] = acc[0] + mine - mine
    return kb.build()


@needs_cc
@pytest.mark.parametrize("local", [1, 7, 64])
def test_barriers_split_the_group_into_phases(device: HostDevice, local: int) -> None:
    kernel = barrier_kernel(5, local)
    rng = np.random.default_rng(4)
    args = [random(rng, DType.F32, 5 * local), poisoned(DType.F32, 5 * local)]
    check_against_reference(device, kernel, args)
    x = args[0].astype(np.float64).reshape(5, local)
    rolled = sum(np.roll(x, -k, axis=1) for k in range(3))
    expected = 2 * x + x[:, ::-1] + rolled
    np.testing.assert_allclose(run(device, kernel, args)[1], expected.ravel(), rtol=1e-6)


@needs_cc
def test_where_is_hoisted_when_uniform_and_spilled_across_barriers(device: HostDevice) -> None:
    """A group-uniform ``where`` gives a barrier loop its trip count (computed once per
    group); a per-item one is used after a barrier (kept per work-item)."""
    kb = KernelBuilder("where_phases")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    g, item = kb.group(0, 3), kb.local(0, 8)
    shared = kb.define(DType.F32, 8, Storage.LOCAL)
    v = x[g * 8 + item]
    kept = kb.where(v < 0, 0.0, v)  # used after the barriers
    acc = kb.define(DType.F32)
    acc[0] = 0.0
    with kb.loop(kb.where(g.eq(1), 3, 1)):
        shared[item] = v
        kb.barrier()
        acc[0] = acc[0] + shared[7 - item]
        kb.barrier()
    out[g * 8 + item] = acc[0] + kept
    args = [random(np.random.default_rng(2), DType.F32, 24), poisoned(DType.F32, 24)]
    check_against_reference(device, kb.build(), args)


@needs_cc
def test_a_barrier_loop_with_a_per_item_trip_count_is_refused(device: HostDevice) -> None:
    kb = KernelBuilder("uneven")
    out = kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    item = kb.local(0, 4)
    with kb.loop(item):
        kb.barrier()
    out[item] = 1
    with pytest.raises(BackendError, match="same for every work-item") as caught:
        device.compile(kb.build())
    assert caught.value.status is ErrorStatus.KERNEL_COMPILATION


def half_kernel(dtype: DType) -> Kernel:
    """``out = (a * b + c) / a`` and a cast through f64, in ``dtype``."""
    kb = KernelBuilder(f"half_{dtype}")
    a, b, c = (kb.param(dtype) for _ in range(3))
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    n = kb.variable()
    i = kb.group(0, ceil_div(n, 64)) * 64 + kb.local(0, 64)
    with kb.if_(i < n):
        wide = a[i].cast(DType.F64) * 1.0009765625
        out[i] = (a[i] * b[i] + c[i]) / a[i] + wide.cast(dtype)
    return kb.build()


def special_values(dtype: DType) -> np.ndarray[Any, Any]:
    """Normal, subnormal, huge, infinite and NaN values, and random ones."""
    edge = [1.0, -2.5, 6e-8, -3e-5, 1e-3, 65504.0, 60000.0, np.inf, -np.inf, np.nan, 0.1]
    values = np.concatenate([edge, np.random.default_rng(5).uniform(-8, 8, 200)])
    return values.astype(dtype.numpy)


@pytest.fixture(params=[True, False], ids=["_Float16", "software"])
def half_device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> HostDevice:
    """A host device whose C has ``_Float16``, or one that rounds f16 in software."""
    found = toolchain()
    if found is None:
        pytest.skip("no working C compiler")
    if request.param and not found.native_f16:
        pytest.skip("the compiler has no _Float16")
    replaced: Toolchain = dataclasses.replace(found, native_f16=request.param)
    monkeypatch.setattr(host_device, "toolchain", lambda: replaced)
    return HostDevice(HostPool())


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16])
def test_half_precision_matches_the_interpreter_bit_for_bit(
    half_device: HostDevice, dtype: DType
) -> None:
    device = half_device
    a, b, c = (np.roll(special_values(dtype), k) for k in range(3))
    args: list[Any] = [a, b, c, poisoned(dtype, len(a)), len(a)]
    out = run(device, half_kernel(dtype), args)[3]
    expected = args[3].copy()
    interpret(half_kernel(dtype), [a, b, c, expected, len(a)])
    np.testing.assert_array_equal(out.astype(np.float64), expected.astype(np.float64))


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16])
def test_nextafter_steps_on_the_16_bit_pattern(half_device: HostDevice, dtype: DType) -> None:
    """At zero, subnormals, 1, the largest finite value, the infinities and NaN, with
    ``_Float16`` and in software: bit for bit the interpreter's (NaN for NaN)."""
    part = nextafter_steps(dtype, special=True)
    kernel = elementwise("nextafter16", [part], 64)
    a, b = part.sample(np.random.default_rng(0), 600)
    out = run(half_device, kernel, [a, b, poisoned(dtype, len(a)), len(a)])[2]
    expected = poisoned(dtype, len(a))
    interpret(kernel, [a, b, expected, len(a)])
    nan = np.isnan(expected.astype(np.float64))
    assert np.array_equal(np.isnan(out.astype(np.float64)), nan)
    np.testing.assert_array_equal(out.view(np.uint16)[~nan], expected.view(np.uint16)[~nan])


def test_f64_to_f16_casts_round_once(half_device: HostDevice) -> None:
    x = np.concatenate([NEAR_TIES[DType.F16], special_values(DType.F64)])
    kernel = elementwise("f64_to_f16", [cast(DType.F64, DType.F16)], 64)
    out = run(half_device, kernel, [x, poisoned(DType.F16, len(x)), len(x)])[1]
    expected = poisoned(DType.F16, len(x))
    interpret(kernel, [x, expected, len(x)])
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))


@needs_cc
def test_launch_arguments_are_checked(device: HostDevice) -> None:
    program = device.compile(saxpy(16).kernel)
    pool = device.pool
    x, y = pool.allocate(64), pool.allocate(64)
    foreign = HostPool().allocate(64)
    wrong: list[list[Any]] = [[x, y, 1.0], [x, 2.0, 1.0, 16], [x, foreign, 1.0, 16], [x, y, 1, 2.5]]
    for args in wrong:
        with pytest.raises(BackendError) as caught:
            device.launch(program, args)
        assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
    device.launch(program, [x, y, 1.0, 16])
    device.release(program)
    with pytest.raises(BackendError, match="released"):
        device.launch(program, [x, y, 1.0, 16])


@needs_cc
def test_relaunch_with_other_buffers_and_sizes(device: HostDevice) -> None:
    """The pointer array is reused between launches: new buffers and scalars must show."""
    program = device.compile(saxpy(1).kernel)
    pool = device.pool
    for n in (1000, 3, 0, 513):
        x_host = np.arange(1, n + 2, dtype=np.float32)
        x, y = pool.allocate(x_host.nbytes), pool.allocate(x_host.nbytes)
        pool.write(x, x_host)
        pool.write(y, np.ones_like(x_host))
        device.launch(program, [x, y, 0.5, n])
        got = np.empty_like(x_host)
        pool.read(y, got)
        expected = np.concatenate([0.5 * x_host[:n] + 1, [1.0]])
        assert np.array_equal(got, expected), n
        pool.release(x)
        pool.release(y)


@needs_cc
def test_threads_and_timing(device: HostDevice) -> None:
    single = HostDevice(HostPool(), threads=1)
    example = saxpy(100_000)
    check_against_reference(single, example.kernel, example.arguments(np.random.default_rng(6)))
    program = device.compile(example.kernel)
    x, y = device.pool.allocate(400_000), device.pool.allocate(400_000)
    assert device.launch_timed(program, [x, y, 1.0, 100_000]) > 0


def test_device_info(device: HostDevice) -> None:
    info = device.info
    assert device.name == "host" and device.backend == "host" and device.index == 0
    assert set(info.dtypes) == set(DType)
    assert info.preferred_vector_size in (16, 32, 64)
    assert info.compute > 0 and info.global_mem_size == device.pool.capacity
    assert info.supports(DType.BF16) and info.supports(DType.F16)


def bounds_checked(index: str, local: int = 64) -> Kernel:
    """``out[i] = x[i] + 1`` under ``if (i < n)``, with ``i`` written as ``index`` says."""
    kb = KernelBuilder("bounds")
    x = kb.param(DType.F32)
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable()
    base, item = kb.group(0, ceil_div(n, local)) * local, kb.local(0, local)
    i = INDEX_FORMS[index](base, item)
    loaded = x[i]  # a load before the check: it may run for every item or only below n
    with kb.if_(i < n):
        out[i] = loaded + 1.0
    return kb.build()


INDEX_FORMS: dict[str, Callable[[Value, Value], Value]] = {
    "base+item": lambda base, item: base + item,
    "item+base": lambda base, item: item + base,
    "(base+item)*1": lambda base, item: (base + item) * 1,
}


@needs_cc
@pytest.mark.parametrize(
    ("index", "guarded"), [("base+item", True), ("item+base", True), ("(base+item)*1", False)]
)
def test_a_trailing_bounds_check_becomes_the_loop_bound(
    device: HostDevice, index: str, guarded: bool
) -> None:
    kernel = bounds_checked(index)
    code = HostDialect().render(kernel).code
    assert ("l0 < end" in code) is guarded
    # The If stays: in the one loop, or in the loop for offsets where the bound would wrap.
    assert ("} else {" in code) is guarded and "if (v" in code
    rng = np.random.default_rng(8)
    for n in (1, 63, 64, 200):
        size = 2 * n + 64
        x = random(rng, DType.F32, size)
        out = run(device, kernel, [x, poisoned(DType.F32, size), n])[1]
        assert np.array_equal(out[:n], x[:n] + np.float32(1))
        assert np.isnan(out[n:]).all()  # the items past the bound stored nothing
