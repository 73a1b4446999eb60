"""``zyx.testing.plugin``: cheap in every pytest run, and the suite skips until asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zyx.testing.plugin import HOW_TO_RUN


def test_loading_the_plugin_imports_no_numpy_and_no_backend() -> None:
    code = (
        "import sys, zyx.testing.plugin; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'zyx_cuda', 'zyx_opencl', 'pyopencl', 'pydantic') or m == 'zyx.plugins'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


class Skips:
    """pytest plugin: the skip reason of each test."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and isinstance(report.longrepr, tuple):
            self.reasons[report.nodeid] = report.longrepr[2]


def test_without_a_backend_the_suite_skips_saying_how_to_run_it() -> None:
    skips = Skips()
    code = pytest.main(["--pyargs", "zyx.testing.test_pool", "-p", "no:cacheprovider", "-q"],
                       plugins=[skips])  # fmt: skip
    assert code == pytest.ExitCode.OK
    assert len(skips.reasons) > 10
    assert set(skips.reasons.values()) == {f"Skipped: {HOW_TO_RUN}"}
