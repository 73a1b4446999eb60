"""``zyx.conformance``: the suite run in process (or in a child, which survives a crash),
counted per contract area.

Most tests run a small suite of their own, written to a temporary folder, whose outcomes
are known; the command's test runs the real suite's pool area against the host backend.
"""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import zyx.conformance
import zyx.plugins
from zyx.cli import app
from zyx.conformance import NO_AREA, Outcome, Report, Result, run, run_isolated
from zyx.plugins import ENTRY_POINT_GROUP, Registry

HOST = EntryPoint("host", "zyx.host.plugin", ENTRY_POINT_GROUP)

SAMPLE = """
import pytest

pool = pytest.mark.zyx_area("pool")
dtype = pytest.mark.zyx_area("dtype")
errors = pytest.mark.zyx_area("errors")


@pool
def test_passes(zyx_device):
    assert zyx_device.name == "host"


@pool
def test_fails():
    assert 1 == 2, "one is not two"


@dtype
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_skips(dtype):
    pytest.skip(f"host has no {dtype} math")


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown broke")


@errors
def test_teardown_fails(broken_teardown):
    pass


@errors
@pytest.mark.xfail(reason="known bug")
def test_expected_failure():
    assert False


def test_without_area():
    pass
"""


@pytest.fixture
def host_registry(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], tmp_path: Path) -> None:
    """The process registry replaced by one with only the host, in a clean environment,
    with a compiler cache of its own (the cache reads ``os.environ``, not the registry's)."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(zyx.plugins, "_registry", Registry(environ, [HOST]))


def run_sample(tmp_path: Path, source: str = SAMPLE, backend: str = "host") -> Report:
    # A name of its own per test: pytest keeps imported test modules in sys.modules.
    suite = tmp_path / f"suite_{tmp_path.name}.py"
    suite.write_text(source)
    return run(backend, ["--import-mode=importlib"], suite=[str(suite)])


def by_test(report: Report) -> dict[str, Result]:
    return {r.test.rpartition("::")[2]: r for r in report.results}


@pytest.mark.usefixtures("host_registry")
def test_outcomes_are_counted_per_area(tmp_path: Path) -> None:
    report = run_sample(tmp_path)
    counts = report.counts()
    assert list(counts) == ["pool", "dtype", "errors", NO_AREA], "the suite's area order"
    assert counts["pool"] == {Outcome.PASSED: 1, Outcome.FAILED: 1}
    assert counts["dtype"] == {Outcome.SKIPPED: 2}
    assert counts["errors"] == {Outcome.FAILED: 1, Outcome.SKIPPED: 1}
    assert counts[NO_AREA] == {Outcome.PASSED: 1}
    assert report.exit_code == pytest.ExitCode.TESTS_FAILED and not report.ok


@pytest.mark.usefixtures("host_registry")
def test_each_skip_and_failure_says_why_in_one_line(tmp_path: Path) -> None:
    results = by_test(run_sample(tmp_path))
    assert results["test_fails"].message == "AssertionError: one is not two assert 1 == 2"
    assert results["test_skips[f16]"].message == "host has no f16 math"
    assert results["test_teardown_fails"].outcome is Outcome.FAILED
    assert (
        results["test_teardown_fails"].message == "error in teardown: RuntimeError: teardown broke"
    )
    assert results["test_expected_failure"].message == "expected to fail: known bug"


@pytest.mark.usefixtures("host_registry")
def test_rendering_shows_counts_grouped_skips_and_failures(tmp_path: Path) -> None:
    console = Console(record=True, width=200)
    console.print(run_sample(tmp_path).renderable())
    lines = [
        " ".join(line.replace("│", " ").split()) for line in console.export_text().splitlines()
    ]
    assert "pool 1 1 0" in lines and "total 2 2 3" in lines
    assert "dtype 2 host has no f16 math" not in lines, "each distinct reason is its own row"
    assert "dtype 1 host has no f16 math" in lines and "dtype 1 host has no bf16 math" in lines
    assert any("test_fails AssertionError: one is not two assert 1 == 2" in line for line in lines)


@pytest.mark.usefixtures("host_registry")
def test_rendering_keeps_brackets_in_test_ids_and_reasons(tmp_path: Path) -> None:
    """A parametrized test's id and a reason in brackets are shown whole, not as markup."""
    source = (
        "import pytest\n\n@pytest.mark.zyx_area('dtype')\n"
        "@pytest.mark.parametrize('dtype', ['f16'])\ndef test_cast(dtype):\n"
        "    assert False, '[red]not markup[/red]'\n\n"
        "@pytest.mark.zyx_area('dtype')\ndef test_skip():\n    pytest.skip('[bold]why[/bold]')\n"
    )
    console = Console(record=True, width=200)
    console.print(run_sample(tmp_path, source).renderable())
    text = console.export_text()
    assert "::test_cast[f16]" in text and "[red]not markup[/red]" in text
    assert "[bold]why[/bold]" in text


