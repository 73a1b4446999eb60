"""``zyx check [BACKEND]``: run the sample kernels on every device and check the numbers,
then run real array workloads through the front end.

Each kernel of :mod:`zyx.testing.examples` runs once on random data with poisoned outputs and
is compared with the IR interpreter in float64 under the dtype's bound; then it is timed
(median of a few ``launch_timed``). The tables go to stdout: this is command-line code.

Then each workload of :func:`workloads` (a two-layer MLP forward pass; sums and means over
each axis of a matrix of three million elements) runs through the array namespace on the
device, scheduler, lowering, plan and compile caches included, and is compared with numpy
in float64 under the dtype's bound (:data:`zyx.testing.numerics.BOUNDS`). Its timings are
``time.perf_counter`` around ``zyx.realize`` of the outputs and reading them into numpy:
*first* is the first run of the computation in this process (scheduling, lowering, and
compiling its kernels or loading them from the on-disk compile cache), *warm* the median of
``TIMED_RUNS`` more runs of the same computation recorded afresh (a plan cache hit). Neither
includes copying the inputs to the device. A workload is skipped, with the reason, where the
device lacks a dtype capability it needs (float64, say).

A kernel is skipped, with the reason, where the device lacks its dtypes or its limits are
smaller than the kernel's. A device that runs the IR interpreter in place of its own
kernels (the host without a C compiler) is the reference itself: it is labelled so and its
kernels are not counted as checked. The run fails when a kernel failed, or when no kernel
could be checked at all.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import sqrt
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from zyx import array as xp
from zyx import plugins
from zyx.backend import Buffer, Device
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import IRError, ZyxError
from zyx.ir.verify import check_limits
from zyx.runtime import realize, stats
from zyx.testing.examples import Example, examples
from zyx.testing.harness import reference
from zyx.testing.numerics import assert_close, random, relative_error

if TYPE_CHECKING:
    from zyx.tensor import Tensor

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
    first_ns: int | None = None
    """A workload's first run (with scheduling and compiling); ``time_ns`` is its warm run."""
    launches: int | None = None
    """Kernels a warm run of a workload launches."""
    workload: bool = False
    """A front-end workload (``kernel`` is its name), not a sample kernel."""

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
    loads = workloads(rng)
    results += [run_workload(device, load) for device in devices for load in loads]
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


# ---- front-end workloads ----------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """A computation written with the array namespace, its inputs and numpy's results."""

    name: str
    dtype: DType
    """Of its inputs and outputs: each output is compared under this dtype's bound."""
    needs: tuple[tuple[DType, DTypeCapability], ...]
    """What a device must support to run it."""
    inputs: tuple[np.ndarray[Any, Any], ...]
    expected: tuple[np.ndarray[Any, Any], ...]
    """numpy's results in float64, from the inputs as float64."""
    compute: Callable[..., Sequence[Tensor]]
    """The outputs (lazy) from the inputs as device arrays."""


MLP = (256, 512, 256, 10)
"""Batch, inputs, hidden units and outputs of the MLP workload."""
MATRIX = (2048, 1536)
"""The reduced matrix: 3,145,728 elements, rows and columns of different lengths so that a
reduction over the wrong axis cannot pass."""


def workloads(rng: np.random.Generator) -> list[Workload]:
    """What ``zyx check`` runs through the front end on every device."""
    reduce = [reduce_workload(rng, dtype) for dtype in (DType.F32, DType.F64)]
    return [mlp_workload(rng, DType.F32), *reduce]


