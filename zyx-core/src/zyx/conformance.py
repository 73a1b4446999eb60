"""The engine of ``zyx conformance NAME``: the conformance suite, counted per contract area.

:func:`run` runs ``pytest --pyargs zyx.testing --zyx-backend NAME`` in this process with a
small collector plugin, and returns a :class:`Report`: every test's outcome with its
contract area (the ``zyx_area`` marker), the skip reasons, the failures' one-line messages,
pytest's own output, and what the device claims (:class:`~zyx.testing.certificate.Claims`),
which a run certifies unless it certifies nothing (the interpreter, no f32, most tests
skipped: :func:`~zyx.testing.certificate.refusals`). :meth:`Report.renderable` draws it
for a terminal; nothing here prints.

:func:`run_isolated` (what the command uses) runs the same in a child process, so that a
backend that crashes its process (a segfault in a native call) fails the test it crashed
in, by the signal's name, and the rest of the suite goes on in a new child.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

import pytest
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from zyx.testing._suite import CRASHES
from zyx.testing.certificate import Claims, refusals
from zyx.testing.plugin import AREAS, device_under_test

SUITE = ("--pyargs", "zyx.testing")
"""What pytest collects by default: the conformance suite shipped in zyx-core."""

MESSAGE_CHARS = 300
"""Failure messages are cut to this length: the table is a summary; pytest -x shows all."""

MAX_CRASHES = 20
""":func:`run_isolated` stops after this many tests crashed their process."""

NOT_CERTIFIED = 6
"""The command's exit status where every test passed but the run certifies nothing (pytest's
own statuses are 0 to 5)."""

NO_AREA = "(no area)"
"""The area of a test without a ``zyx_area`` marker, or of a module that failed to import."""


class Outcome(Enum):
    """A test's outcome: an error in its setup or teardown fails it; an expected failure
    (xfail) counts as a skip, with its reason."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Result:
    """One test: its id, contract area, outcome, and why (skip reason or failure message)."""

    test: str
    area: str
    outcome: Outcome
    message: str = ""


@dataclass(frozen=True)
class Report:
    """The suite's results for one backend."""

    backend: str
    results: tuple[Result, ...]
    exit_code: int
    """pytest's: 0 all passed, 1 some failed, 2 interrupted, 3 internal error, 4 usage
    error (an unusable backend is one), 5 no tests collected."""
    output: str
    """What pytest wrote to the terminal, for when its exit code needs explaining."""
    claims: Claims | None = None
    """What the device under test claims; ``None`` where none was opened."""

    @property
    def ok(self) -> bool:
        """Every test passed or skipped with a reason."""
        return self.exit_code == pytest.ExitCode.OK

    def refusals(self) -> list[str]:
        """Why the run certifies nothing, whatever passed; ``[]`` where it certifies."""
        skipped = len(self.with_outcome(Outcome.SKIPPED))
        return refusals(self.claims, len(self.results), skipped)

    @property
    def certified(self) -> bool:
        """Every test passed or skipped, and the run certifies what the device claims."""
        return self.ok and not self.refusals()

    @property
    def command_status(self) -> int:
        """``zyx conformance``'s exit status: pytest's where it is not 0, else 0 where the
        run certifies the device and ``NOT_CERTIFIED`` where it does not."""
        if not self.ok:
            return self.exit_code
        return NOT_CERTIFIED if self.refusals() else 0

    def counts(self) -> dict[str, Counter[Outcome]]:
        """Outcomes per area, areas in the suite's order, unknown ones after them."""
        counts: dict[str, Counter[Outcome]] = {}
        for result in sorted(self.results, key=lambda r: _area_order(r.area)):
            counts.setdefault(result.area, Counter())[result.outcome] += 1
        return counts

    def with_outcome(self, outcome: Outcome) -> list[Result]:
        return [r for r in self.results if r.outcome is outcome]

    def renderable(self) -> RenderableType:
        """Areas × counts, then the skips grouped by reason, then the failures; pytest's own
        output instead when no test ran (an unusable backend), or after the tables when
        pytest stopped for another reason than failed tests."""
        pytest_says = Text(self.output.rstrip() or f"pytest exited with {self.exit_code}")
        if not self.results:
            return pytest_says
        parts: list[RenderableType] = [self._area_table()]
        skipped = self.with_outcome(Outcome.SKIPPED)
        if skipped:
            parts.append(_skip_table(skipped))
        failed = self.with_outcome(Outcome.FAILED)
        if failed:
            parts.append(_failure_table(failed))
        if self.exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            parts.append(pytest_says)
        parts.append(self._verdict())
        return Group(*parts)

    def _verdict(self) -> Text:
        """What the run certifies (the claims), or why it certifies nothing."""
        claims, reasons = self.claims, self.refusals()
        if reasons or claims is None:
            return Text(f"NOT certified: {'; '.join(reasons)}", style="bold red")
        if not self.ok:
            return Text(f"NOT certified: {claims.device} fails tests of what it claims",
                        style="bold red")  # fmt: skip
        return Text(f"certified: {claims.device} ({claims.name}), {claims.summary()}",
                    style="green")  # fmt: skip

    def _area_table(self) -> Table:
        label = " (IR interpreter)" if self.claims is not None and self.claims.interpreted else ""
        table = Table("area", "passed", "failed", "skipped",
                      title=f"zyx conformance: {self.backend}{label}")  # fmt: skip
        total: Counter[Outcome] = Counter()
        for area, counts in self.counts().items():
            table.add_row(area, *_cells(counts))
            total += counts
        table.add_section()
        table.add_row("total", *_cells(total), style="bold")
        return table


