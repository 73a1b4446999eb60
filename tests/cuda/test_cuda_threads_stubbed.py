"""zyx-cuda's locking and bookkeeping from several threads at once, on the stand-in driver
(``stub_driver``, in a process of its own): no GPU, so no result is compared, but every
launch, copy, deferred free and synchronize runs through both launch paths under a short
switch interval, with no exception, no hang, and the pool's free bytes exact at the end.
``test_cuda_threads.py`` runs the same with results compared on a GPU. Needs a C compiler."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from stub_driver import run_stubbed

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH"),
]

HERE = Path(__file__).parent


@pytest.mark.parametrize("path", ["native", "python"])
def test_threads_share_a_stubbed_device(path: str) -> None:
    out = run_stubbed(Path(__file__), path)
    assert out == "ok\n", out


def main(path: str) -> str:
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    install()
    from zyx_cuda import program as programs

    if path == "python":  # as where zyx-cuda's native module is not built
        programs.launcher_type = lambda: None  # type: ignore[assignment]
        programs.launch_function = lambda: None  # type: ignore[assignment]
    from zyx.host.pool import HostPool
    from zyx.testing import stress
    from zyx_cuda.device import CudaDevice

    device = CudaDevice(0, queues=4)
    report = stress.run(device, HostPool(), rounds=40, switch_interval=1e-6, compare=False)
    return "ok" if report.ok else str(report)


if __name__ == "__main__":
    print(main(sys.argv[1]))
