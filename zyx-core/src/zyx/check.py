"""``zyx check [BACKEND]``: run the sample kernels on every device and check the numbers.

Each kernel of :mod:`zyx.testing.examples` runs once on random data with poisoned outputs and
is compared with the IR interpreter in float64 under the dtype's bound; then it is timed
(median of a few ``launch_timed``). The table goes to stdout: this is command-line code.

A kernel is skipped, with the reason, where the device lacks its dtypes or its limits are
smaller than the kernel's. A device that runs the IR interpreter in place of its own
kernels (the host without a C compiler) is the reference itself: it is labelled so and its
kernels are not counted as checked. The run fails when a kernel failed, or when no kernel
could be checked at all.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zyx import plugins
from zyx.backend import Buffer, Device
from zyx.dtypes import DTypeCapability
from zyx.errors import IRError, ZyxError
from zyx.ir.verify import check_limits
from zyx.testing.examples import Example, examples
from zyx.testing.harness import reference
from zyx.testing.numerics import assert_close, relative_error

SEED = 20261130
"""Fixed, so that a failure reproduces."""
TIMED_RUNS = 5


@dataclass(frozen=True)
class Result:
    """One kernel on one device."""

    device: str
    kernel: str
    status: str
    """``pass``, ``FAIL`` (wrong numbers or an error) or ``skip`` (a dtype unsupported, the
    device's limits too small, or the device runs the reference interpreter itself)."""
    note: str = ""
    time_ns: int | None = None
    nbytes: int = 0
    error: float | None = None
    """Largest relative norm error over the outputs."""

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


def run(backend: str | None = None, console: Console | None = None) -> int:
    """Check every device of ``backend`` (default: of every usable backend). Prints a table;
    returns 1 if any kernel failed or none could be checked, else 0."""
    console = console or Console(highlight=False)
    devices = _devices(backend)
    if not devices:
        console.print("[red]no device to check; `zyx doctor` says why[/red]")
        return 1
    rng = np.random.default_rng(SEED)
    cases = []
    for example in examples():
        args = example.arguments(rng)
        cases.append((example, args, reference(example.kernel, args)))
    results = [check(device, *case) for device in devices for case in cases]
    _report(console, devices, results)
    checked = any(r.status == "pass" for r in results)
    return 1 if not checked or any(r.failed for r in results) else 0


def _devices(backend: str | None) -> list[Device]:
    if backend is None:
        return plugins.devices()
    plugins.device(backend)  # raises PluginError, with the reason, if it is unusable
    return [d for d in plugins.devices() if d.backend == backend]


def check(device: Device, example: Example, args: list[Any], expected: list[Any]) -> Result:
    """Run ``example`` on ``device`` with ``args``; compare with the reference ``expected``
    (the final content of every buffer param, in order)."""
    skipped = _why_not(device, example)
    if skipped:
        return Result(device.name, example.name, "skip", skipped)
    try:
        return _measure(device, example, args, expected)
    except ZyxError as error:
        return Result(device.name, example.name, "FAIL", f"{type(error).__name__}: {error}")


INTERPRETED = "runs the IR interpreter, the reference itself: nothing to compare"
"""Why a device that interprets the IR (``Device.interpreted``) checks nothing."""


def _why_not(device: Device, example: Example) -> str:
    """Why ``example`` cannot be checked on ``device``, or ``""``."""
    if device.interpreted:
        return INTERPRETED
    missing = sorted(
        str(d) for d in example.dtypes if not device.info.supports(d, DTypeCapability.ARITHMETIC)
    )
    if missing:
        return f"no {', '.join(missing)} arithmetic"
    try:
        check_limits(example.kernel, device.info)
    except IRError as error:
        return f"over the device's limits: {error}"
    return ""


def _measure(device: Device, example: Example, args: list[Any], expected: list[Any]) -> Result:
    pool = device.pool
    program = device.compile(example.kernel)
    buffers: dict[int, Buffer] = {}
    try:
        for i, arg in enumerate(args):
            if isinstance(arg, np.ndarray):
                buffers[i] = pool.allocate(arg.nbytes)
                pool.write(buffers[i], arg)
        bound = [buffers.get(i, arg) for i, arg in enumerate(args)]
        device.launch(program, bound)
        failure, error = _compare(example, args, expected, buffers, device)
        # Timed runs come after the check: kernels that update in place (saxpy) change
        # their inputs.
        times = [device.launch_timed(program, bound) for _ in range(TIMED_RUNS)]
    finally:
        for buf in buffers.values():
            pool.release(buf)
        device.release(program)
    status = "FAIL" if failure else "pass"
    time_ns = int(statistics.median(times))
    return Result(device.name, example.name, status, failure, time_ns, example.nbytes, error)


def _compare(
    example: Example,
    args: list[Any],
    expected: list[Any],
    buffers: dict[int, Buffer],
    device: Device,
) -> tuple[str, float]:
    """The first mismatch (or ``""``) and the largest relative error over the outputs."""
    positions = sorted(buffers)
    failure, worst = "", 0.0
    for i in example.outputs:
        out = np.empty_like(args[i])
        device.pool.read(buffers[i], out)
        ref = expected[positions.index(i)]
        error = relative_error(out, ref)
        worst = error if np.isnan(error) or error > worst else worst  # NaN sticks
        try:
            assert_close(out, ref, example.kernel.params[i].dtype)
        except AssertionError as mismatch:
            failure = failure or f"param {i}: {mismatch}"
    return failure, worst


def _report(console: Console, devices: list[Device], results: list[Result]) -> None:
    for device in devices:
        label = " [yellow](IR interpreter: not checked)[/yellow]" if device.interpreted else ""
        console.print(f"[bold]{escape(device.name)}[/bold]{label}: {escape(device.info.name)}")
    table = Table("device", "kernel", "time", "GB/s", "rel. error", "result")
    for r in results:
        style = {"pass": "green", "FAIL": "red", "skip": "yellow"}[r.status]
        table.add_row(
            escape(r.device),
            r.kernel,
            _time(r.time_ns),
            f"{r.nbytes / r.time_ns:.1f}" if r.time_ns else "",
            f"{r.error:.2e}" if r.error is not None else "",
            f"[{style}]{r.status}[/{style}]",
        )
    console.print(table)
    # One line per device and reason: an interpreted device skips every kernel alike.
    notes: dict[tuple[str, str, bool], list[str]] = {}
    for r in results:
        if r.note:
            notes.setdefault((r.device, r.note, r.failed), []).append(r.kernel)
    for (name, note, failed), kernels in notes.items():
        console.print(f"[{'red' if failed else 'yellow'}]{escape(name)} {', '.join(kernels)}: "
                      f"{escape(note)}[/]")  # fmt: skip
    console.print(_summary(results))


def _summary(results: list[Result]) -> str:
    """One line: how many failed, passed and were skipped; red unless some passed and none
    failed."""
    counts = {status: sum(r.status == status for r in results) for status in ("FAIL", "pass")}
    skipped = len(results) - counts["FAIL"] - counts["pass"]
    if counts["FAIL"]:
        return f"[red]{counts['FAIL']} of {len(results)} failed[/]"
    if not counts["pass"]:
        return f"[red]nothing checked: all {len(results)} skipped[/]"
    if skipped:
        return f"[green]{counts['pass']} passed[/], [yellow]{skipped} skipped[/]"
    return f"[green]all {len(results)} passed[/]"


def _time(ns: int | None) -> str:
    if ns is None:
        return ""
    if ns < 1_000_000:
        return f"{ns / 1000:.1f} µs"
    return f"{ns / 1e6:.2f} ms"
