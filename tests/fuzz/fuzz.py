"""Differential fuzzing: random kernels (``gen.py``) on devices vs the IR interpreter.

    python tests/fuzz/fuzz.py --devices host,opencl --seconds 60 [--start SEED] [--count N]

Each seed gives one kernel, run on every device and in the interpreter at the kernel's
own precision (f16 and bf16 rounded after every op, f32 in float32), the semantics every
backend must match (docs/writing-a-backend.md). Results computed by integer, bool and
correctly rounded float ops must agree bit for bit (NaN with NaN); those that went
through libm functions (exp, sin, pow, ...) within a few ulps; integers cast from those
are not compared. A device built for finite math (``DeviceInfo.finite_math``, as zyx-opencl
is) is only compared on the work-groups that compute no NaN or infinity, which the IR
leaves undefined there: the output elements of the others are not compared (those past
the last work-item, which must stay poison, always are).

Prints a one-line summary and, per finding, the seed, device, output and the command that
reproduces it (``--show`` prints the kernel). Exits 1 when there are findings.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gen import APPROX, PAST_END, Case, Gen
from seeds import Report

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.ir import Kernel, ParamKind
from zyx.ir.interpreter import interpret
from zyx.testing.harness import run
from zyx.testing.numerics import Array

APPROX_RTOL = {DType.F16: 4e-3, DType.BF16: 3e-2, DType.F32: 1e-4, DType.F64: 1e-9}
"""How far a libm-computed float may be from the interpreter's, relative, by the narrowest
float the kernel computes in: an f64 output may hold an f32 ``pow``'s result."""


INTERPRETER = "interpreter"
"""A finding's device where the seed failed before any device ran it."""


@dataclass
class Finding:
    """A device that disagrees with the interpreter, crashed, or a seed that failed."""

    seed: int
    device: str
    what: str

    def __str__(self) -> str:
        # The generator and the interpreter run for any device: the host's is always there.
        devices = "host" if self.device == INTERPRETER else self.device.split(":")[0]
        return (
            f"seed {self.seed} on {self.device}: {self.what}\n"
            f"  reproduce: python tests/fuzz/fuzz.py --devices {devices} "
            f"--start {self.seed} --count 1 --show"
        )


