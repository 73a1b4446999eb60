"""Differential fuzzing of the array front end: random array programs (``array_gen.py``) on
devices against numpy in float64.

    python tests/fuzz/arrays.py --devices host,host-checked,gpu-shaped,opencl --seconds 60 \\
        [--start SEED] [--count N] [--show]

Each seed gives one program; it runs with ``xp = zyx`` on every device (its outputs
realized together) and with ``xp = array_api_strict`` on the inputs, floats in float64
(integers and bools in their own dtypes). Outputs must have the dtype and shape the
standard says; floats must be within their dtype's bound (``zyx.testing.numerics.BOUNDS``,
or the rounding error the generator bounds for a long chain, where larger), integers and
bools equal. ``host-checked`` is the host with its kernels run by the IR interpreter,
which checks every load and store against its buffer: a kernel the scheduler made that
reads or writes outside memory fails there (the compiled host would read a neighbour's
bytes). ``gpu-shaped`` is that host dressed as a GPU (``zyx.testing.devices``): its
kernels are laid out as for a GPU (groups, local memory, rows), the cheapest check of the
GPU layouts on a machine without one.

A finding prints the seed, the device, what differs, the statements the first wrong
value depends on (each prefix of the program is rerun to find it) and the command that
reproduces it. A program the reference refuses is a finding too, of the generator
(device ``reference``). Exits 1 when there are findings.

Programs are text run with ``exec``: the text is what a finding prints, so what runs is
what a reader reruns.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from array_gen import ArrayGen, GeneratorError, Program, reference_input, strict_namespace
from seeds import Report

import zyx
from zyx.backend import Device
from zyx.dtypes import DType, DTypeCapability
from zyx.testing.devices import GpuShapedHost, checked_host
from zyx.testing.numerics import BOUNDS, assert_close

CHECKED = "host-checked"
"""The host device with kernels in the IR interpreter, which checks bounds."""

GPU_SHAPED = "gpu-shaped"
"""The checked host dressed as a GPU: the kernels checked are those laid out for a GPU."""

SPECIAL = {CHECKED: checked_host, GPU_SHAPED: GpuShapedHost}

REFERENCE = "reference"
"""A finding's device where the reference refused the program: a bug of the generator."""


@dataclass
class Finding:
    seed: int
    device: str
    what: str
    program: str
    devices: str

    def __str__(self) -> str:
        return (
            f"seed {self.seed} on {self.device}: {self.what}\n{_indent(self.program)}\n"
            f"  reproduce: python tests/fuzz/arrays.py --devices {self.devices} "
            f"--start {self.seed} --count 1 --show"
        )


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


# ---- devices -------------------------------------------------------------------------------


def open_devices(names: Sequence[str]) -> list[Device]:
    return [SPECIAL[n]() if n in SPECIAL else zyx.device(n) for n in names]


def label(device: Device) -> str:
    if device.backend == GPU_SHAPED:
        return GPU_SHAPED
    return CHECKED if getattr(device, "interpreted", False) else device.name


def common_dtypes(devices: Sequence[Device]) -> list[DType]:
    """The dtypes every device claims arithmetic and math for: the same seed gives the
    same program on all of them."""
    need = DTypeCapability.STORAGE | DTypeCapability.ARITHMETIC | DTypeCapability.MATH
    ints = DTypeCapability.STORAGE | DTypeCapability.ARITHMETIC
    return [
        d
        for d in DType
        if d is not DType.BOOL
        and all(x.info.supports(d, need if d.is_float else ints) for x in devices)
    ]


# ---- running a program ---------------------------------------------------------------------


