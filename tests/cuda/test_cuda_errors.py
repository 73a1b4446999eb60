"""Failures become BackendErrors with the right status, in processes of their own where
they would break the CUDA context or need the driver to be absent."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hermetic import clean_environ

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = pytest.mark.cuda


def run_python(code: str, home: Path, **env: str) -> str:
    """The output of ``code`` run in a Python of its own, with ``home`` as its empty home
    (``hermetic``) and ``env``."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_environ(home, **env),
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_without_a_driver_cuda_is_quarantined_and_the_host_works(
    no_gpu: None, tmp_path: Path
) -> None:
    out = run_python(
        """
        import zyx
        from zyx.plugins import registry
        names = [d.name for d in zyx.devices()]
        cuda = [b for b in registry().backends() if b.name == "cuda"][0]
        print(names)
        print(cuda.state.value, "|", cuda.reason)
        try:
            zyx.device("cuda")
        except zyx.PluginError as error:
            print("PluginError", type(error.__cause__).__name__)
        """,
        tmp_path,
        ZYX_PLUGINS="cuda,host",
    )
    names, state, error = out.strip().splitlines()
    assert "host:0" in names or "host" in names
    assert state.startswith("quarantined") and "DyLibNotFound" in state
    assert error.startswith("PluginError")


@pytest.mark.gpu
def test_an_illegal_address_surfaces_at_the_next_read(gpu: None, tmp_path: Path) -> None:
    """A scatter through loaded indices (which the launch check cannot see: a static
    out-of-bounds store is refused before the launch) faults on the GPU."""
    out = run_python(
        """
        import numpy as np
        from zyx.dtypes import DType
        from zyx.errors import BackendError
        from zyx.ir import INDEX, KernelBuilder, ParamKind
        from zyx_cuda.device import CudaDevice

        kb = KernelBuilder("wild")
        out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
        where = kb.param(INDEX)
        i = kb.local(0, 32)
        out[where[i]] = 1.0
        device = CudaDevice(0)
        program = device.compile(kb.build())
        buf, far = device.pool.allocate(128), device.pool.allocate(32 * 8)
        device.pool.write(far, np.full(32, 1 << 40, np.int64))
        device.launch(program, [buf, far])
        try:
            device.pool.read(buf, np.empty(32, np.float32))
        except BackendError as error:
            print(error.status.name, error.context)
        """,
        tmp_path,
    )
    assert out.startswith("KERNEL_SYNC") and "CUDA_ERROR_ILLEGAL_ADDRESS" in out


@pytest.mark.gpu
def test_bad_arguments_are_errors_before_any_native_call(device: CudaDevice) -> None:
    import numpy as np
    from lcg import lcg_kernel

    from zyx.errors import BackendError, ErrorStatus
    from zyx_cuda.device import CudaDevice

    pool, program = device.pool, device.compile(lcg_kernel())
    a = pool.allocate(16)
    with pytest.raises(BackendError) as caught:
        device.launch(program, [a, a, a, 1.5, 4])
    assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
    with pytest.raises(BackendError) as caught:
        device.launch(program, [a, a, a, 1 << 70, 4])
    assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
    with pytest.raises(BackendError):
        pool.write(a, np.zeros(5, np.int32))
    pool.release(a)
    with pytest.raises(BackendError):
        device.launch(program, [a, a, a, 1, 4])
    device.release(program)
    other = CudaDevice(0, queues=1)
    foreign = other.compile(lcg_kernel())
    b = pool.allocate(16)
    with pytest.raises(BackendError) as caught:
        device.launch(foreign, [b, b, b, 1, 4])
    assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
    pool.release(b)
    other.release(foreign)


@pytest.mark.gpu
def test_device_ids_select_devices(gpu: None) -> None:
    from zyx.errors import BackendError, ErrorStatus
    from zyx_cuda.config import CudaSection
    from zyx_cuda.plugin import open_cuda, probe

    result = probe()
    assert result.available and result.devices >= 1
    assert open_cuda(CudaSection(device_ids=[])) == []
    with pytest.raises(BackendError) as caught:
        open_cuda(CudaSection(device_ids=[99]))
    assert caught.value.status is ErrorStatus.DEVICE_ENUMERATION
    from zyx_cuda.device import CudaDevice

    (device,) = open_cuda(CudaSection(device_ids=[0], queues=3))
    assert isinstance(device, CudaDevice)
    assert device.name == "cuda:0" and len(device.streams.handles) == 3
    info = device.info
    assert info.compute_capability is not None and info.warp_size == 32
    assert info.global_mem_size > 0 and info.local_mem_size >= 48 * 1024
