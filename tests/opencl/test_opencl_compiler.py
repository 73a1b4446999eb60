"""The compiler: build errors carry the log; binaries are cached on disk by source,
device, driver and options."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pyopencl as cl
import pytest
from opencl_support import add_kernel

from zyx.codegen import Source
from zyx.errors import BackendError, ErrorStatus
from zyx.host.cpu import cpu_info
from zyx_opencl.compiler import BUILD_OPTIONS, Compiler, host_code
from zyx_opencl.device import OpenCLDevice

pytestmark = pytest.mark.opencl


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    return tmp_path / "opencl"


def fresh(device: OpenCLDevice) -> Compiler:
    return Compiler(device.pool.context, device.cl_device)


def test_the_build_options_are_zyx_0_17s() -> None:
    assert BUILD_OPTIONS == ("-cl-finite-math-only", "-cl-no-signed-zeros", "-cl-mad-enable")


def test_a_cpu_devices_binaries_are_keyed_by_the_host_cpu() -> None:
    """PoCL's binaries are machine code for the CPU that built them: its model and features
    are in the cache key; a GPU's are not the host's."""
    cpu = cpu_info()
    assert host_code(SimpleNamespace(type=cl.device_type.CPU)) == (cpu.model, *sorted(cpu.flags))
    assert host_code(SimpleNamespace(type=cl.device_type.GPU)) == ()


def test_a_failed_build_raises_with_the_build_log(device: OpenCLDevice, cache_dir: Path) -> None:
    broken = Source("broken", "__kernel void broken(__global float* p) { p[0] = nope; }", "opencl")
    with pytest.raises(BackendError) as caught:
        fresh(device).build(broken)
    error = caught.value
    assert error.status is ErrorStatus.KERNEL_COMPILATION
    assert "broken" in error.context
    assert "nope" in error.log  # the compiler's own words about the undeclared name
    assert "nope" in str(error)
    assert not cache_dir.exists() or not any(cache_dir.iterdir())


def test_a_second_build_is_a_cache_hit(
    device: OpenCLDevice, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = device.dialect.render(add_kernel())
    fresh(device).build(source)
    (entry,) = cache_dir.iterdir()
    assert entry.stat().st_size > 0

    program = cached_only(device, monkeypatch).build(source)
    assert program.get_info(cl.program_info.KERNEL_NAMES) == "k_add"


def cached_only(device: OpenCLDevice, monkeypatch: pytest.MonkeyPatch) -> Compiler:
    """A compiler that fails the test if it compiles rather than loads a cached binary."""

    def no_compiler(source: Source) -> None:
        raise AssertionError(f"{source.name} compiled although its binary is cached")

    compiler = fresh(device)
    monkeypatch.setattr(compiler, "_from_source", no_compiler)
    return compiler


def test_another_source_or_device_is_another_entry(device: OpenCLDevice, cache_dir: Path) -> None:
    compiler = fresh(device)
    compiler.build(device.dialect.render(add_kernel()))
    compiler.build(device.dialect.render(add_kernel(local=32)))
    assert len(list(cache_dir.iterdir())) == 2


def test_a_corrupt_entry_is_a_miss_and_is_rewritten(
    device: OpenCLDevice, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = device.dialect.render(add_kernel())
    fresh(device).build(source)
    (entry,) = cache_dir.iterdir()
    entry.write_bytes(b"not a program binary")
    fresh(device).build(source)
    assert entry.read_bytes() != b"not a program binary"
    cached_only(device, monkeypatch).build(source)