def mlp_forward(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> list[Tensor]:
    """``softmax(relu(x @ w1 + b1) @ w2 + b2)``, the softmax over each row. (The namespace's
    functions, not operators: Tensor's operators are set at import, out of mypy's sight.)"""
    hidden = xp.maximum(xp.add(xp.matmul(x, w1), b1), 0.0)
    logits = xp.add(xp.matmul(hidden, w2), b2)
    e = xp.exp(xp.subtract(logits, xp.max(logits, axis=1, keepdims=True)))
    return [xp.divide(e, xp.sum(e, axis=1, keepdims=True))]


def mlp_workload(rng: np.random.Generator, dtype: DType) -> Workload:
    """A two-layer MLP forward pass on random inputs and weights (scaled by 1/sqrt(fan-in),
    so the logits stay of order 1)."""
    batch, n_in, n_hidden, n_out = MLP
    x = random(rng, dtype, batch * n_in, -1.0, 1.0).reshape(batch, n_in)
    w1 = random(rng, dtype, n_in * n_hidden, -1 / sqrt(n_in), 1 / sqrt(n_in))
    b1 = random(rng, dtype, n_hidden, -0.5, 0.5)
    w2 = random(rng, dtype, n_hidden * n_out, -1 / sqrt(n_hidden), 1 / sqrt(n_hidden))
    b2 = random(rng, dtype, n_out, -0.5, 0.5)
    inputs = (x, w1.reshape(n_in, n_hidden), b1, w2.reshape(n_hidden, n_out), b2)
    a, m1, c1, m2, c2 = (v.astype(np.float64) for v in inputs)
    logits = np.maximum(a @ m1 + c1, 0.0) @ m2 + c2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected = (e / e.sum(axis=1, keepdims=True),)
    needs = ((dtype, DTypeCapability.MATH),)  # exp
    return Workload(f"mlp {dtype}", dtype, needs, inputs, expected, mlp_forward)


def reductions(m: Tensor) -> list[Tensor]:
    """Sum and mean over each axis."""
    return [xp.sum(m, axis=0), xp.sum(m, axis=1), xp.mean(m, axis=0), xp.mean(m, axis=1)]


def reduce_workload(rng: np.random.Generator, dtype: DType) -> Workload:
    """Sums and means over each axis of a ``MATRIX`` of random values in [-4, 4]."""
    rows, cols = MATRIX
    m = random(rng, dtype, rows * cols).reshape(rows, cols)
    m64 = m.astype(np.float64)
    expected = (m64.sum(axis=0), m64.sum(axis=1), m64.mean(axis=0), m64.mean(axis=1))
    needs = ((dtype, DTypeCapability.ARITHMETIC),)
    return Workload(f"reduce {dtype}", dtype, needs, (m,), expected, reductions)


def run_workload(device: Device, load: Workload) -> Result:
    """Run ``load`` on ``device`` through the front end, compare and time it."""
    skipped = _workload_why_not(device, load)
    if skipped:
        return Result(device.name, load.name, "skip", skipped, workload=True)
    try:
        return _run_workload(device, load)
    except ZyxError as error:
        note = f"{type(error).__name__}: {error}"
        return Result(device.name, load.name, "FAIL", note, workload=True)


WORKLOAD_INTERPRETED = "runs the IR interpreter: no device code to check, and slow at this size"
"""Why a device that interprets the IR runs no workload."""


def _workload_why_not(device: Device, load: Workload) -> str:
    if device.interpreted:
        return WORKLOAD_INTERPRETED
    missing = [f"{d} {_capability(c)}" for d, c in load.needs if not device.info.supports(d, c)]
    return f"no {', '.join(missing)}" if missing else ""


def _capability(capability: DTypeCapability) -> str:
    return "math functions" if capability & DTypeCapability.MATH else "arithmetic"


def _run_workload(device: Device, load: Workload) -> Result:
    arrays = [xp.asarray(v, device=device) for v in load.inputs]
    realize(*arrays)  # the inputs are on the device before the clock starts

    def timed() -> tuple[int, list[np.ndarray[Any, Any]], int]:
        before = stats()
        outputs = load.compute(*arrays)  # a new lazy graph each time: the plan is cached
        start = time.perf_counter()
        realize(*outputs)
        values = [out.numpy() for out in outputs]
        elapsed = time.perf_counter() - start
        return int(elapsed * 1e9), values, (stats() - before).launches

    first, values, _ = timed()
    failure, worst = "", 0.0
    for i, (out, ref) in enumerate(zip(values, load.expected)):
        error = relative_error(out, ref)
        worst = error if np.isnan(error) or error > worst else worst  # NaN sticks
        what = f"output {i} of shape {out.shape} (flat)"  # assert_close takes flat arrays
        try:
            assert_close(out.reshape(-1), ref.reshape(-1), load.dtype, what)
        except AssertionError as mismatch:
            failure = failure or str(mismatch)
    runs = [timed() for _ in range(TIMED_RUNS)]
    warm = int(statistics.median(ns for ns, _, _ in runs))
    status = "FAIL" if failure else "pass"
    return Result(
        device.name, load.name, status, failure, warm, error=worst, first_ns=first,
        launches=runs[-1][2], workload=True,
    )  # fmt: skip


def _report(console: Console, devices: list[Device], results: list[Result]) -> None:
    for device in devices:
        label = " [yellow](IR interpreter: not checked)[/yellow]" if device.interpreted else ""
        console.print(f"[bold]{escape(device.name)}[/bold]{label}: {escape(device.info.name)}")
    table = Table("device", "kernel", "time", "GB/s", "rel. error", "result", title="kernels")
    loads = Table(
        "device", "workload", "first", "warm", "kernels", "rel. error", "result",
        title="front-end workloads",
    )  # fmt: skip
    for r in results:
        style = {"pass": "green", "FAIL": "red", "skip": "yellow"}[r.status]
        error = f"{r.error:.2e}" if r.error is not None else ""
        result = f"[{style}]{r.status}[/{style}]"
        if r.workload:
            launches = str(r.launches) if r.launches is not None else ""
            row = (_time(r.first_ns), _time(r.time_ns), launches, error, result)
            loads.add_row(escape(r.device), r.kernel, *row)
            continue
        speed = f"{r.nbytes / r.time_ns:.1f}" if r.time_ns else ""
        table.add_row(escape(r.device), r.kernel, _time(r.time_ns), speed, error, result)
    console.print(table)
    if loads.rows:
        console.print(loads)
        batch, n_in, n_hidden, n_out = MLP
        rows, cols = MATRIX
        console.print(
            f"mlp: softmax(relu(x @ W1 + b1) @ W2 + b2), x {batch}x{n_in}, {n_hidden} hidden, "
            f"{n_out} out; reduce: sum and mean over each axis of a {rows}x{cols} matrix. "
            "Times: zyx.realize + reading the results into numpy (not the inputs' upload); "
            "first: the first run in this process, with scheduling, lowering and compiling "
            f"(or loading from the compile cache); warm: the median of {TIMED_RUNS} more, the "
            "plan cached. kernels: launches per run.",
            style="dim",
        )
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
    if ns < 10_000_000_000:
        return f"{ns / 1e6:.2f} ms" if ns < 1_000_000_000 else f"{ns / 1e9:.2f} s"
    return f"{ns / 1e9:.1f} s"