def native(kernel: Kernel, args: Sequence[Any]) -> list[Array]:
    """The interpreter at the kernel's own precision: the final content of every buffer."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with np.errstate(over="ignore"):  # constants such as 1e10 round to inf in f16: meant
        interpret(kernel, copies)
    return [a for a in copies if isinstance(a, np.ndarray)]


def differing(
    got: Array, want: Array, dtype: DType, taint: int, rtol: float, compared: Array
) -> Array | None:
    """Indices where ``got`` is not ``want`` (within ``rtol`` where libm computed it), of
    the elements ``compared`` marks; None where the output is not comparable."""
    if dtype.is_float:
        g, w = got.astype(np.float64), want.astype(np.float64)
        ok = (g == w) | (np.isnan(g) & np.isnan(w))
        if taint >= APPROX:
            with np.errstate(invalid="ignore"):  # inf - inf: not close, and ok already
                ok |= np.abs(g - w) <= rtol * np.abs(w)
    elif taint >= APPROX:
        return None
    elif dtype is DType.BOOL:  # as bytes: a stored bool is exactly 0 or 1
        ok = got.view(np.uint8) == want.view(np.uint8)
    else:
        ok = got == want
    return np.flatnonzero(~ok & compared)


def generate(seed: int) -> tuple[Case, list[Array], Array]:
    """The seed's kernel, the interpreter's results, and per output element whether its
    work-group computed a NaN or an infinity anywhere (from the ``watch`` variant of the
    same kernel)."""
    case = Gen(np.random.default_rng(seed), f"fz{seed}").build()
    watched = Gen(np.random.default_rng(seed), f"fz{seed}", watch=True).build()
    assert watched.watch is not None
    results = native(watched.kernel, watched.args)
    flag_buffer = buffer_positions(watched.kernel).index(watched.watch)
    flags = results.pop(flag_buffer).view(np.uint8) == 1
    items = flags.size - PAST_END
    groups = flags[:items].reshape(-1, case.group_size).any(axis=1)
    nonfinite = np.zeros(flags.size, dtype=bool)
    nonfinite[:items] = np.repeat(groups, case.group_size)
    return case, results, nonfinite


def buffer_positions(kernel: Kernel) -> list[int]:
    return [i for i, p in enumerate(kernel.params) if p.kind is not ParamKind.VARIABLE]


def check(seed: int, device: Device, case: Case, want: list[Array], compared: Array) -> str | None:
    """What is wrong with ``device``'s results for ``case`` at the output elements
    ``compared`` marks, or None."""
    try:
        got = run(device, case.kernel, case.args)
    except Exception as e:  # a failed compile or launch is a finding too
        return f"crashed: {e!r} {getattr(e, 'log', '')}"[:2000]
    params = case.kernel.params
    rtol = max((APPROX_RTOL[d] for d in case.kernel.used_dtypes if d.is_float), default=0.0)
    for k, pos in enumerate(buffer_positions(case.kernel)):
        if params[pos].kind is not ParamKind.GLOBAL_MUT:
            continue
        dtype, taint = params[pos].dtype, case.out_taint.get(pos, 0)
        bad = differing(got[k], want[k], dtype, taint, rtol, compared)
        if bad is not None and bad.size:
            i = int(bad[0])
            return (
                f"output param {pos} ({dtype.name}, taint {taint}): {bad.size} of "
                f"{got[k].size} differ, first [{i}]: got {shown(got[k], i)}, "
                f"want {shown(want[k], i)}"
            )
    return None


def shown(values: Array, i: int) -> str:
    """Element ``i``; a bool as its byte, which is what differs."""
    if values.dtype == np.bool_:
        return f"byte {values.view(np.uint8)[i]:#04x}"
    return repr(values[i].item())


def fuzz_seed(seed: int, devices: Sequence[Device], report: Report, show: bool = False) -> None:
    try:
        case, want, nonfinite = generate(seed)
    except Exception:  # the generator or the interpreter failed: a bug of either
        report.findings.append(Finding(seed, INTERPRETER, traceback.format_exc()[-1500:]))
        return
    if show:
        print(case.kernel)
    for device in devices:
        outcome = report.outcomes.setdefault(device.name, Counter())
        skipped = nonfinite if device.info.finite_math else np.zeros_like(nonfinite)
        if skipped[:-PAST_END].all():  # the poison past the end alone: not a check
            outcome["unchecked (NaN/inf on a finite-math build)"] += 1
            continue
        problem = check(seed, device, case, want, ~skipped)
        if problem is not None:
            outcome["failed"] += 1
        elif skipped.any():
            outcome["ok in the groups without NaN/inf"] += 1
        else:
            outcome["ok"] += 1
        if problem is not None:
            report.findings.append(Finding(seed, device.name, problem))


def fuzz(
    devices: Sequence[Device], start: int, count: int | None, seconds: float, show: bool = False
) -> Report:
    """Seeds ``start``, ``start + 1``, ... until ``count`` of them or ``seconds`` are done."""
    report = Report("fuzz", "kernels", start)
    return report.run(lambda seed: fuzz_seed(seed, devices, report, show), count, seconds)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--devices", default="host", help="comma-separated, e.g. host,opencl")
    ap.add_argument("--seconds", type=float, default=60.0, help="stop after this long")
    ap.add_argument("--start", type=int, help="first seed (default: a random one)")
    ap.add_argument("--count", type=int, help="stop after this many seeds")
    ap.add_argument("--show", action="store_true", help="print each kernel")
    opts = ap.parse_args(argv)
    start = secrets.randbelow(10**9) if opts.start is None else opts.start
    began = time.monotonic()
    # Thousands of one-off kernels: keep them out of zyx's and PoCL's caches (PoCL reads
    # its variable once, when zyx-opencl opens the platform).
    with tempfile.TemporaryDirectory(prefix="zyx-fuzz-") as cache:
        os.environ["ZYX_CACHE_DIR"] = os.environ["POCL_CACHE_DIR"] = cache
        devices = [zyx.device(name) for name in opts.devices.split(",")]
        report = fuzz(devices, start, opts.count, opts.seconds, opts.show)
    for finding in report.findings:
        print(finding)
    print(report.summary(time.monotonic() - began))
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
