"""pytest plugin of zyx's backend conformance suite (entry point ``pytest11``).

pytest loads it in every run wherever zyx-core is installed, so it stays cheap: it adds
the ``--zyx-backend`` option, the ``zyx_area`` marker and the ``zyx_device`` and
``zyx_tuning_cache`` fixtures, and imports nothing else until a backend is asked for. The
suite is collected only on request::

    pytest --pyargs zyx.testing --zyx-backend host      # or opencl, opencl:1, cuda, ...

Without ``--zyx-backend`` the suite's tests skip, saying how to run them. With it, the
device is opened when the session starts; a backend that cannot be opened (not installed,
quarantined, disabled) ends the session at once with the reason zyx gives, never a skip.

Every suite test carries ``@pytest.mark.zyx_area(AREA)`` (pool, device, dtype, numerics,
errors, threads); the area is also recorded in the test reports' ``user_properties`` (and so
in JUnit XML), and the terminal summary counts outcomes per area and says whether the run
certifies the device (:mod:`zyx.testing.certificate`).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from _pytest.terminal import TerminalReporter

    from zyx.backend import Device
    from zyx.tuning import TuningCache

AREAS = ("pool", "device", "dtype", "numerics", "errors", "threads")
"""The contract areas, in the order the summary lists them."""

HOW_TO_RUN = "the zyx conformance suite runs with: pytest --pyargs zyx.testing --zyx-backend NAME"

_DEVICE = pytest.StashKey["Device"]()
_OUTCOMES = ("passed", "skipped", "error", "failed")
"""pytest's outcome categories, from best to worst."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("zyx", "zyx backend conformance suite").addoption(
        "--zyx-backend",
        metavar="NAME",
        default=None,
        help="device to run the conformance suite (pytest --pyargs zyx.testing) against: "
        "host, opencl, opencl:1, cuda, ... An unusable backend is an error, not a skip.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"zyx_area(area): the contract area a zyx conformance test checks, one of {AREAS}",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    """Open the device named by ``--zyx-backend``; a failure is a usage error."""
    name = session.config.getoption("zyx_backend")
    if name is None:
        return
    from zyx.errors import ZyxError
    from zyx.plugins import registry

    try:
        session.config.stash[_DEVICE] = registry().device(name)
    except (ZyxError, ValueError) as error:
        raise pytest.UsageError(f"--zyx-backend {name}: {error}") from error


def device_under_test(config: pytest.Config) -> Device | None:
    """The device ``--zyx-backend`` opened, if any."""
    return config.stash.get(_DEVICE, None)


def pytest_report_header(config: pytest.Config) -> str | None:
    device = device_under_test(config)
    if device is None:
        return None
    from zyx.testing.certificate import INTERPRETED

    label = f"; it {INTERPRETED}" if device.interpreted else ""
    return f"zyx backend under test: {device.name} ({device.info.name}){label}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Record each suite test's area; skip the suite when no backend was named."""
    skip = None if _DEVICE in config.stash else pytest.mark.skip(reason=HOW_TO_RUN)
    for item in items:
        marker = item.get_closest_marker("zyx_area")
        if marker is None:
            continue
        item.user_properties.append(("zyx_area", marker.args[0]))
        if skip is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def zyx_device(pytestconfig: pytest.Config) -> Device:
    """The device under test (``--zyx-backend``); skips the test when none was named."""
    device = pytestconfig.stash.get(_DEVICE, None)
    if device is None:
        pytest.skip(HOW_TO_RUN)
    return device


@pytest.fixture
def zyx_tuning_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TuningCache:
    """The process's tuning cache (``zyx.tuning``) replaced by an empty one in a cache root
    of its own, for a test that counts searches or claim races: the disk would otherwise
    hold the winners of an earlier run."""
    from zyx import tuning

    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path / "cache"))
    fresh = tuning.TuningCache()
    monkeypatch.setattr(tuning, "cache", fresh)
    return fresh


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    """Outcomes per contract area, for the device under test."""
    device = terminalreporter.config.stash.get(_DEVICE, None)
    if device is None:
        return
    worst: dict[str, tuple[str, int]] = {}  # a test's area and its worst phase's outcome
    for rank, outcome in enumerate(_OUTCOMES):
        for report in terminalreporter.stats.get(outcome, []):
            area = dict(getattr(report, "user_properties", ())).get("zyx_area")
            if area is not None and rank >= worst.get(report.nodeid, ("", -1))[1]:
                worst[report.nodeid] = (str(area), rank)
    counts: dict[str, Counter[str]] = {}
    for area, rank in worst.values():
        counts.setdefault(area, Counter())[_OUTCOMES[rank]] += 1
    if not counts:
        return
    terminalreporter.write_sep("=", f"zyx conformance: {device.name} ({device.info.name})")
    for area in sorted(counts, key=lambda a: (AREAS.index(a) if a in AREAS else len(AREAS), a)):
        tally = ", ".join(f"{counts[area][o]} {o}" for o in _OUTCOMES if counts[area][o])
        terminalreporter.write_line(f"{area:<10}{tally}")
    from zyx.testing.certificate import Claims, refusals

    skipped = sum(area["skipped"] for area in counts.values())
    reasons = refusals(Claims.of(device), len(worst), skipped)
    verdict = f"NOT certified: {'; '.join(reasons)}" if reasons else "certified, as claimed"
    terminalreporter.write_line(verdict, red=bool(reasons), green=not reasons)
