"""The engine of ``zyx conformance NAME``: the conformance suite, counted per contract area.

:func:`run` runs ``pytest --pyargs zyx.testing --zyx-backend NAME`` in this process with a
small collector plugin, and returns a :class:`Report`: every test's outcome with its
contract area (the ``zyx_area`` marker), the skip reasons, the failures' one-line messages,
and pytest's own output. :meth:`Report.renderable` draws it for a terminal; nothing here
prints.
"""

from __future__ import annotations

import contextlib
import io
import textwrap
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import pytest
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from zyx.testing.plugin import AREAS

SUITE = ("--pyargs", "zyx.testing")
"""What pytest collects by default: the conformance suite shipped in zyx-core."""

MESSAGE_CHARS = 300
"""Failure messages are cut to this length: the table is a summary; pytest -x shows all."""

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

    @property
    def ok(self) -> bool:
        """Every test passed or skipped with a reason."""
        return self.exit_code == pytest.ExitCode.OK

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
        return Group(*parts)

    def _area_table(self) -> Table:
        table = Table("area", "passed", "failed", "skipped",
                      title=f"zyx conformance: {self.backend}")  # fmt: skip
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
    args = [*suite, "--zyx-backend", backend, "-p", "no:cacheprovider", *pytest_args]
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        exit_code = pytest.main(args, plugins=[collector])
    return Report(backend, tuple(collector.results()), int(exit_code), output.getvalue())


class _Collector:
    """pytest plugin: one :class:`Result` per test from its setup, call and teardown reports."""

    def __init__(self) -> None:
        self._results: dict[str, Result] = {}

    def results(self) -> list[Result]:
        return list(self._results.values())

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            message = _message(report.longrepr)
            self._results[report.nodeid] = Result(report.nodeid, NO_AREA, Outcome.FAILED, message)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the worst phase: a failed teardown fails a test whose call passed."""
        area = dict(report.user_properties).get("zyx_area", NO_AREA)
        result = self._result(report, str(area))
        if result is None:
            return
        previous = self._results.get(report.nodeid)
        if previous is None or _RANK[result.outcome] > _RANK[previous.outcome]:
            self._results[report.nodeid] = result

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
        table.add_row(area, str(count), reason)
    return table


def _failure_table(failed: Iterable[Result]) -> Table:
    table = Table("area", "test", "failure", title="failed", title_justify="left")
    table.columns[1].overflow = "fold"  # a test id is only useful whole
    for result in sorted(failed, key=lambda r: _area_order(r.area)):
        table.add_row(result.area, result.test, Text(result.message, style="red"))
    return table