@pytest.mark.usefixtures("host_registry")
def test_a_clean_run_is_ok(tmp_path: Path) -> None:
    report = run_sample(
        tmp_path, 'import pytest\n\n@pytest.mark.zyx_area("pool")\ndef test_ok():\n    pass\n'
    )
    assert report.ok and report.exit_code == 0
    assert report.results == (Result(report.results[0].test, "pool", Outcome.PASSED),)


@pytest.mark.usefixtures("host_registry")
def test_an_unusable_backend_is_a_usage_error_with_the_reason(tmp_path: Path) -> None:
    report = run_sample(tmp_path, backend="tpu")
    assert report.exit_code == pytest.ExitCode.USAGE_ERROR and not report.ok
    assert report.results == ()
    assert "no backend 'tpu' is installed (installed: host)" in report.output
    console = Console(record=True, width=200)
    console.print(report.renderable())
    assert "no backend 'tpu' is installed" in console.export_text()


@pytest.mark.usefixtures("host_registry")
def test_the_command_certifies_the_host_pool_with_the_real_suite() -> None:
    done = CliRunner().invoke(app, ["conformance", "host", "--", "-k", "test_pool"])
    assert done.exit_code == 0, done.stdout
    rows = [" ".join(line.replace("│", " ").split()) for line in done.stdout.splitlines()]
    pool = next(row for row in rows if row.startswith("pool "))
    assert int(pool.split()[1]) > 0 and pool.split()[2:] == ["0", "0"]
    assert not any(row.startswith(("device ", "dtype ")) for row in rows), "-k reached pytest"


@pytest.mark.usefixtures("host_registry")
def test_the_command_exits_with_pytests_status() -> None:
    done = CliRunner().invoke(app, ["conformance", "tpu"], env={"COLUMNS": "200"})
    assert done.exit_code == pytest.ExitCode.USAGE_ERROR
    assert "no backend 'tpu' is installed" in done.stdout


CRASHING = """
import ctypes
import pytest


@pytest.mark.zyx_area("pool")
def test_before(zyx_device):
    assert zyx_device.name == "host"


@pytest.mark.zyx_area("device")
@pytest.mark.parametrize("n", [1, 2])
def test_crashes(n):
    ctypes.string_at(0)  # what a segfault in a backend's native call does to the process


@pytest.mark.zyx_area("dtype")
def test_after():
    pass
"""


@pytest.fixture
def child_environ(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], tmp_path: Path) -> None:
    """The clean environment in ``os.environ``, where ``run_isolated``'s child gets it."""
    for name in [n for n in os.environ if n not in environ]:
        monkeypatch.delenv(name)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path / "cache"))


def run_crashing(tmp_path: Path, *pytest_args: str, source: str = CRASHING) -> Report:
    suite = tmp_path / "suite_crashing.py"
    suite.write_text(source)
    return run_isolated("host", ["--import-mode=importlib", *pytest_args], suite=[str(suite)])


@pytest.mark.usefixtures("child_environ")
def test_a_test_that_exits_the_process_fails_and_the_rest_run(tmp_path: Path) -> None:
    """Native code that calls exit() mid-test ends the child without a signal."""
    source = CRASHING.replace("ctypes.string_at(0)", "os._exit(3)").replace(
        "import ctypes", "import os"
    )
    results = by_test(run_crashing(tmp_path, source=source))
    assert results["test_crashes[1]"].message.startswith("crashed the test process (exit status 3)")
    assert results["test_after"].outcome is Outcome.PASSED