def run(backend: str, pytest_args: Sequence[str] = (), suite: Sequence[str] = SUITE) -> Report:
    """Run the conformance ``suite`` against ``backend`` (a device string) in this process.

    ``pytest_args`` go to pytest as they are (``-k dtype``, ``-x``). pytest's cache is off,
    so the run leaves no ``.pytest_cache`` behind in the current directory.
    """
    collector = _Collector()
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        exit_code = pytest.main(_pytest_args(backend, pytest_args, suite), plugins=[collector])
    results, output_text = tuple(collector.results()), output.getvalue()
    return Report(backend, results, int(exit_code), output_text, collector.claims)


def run_isolated(
    backend: str, pytest_args: Sequence[str] = (), suite: Sequence[str] = SUITE
) -> Report:
    """:func:`run` in a child process: a test that ends it (a signal, or an ``exit()`` in
    native code) fails with the signal or status, and the tests not run yet go on in a new
    child (but not past pytest's ``-x`` or ``--maxfail``, nor after :data:`MAX_CRASHES`
    crashes). The child has this process's environment."""
    collector = _Collector()
    outputs: list[str] = []
    crashes = 0
    with tempfile.TemporaryDirectory(prefix="zyx-conformance-") as folder:
        journal, done = Path(folder, "journal"), Path(folder, "done")
        while True:
            done.write_text("\n".join(r.test for r in collector.results()))
            child = subprocess.run(
                [sys.executable, "-m", "zyx.conformance", str(journal), str(done),
                 *_pytest_args(backend, pytest_args, suite)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
                env={**os.environ, CRASHES: folder},
            )  # fmt: skip
            outputs.append(child.stdout)
            crashed, maxfail = _replay(journal, collector)
            if crashed is None:
                exit_code = _exit_code(child.returncode, crashes)
                break
            crashes += 1
            collector.add(_crash(crashed, child.returncode))
            failed = sum(r.outcome is Outcome.FAILED for r in collector.results())
            if crashes == MAX_CRASHES or 0 < maxfail <= failed:
                outputs.append(
                    f"zyx conformance: stopped after {crashes} crashed "
                    f"test{'s' if crashes > 1 else ''}; the tests after it did not run\n"
                )
                exit_code = pytest.ExitCode.INTERRUPTED
                break
    results = tuple(collector.results())
    return Report(backend, results, int(exit_code), "".join(outputs), collector.claims)


def _pytest_args(backend: str, pytest_args: Sequence[str], suite: Sequence[str]) -> list[str]:
    return [*suite, "--zyx-backend", backend, "-p", "no:cacheprovider", *pytest_args]


def _replay(journal: Path, collector: _Collector) -> tuple[Result | None, int]:
    """Add the journal's results to ``collector``, then empty it; return the test that
    started and never finished (with its area), if any, and pytest's ``maxfail`` (0: none)."""
    running: Result | None = None
    maxfail = 0
    for line in journal.read_text().splitlines() if journal.exists() else ():
        event = json.loads(line)
        kind = event.pop("event")
        if kind == "result":
            collector.add(Result(**{**event, "outcome": Outcome(event["outcome"])}))
        elif kind == "config":
            maxfail = int(event["maxfail"])
        elif kind == "claims":
            collector.claims = Claims(**event)
        else:  # a test's start, or its finish
            running = (
                Result(event["test"], event["area"], Outcome.FAILED) if kind == "start" else None
            )
    journal.unlink(missing_ok=True)
    return running, maxfail


def _crash(test: Result, returncode: int) -> Result:
    if returncode >= 0:
        how = f"exit status {returncode}"
    else:
        try:
            how = signal.Signals(-returncode).name
        except ValueError:
            how = f"signal {-returncode}"
    message = f"crashed the test process ({how}); run it alone under pytest for its stack"
    return Result(test.test, test.area, Outcome.FAILED, message)


def _exit_code(returncode: int, crashes: int) -> int:
    """The last child's status; a run whose tests all passed but some crashed failed (its
    last child may have found no test left: the crash was in the last one)."""
    if returncode < 0:
        return pytest.ExitCode.INTERNAL_ERROR
    if crashes and returncode in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        return pytest.ExitCode.TESTS_FAILED
    return returncode


class _Collector:
    """pytest plugin: one :class:`Result` per test from its setup, call and teardown reports."""

    def __init__(self) -> None:
        self._results: dict[str, Result] = {}
        self.claims: Claims | None = None

    def results(self) -> list[Result]:
        return list(self._results.values())

    def add(self, result: Result) -> None:
        """Keep each test's worst phase: a failed teardown fails a test whose call passed."""
        previous = self._results.get(result.test)
        if previous is None or _RANK[result.outcome] > _RANK[previous.outcome]:
            self._results[result.test] = result

    @pytest.hookimpl(trylast=True)  # after zyx.testing.plugin's opened the device
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        device = device_under_test(session.config)
        if device is not None:
            self.note(Claims.of(device))

    def note(self, claims: Claims) -> None:
        self.claims = claims

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            message = _message(report.longrepr)
            self.add(Result(report.nodeid, NO_AREA, Outcome.FAILED, message))

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        area = dict(report.user_properties).get("zyx_area", NO_AREA)
        result = self._result(report, str(area))
        if result is not None:
            self.add(result)

    @staticmethod
    def _result(report: pytest.TestReport, area: str) -> Result | None:
        if report.failed:
            message = _message(report.longrepr)
            if report.when != "call":
                message = f"error in {report.when}: {message}"
            return Result(report.nodeid, area, Outcome.FAILED, message)
        if report.skipped:
            return Result(report.nodeid, area, Outcome.SKIPPED, _skip_reason(report))
        if report.when == "call":
            return Result(report.nodeid, area, Outcome.PASSED)
        return None


_RANK = {Outcome.PASSED: 0, Outcome.SKIPPED: 1, Outcome.FAILED: 2}


def _message(longrepr: object) -> str:
    """The exception's message (not the traceback), on one line and at most 300 characters."""
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr)
    return textwrap.shorten(text, MESSAGE_CHARS, placeholder=" …")