@contextmanager
def _strict() -> Iterator[Any]:
    """array_api_strict at the standard's 2024.12, numpy's warnings silenced."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield strict_namespace()


def reference(program: Program, upto: list[str] | None = None) -> dict[str, np.ndarray[Any, Any]]:
    """The outputs (or the values ``upto``) computed by array_api_strict: floats in
    float64."""
    with _strict() as xp:
        env: dict[str, Any] = {"xp": xp, "F": xp.float64}
        for name, data in program.inputs.items():
            env[name] = reference_input(data, xp)
        exec(program.text(upto), env)
        return {n: np.from_dlpack(env[n]) for n in upto or program.outputs}


def on_device(
    program: Program, device: Device, upto: list[str] | None = None
) -> dict[str, np.ndarray[Any, Any]]:
    """The outputs (or the value ``upto``) computed by zyx on ``device``, realized together."""
    env: dict[str, Any] = {"xp": zyx, "F": program.dtype}
    for name, data in program.inputs.items():
        env[name] = zyx.asarray(data, device=device)
    exec(program.text(upto), env)
    names = upto or program.outputs
    zyx.realize(*(env[n] for n in names))
    return {n: env[n].numpy() for n in names}


def mismatch(program: Program, got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """What is wrong with ``got`` against the reference ``want``, or None."""
    for name, ref in want.items():
        value, out = program.values[name], got[name]
        if out.dtype != value.dtype.numpy or out.shape != ref.shape:
            return f"{name} is {out.dtype} {out.shape}, expected {value.dtype.numpy} {ref.shape}"
        # A long float16 or bfloat16 chain may round more than the dtype's bound allows:
        # the generator bounds its error (twice: its model of each op is rough).
        bounds = dict(BOUNDS)
        if value.dtype.is_float:
            bounds[value.dtype] = max(BOUNDS[value.dtype], 2 * value.error)
        try:
            with np.errstate(all="ignore"):
                want_ = ref if value.dtype.is_float else ref.astype(out.dtype)
                assert_close(out, want_, value.dtype, what=name, bounds=bounds)
        except AssertionError as error:
            return str(error)
    return None


def check(
    program: Program, device: Device, want: dict[str, Any], upto: list[str] | None = None
) -> str | None:
    try:
        got = on_device(program, device, upto)
    except Exception as error:  # a raise the reference did not: a finding too
        return f"raised {type(error).__name__}: {error}"[:1500]
    return mismatch(program, got, want)


def smallest(program: Program, device: Device) -> tuple[str, str]:
    """The first statement whose value is wrong alone, and what is wrong with it (rerunning
    each prefix); the whole program if only its outputs together go wrong."""
    for name, _ in program.lines:
        problem = check(program, device, reference(program, [name]), [name])
        if problem is not None:
            return program.describe([name]), problem
    return program.describe(), "only when the outputs are realized together"


def fuzz_seed(seed: int, devices: Sequence[Device], report: Report, names: str, show: bool) -> None:
    gen = ArrayGen(np.random.default_rng(seed), common_dtypes(devices))
    try:
        program = gen.build()
    except GeneratorError as error:  # the statement the reference refused, and what it said
        report.findings.append(
            Finding(seed, REFERENCE, str(error), gen.p.describe(list(gen.p.values)), names)
        )
        return
    if show:
        print(f"# seed {seed}\n{program.describe()}")
    try:
        want = reference(program)
    except Exception:
        report.findings.append(
            Finding(seed, REFERENCE, traceback.format_exc()[-1500:], program.describe(), names)
        )
        return
    for device in devices:
        outcome = report.outcomes.setdefault(label(device), Counter())
        problem = check(program, device, want)
        if problem is None:
            outcome["ok"] += 1
            continue
        outcome["failed"] += 1
        repro, first = smallest(program, device)
        what = (
            problem if first.startswith("only when") else f"{problem}\n  first wrong alone: {first}"
        )
        report.findings.append(Finding(seed, label(device), what, repro, names))


def fuzz(
    devices: Sequence[Device], start: int, count: int | None, seconds: float, show: bool = False
) -> Report:
    """Seeds ``start``, ``start + 1``, ... until ``count`` of them or ``seconds`` are done."""
    report = Report("array fuzz", "programs", start)
    names = ",".join(label(d) for d in devices)
    return report.run(lambda seed: fuzz_seed(seed, devices, report, names, show), count, seconds)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--devices", default="host", help=f"comma-separated, e.g. host,{CHECKED},opencl"
    )
    ap.add_argument("--seconds", type=float, default=60.0, help="stop after this long")
    ap.add_argument("--start", type=int, help="first seed (default: a random one)")
    ap.add_argument("--count", type=int, help="stop after this many seeds")
    ap.add_argument("--show", action="store_true", help="print each program")
    opts = ap.parse_args(argv)
    start = secrets.randbelow(10**9) if opts.start is None else opts.start
    began = time.monotonic()
    # Many one-off kernels: keep them out of zyx's and PoCL's caches (PoCL reads its
    # variable once, when zyx-opencl opens the platform).
    with tempfile.TemporaryDirectory(prefix="zyx-fuzz-") as cache:
        os.environ["ZYX_CACHE_DIR"] = os.environ["POCL_CACHE_DIR"] = cache
        devices = open_devices(opts.devices.split(","))
        report = fuzz(devices, start, opts.count, opts.seconds, opts.show)
    for finding in report.findings:
        print(finding)
    print(report.summary(time.monotonic() - began))
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