CRASHING_BATCH = """
import ctypes
import pytest
from zyx.dtypes import DType
from zyx.testing._suite import Batches
from zyx.testing.kernels import Elementwise


def crash(rng, n):
    ctypes.string_at(0)  # while the batch runs, as a backend's crash in its kernel would


PARTS = [Elementwise(name, (DType.F32,), DType.F32, lambda x: x, crash, ()) for name in "abc"]


@pytest.fixture(scope="module")
def batches(zyx_device):
    return Batches(zyx_device, 64)


@pytest.mark.zyx_area("numerics")
@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.name)
def test_in_batch(batches, part):
    batches.outcome("crashing", PARTS, part).check()


@pytest.mark.zyx_area("dtype")
def test_after():
    pass
"""


@pytest.mark.usefixtures("child_environ")
def test_the_other_tests_of_a_crashed_batch_fail_without_crashing_again(tmp_path: Path) -> None:
    """Numerics tests share one kernel per batch: one crash fails them all, and costs one
    child, not one per test."""
    report = run_crashing(tmp_path, source=CRASHING_BATCH)
    results = by_test(report)
    assert results["test_in_batch[a]"].message.startswith("crashed the test process (SIGSEGV)")
    for other in ("test_in_batch[b]", "test_in_batch[c]"):
        assert (
            results[other].message
            == "Failed: batch crashing crashed the test process in an earlier test"
        )
    assert results["test_after"].outcome is Outcome.PASSED
    assert report.output.count("Fatal Python error") == 1, "one crash, one child after it"


@pytest.mark.usefixtures("child_environ")
def test_a_crash_in_the_last_test_fails_the_run(tmp_path: Path) -> None:
    """The child after it finds no test left, which is no reason to pass, nor a usage error."""
    last = CRASHING.split('@pytest.mark.zyx_area("dtype")')[0]
    report = run_crashing(tmp_path, source=last)
    assert sorted(by_test(report)) == ["test_before", "test_crashes[1]", "test_crashes[2]"]
    assert report.exit_code == pytest.ExitCode.TESTS_FAILED


@pytest.mark.usefixtures("child_environ")
def test_a_test_that_crashes_its_process_fails_by_the_signal_and_the_rest_run(
    tmp_path: Path,
) -> None:
    report = run_crashing(tmp_path)
    results = by_test(report)
    assert results["test_before"].outcome is Outcome.PASSED
    assert results["test_after"] == Result(results["test_after"].test, "dtype", Outcome.PASSED)
    for crashed in ("test_crashes[1]", "test_crashes[2]"):
        assert results[crashed].outcome is Outcome.FAILED and results[crashed].area == "device"
        assert results[crashed].message.startswith("crashed the test process (SIGSEGV)")
    assert len(report.results) == 4, "each test reported once"
    assert report.exit_code == pytest.ExitCode.TESTS_FAILED
    assert "Fatal Python error: Segmentation fault" in report.output, "the child's own stack"


@pytest.mark.usefixtures("child_environ")
@pytest.mark.parametrize("stop", ["-x", "-xq", "--maxfail=1", "max crashes"])
def test_the_run_stops_at_a_crash_after_x_or_too_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: str
) -> None:
    if stop == "max crashes":
        monkeypatch.setattr(zyx.conformance, "MAX_CRASHES", 1)
    report = run_crashing(tmp_path, *([] if stop == "max crashes" else [stop]))
    assert sorted(by_test(report)) == ["test_before", "test_crashes[1]"]
    assert report.exit_code == pytest.ExitCode.INTERRUPTED
    assert "stopped after 1 crashed test; the tests after it did not run" in report.output


@pytest.mark.usefixtures("child_environ")
def test_the_child_tells_the_parent_what_the_device_claims(tmp_path: Path) -> None:
    """``zyx conformance`` runs the suite in a child: the claims it certifies come back."""
    source = 'import pytest\n\n@pytest.mark.zyx_area("pool")\ndef test_ok():\n    pass\n'
    report = run_crashing(tmp_path, source=source)
    assert report.claims is not None and report.claims.device == "host"
    assert "f32" in report.claims.dtypes and report.certified