def _skip_reason(report: pytest.TestReport) -> str:
    if hasattr(report, "wasxfail"):
        return f"expected to fail: {report.wasxfail}" if report.wasxfail else "expected to fail"
    # A skip's longrepr is (path, line, "Skipped: reason").
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix("Skipped: ")


def _area_order(area: str) -> tuple[int, str]:
    return (AREAS.index(area) if area in AREAS else len(AREAS), area)


def _cells(counts: Counter[Outcome]) -> list[Text]:
    styles = {Outcome.PASSED: "green", Outcome.FAILED: "red", Outcome.SKIPPED: "yellow"}
    return [Text(str(counts[o]), style=styles[o] if counts[o] else "dim") for o in Outcome]


def _skip_table(skipped: Iterable[Result]) -> Table:
    """Skips grouped by area and reason: one row per distinct reason, with its count."""
    groups = Counter((r.area, r.message) for r in skipped)
    table = Table("area", "tests", "skipped because", title="skipped", title_justify="left")
    for (area, reason), count in sorted(groups.items(), key=lambda g: _area_order(g[0][0])):
        table.add_row(area, str(count), Text(reason))  # Text: "[f16]" is no markup
    return table


def _failure_table(failed: Iterable[Result]) -> Table:
    table = Table("area", "test", "failure", title="failed", title_justify="left")
    table.columns[1].overflow = "fold"  # a test id is only useful whole
    for result in sorted(failed, key=lambda r: _area_order(r.area)):
        table.add_row(result.area, Text(result.test), Text(result.message, style="red"))
    return table


class _Journal(_Collector):
    """The child's plugin: deselects the tests an earlier child ran, and appends each
    test's start, results and finish to the journal as they happen, so that the parent
    knows which test was running when the child died."""

    def __init__(self, journal: Path, done: Path) -> None:
        super().__init__()
        self._file = journal.open("a", buffering=1)
        self._done = set(done.read_text().splitlines())
        self._areas: dict[str, str] = {}

    def add(self, result: Result) -> None:
        super().add(result)
        self._write(event="result", **{**asdict(result), "outcome": result.outcome.value})

    def note(self, claims: Claims) -> None:
        super().note(claims)
        self._write(event="claims", **asdict(claims))

    def _write(self, **event: object) -> None:
        self._file.write(json.dumps(event) + "\n")

    @pytest.hookimpl
    def pytest_configure(self, config: pytest.Config) -> None:
        self._write(event="config", maxfail=int(config.getoption("maxfail") or 0))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        ran = [item for item in items if item.nodeid in self._done]
        if ran:
            items[:] = [item for item in items if item.nodeid not in self._done]
            config.hook.pytest_deselected(items=ran)
        for item in items:
            self._areas[item.nodeid] = str(dict(item.user_properties).get("zyx_area", NO_AREA))

    @pytest.hookimpl
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self._write(event="start", test=nodeid, area=self._areas.get(nodeid, NO_AREA))

    @pytest.hookimpl
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self._write(event="finish", test=nodeid, area=self._areas.get(nodeid, NO_AREA))


if __name__ == "__main__":
    # The child of run_isolated: JOURNAL DONE PYTEST_ARGS...
    sys.exit(pytest.main(sys.argv[3:], plugins=[_Journal(Path(sys.argv[1]), Path(sys.argv[2]))]))
