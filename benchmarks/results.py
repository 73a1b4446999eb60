"""The results every benchmark writes, in one small schema, and the helpers that write them
(imported from the scripts' own folder).

A results file is ``<benchmark>_<machine>.json`` under ``benchmarks/results/``::

    {"benchmark": "cuda_bench", "machine": "nvidia-h200",
     "environment": {"date": ..., "hardware": ..., "driver": ..., "versions": ...,
                     "commit": ..., "math mode": ..., "command": ..., "note": ...},
     "rows": [{"workload": ..., "implementation": ..., "value": 4.37, "unit": "TB/s",
               "note": ..., "headline": true, "device": "host"}]}

``note`` is optional in both, and so are a row's ``headline`` and ``device``. A row whose
implementation starts with "zyx" is zyx's; every other row is a peer measured in the same
run. ``headline`` marks the zyx row of the path users take where a workload also times
lower layers (``zyx.realize(x @ y)`` beside ``Device.launch`` of its kernel): the report
shows it rather than zyx's fastest row. ``device`` names where a peer ran when that is not
the run's device (numpy on the host beside a GPU run): the report compares zyx with such a
peer only where none ran on the run's device. Units say which way is faster (``HIGHER``,
``LOWER``); ``x`` is a ratio of zyx's time over a reference call's, measured as such.
``benchmarks/report.py`` renders the files into BENCHMARKS.md; ``load`` also reads the
older formats some scripts still write.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ENVIRONMENT = ("date", "hardware", "driver", "versions", "commit", "math mode", "command")
"""The environment's fields, in the order the report lists them (``note`` may follow)."""
HIGHER = {"TB/s", "GB/s", "TFLOP/s", "GFLOP/s", "kernels/s"}
LOWER = {"µs", "us", "ms", "s", "ns"}
NOT_RECORDED = "not recorded"

Row = dict[str, Any]
Results = dict[str, Any]


def row(
    workload: str, implementation: str, value: float, unit: str, note: str = "", *,
    headline: bool = False, device: str = "",
) -> Row:  # fmt: skip
    """One measured value (``headline`` and ``device`` as the module says)."""
    out: Row = {"workload": workload, "implementation": implementation,
                "value": float(value), "unit": unit}  # fmt: skip
    if note:
        out["note"] = note
    if headline:
        out["headline"] = True
    if device:
        out["device"] = device
    return out


def on_host(device: Any) -> str:
    """The ``device`` of a peer's row that ran on the host (numpy, torch on the CPU) beside
    zyx's ``device``: none where that is the host itself, else "host"."""
    return "" if device.backend == "host" else "host"


def is_zyx(implementation: str) -> bool:
    return implementation.startswith("zyx")


def higher_is_better(unit: str) -> bool | None:
    """Whether a larger value of ``unit`` is faster; ``None`` where the unit does not say
    (a ratio)."""
    return True if unit in HIGHER else False if unit in LOWER else None


def number(value: float) -> str:
    """A value as the tables show it: 4 significant digits, whole numbers from 10,000."""
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def table(rows: list[Row]) -> str:
    """The rows as a plain markdown table (what the scripts print)."""
    lines = ["| workload | implementation | value | unit |", "|---|---|---:|---|"]
    lines += [
        f"| {r['workload']} | {r['implementation']} | {number(r['value'])} | {r['unit']} |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def cpu() -> str:
    """This machine's CPU model and its number of cores."""
    model = platform.processor() or platform.machine()
    info = Path("/proc/cpuinfo")
    if info.exists():
        found = re.search(r"^model name\s*:\s*(.+)$", info.read_text(), re.M)
        model = found[1] if found else model
    return f"{model}, {os.cpu_count()} cores"


def gpus() -> list[str]:
    """The NVIDIA GPUs ``nvidia-smi`` lists, as "name, driver" each (none without it)."""
    if shutil.which("nvidia-smi") is None:
        return []
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    done = subprocess.run(query, capture_output=True, text=True)
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", re.sub(r"\([^)]*\)", "", text.lower())).strip("-")


def describe(device: Any) -> tuple[str, str]:
    """A zyx device's hardware line (with this machine's CPU) and its driver line."""
    if device.backend == "host":
        chain = getattr(device, "toolchain", None)
        compiler = f"the C compiler {chain.describe()}" if chain else "the IR interpreter"
        return cpu(), f"none: {compiler}"
    hardware = f"{device.info.name} ({device.name}); {cpu()}"
    cl = getattr(device, "cl_device", None)
    if cl is not None:
        return hardware, f"{cl.platform.name}, {cl.platform.version}, driver {cl.driver_version}"
    found = gpus()
    return hardware, f"NVIDIA {found[0].split(',')[1].strip()}" if found else NOT_RECORDED


def machine() -> str:
    """A short name of this machine for file names: its GPU model where it has one (one
    name however many), else its CPU's vendor and family and its number of cores."""
    found = gpus()
    if found:
        return slug(found[0].split(",")[0])
    family = " ".join(cpu().split(",")[0].split()[:2])
    return slug(f"{family} {os.cpu_count()} cores")


def commit() -> str:
    """The checkout's commit (with "+ changes" where the tree differs from it), else
    ``$ZYX_COMMIT`` (a device run's copy of the tree has no git history)."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return os.environ.get("ZYX_COMMIT", NOT_RECORDED)
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    return head.stdout.strip() + (" + changes" if dirty else "")


def command() -> str:
    """How this run was started: the script and its arguments, after the environment's
    settings that change what runs (``ZYX_NATIVE``, ``ZYX_PLUGINS`` and configuration
    fields such as ``ZYX_CUDA__CUDNN``), inside ``$ZYX_BENCH_VIA`` (the device script that
    ran it) where set."""
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    settings = [f"{k}={v}" for k, v in sorted(os.environ.items()) if _changes_the_run(k)]
    line = " ".join([*settings, "python", str(shown), *sys.argv[1:]])
    via = os.environ.get("ZYX_BENCH_VIA")
    return f"`{via}` (runs `{line}`)" if via else line


def _changes_the_run(name: str) -> bool:
    return name in ("ZYX_NATIVE", "ZYX_PLUGINS") or (name.startswith("ZYX_") and "__" in name)


def environment(
    hardware: str, driver: str, versions: Mapping[str, str], math_mode: str, note: str = ""
) -> dict[str, str]:
    """The environment of a run started now on this machine."""
    python = {"Python": platform.python_version(), **versions}
    env = {
        "date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "hardware": hardware,
        "driver": driver,
        "versions": ", ".join(f"{name} {version}" for name, version in python.items()),
        "commit": commit(),
        "math mode": math_mode,
        "command": command(),
    }
    if note:
        env["note"] = note
    return env


def version(module: str) -> str:
    """An installed distribution's or module's version, or "not installed"."""
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return "not installed"


def name(benchmark: str, machine: str) -> str:
    return f"{benchmark}_{machine}.json"


def write(
    benchmark: str, machine: str, rows: list[Row], env: Mapping[str, str], out: str | Path = ""
) -> Path:
    """Write one run's results file into ``out`` (default ``$OUT``, else the current folder)."""
    folder = Path(out or os.environ.get("OUT", "."))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name(benchmark, machine)
    data = {"benchmark": benchmark, "machine": machine, "environment": dict(env), "rows": rows}
    path.write_text(dumps(data))
    return path


def dumps(data: Results) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


# ---- older formats ----------------------------------------------------------------------


KNOWN = ("cuda_bench", "opencl_bench", "frontend_bench", "host_vs_numpy", "launch_overhead",
         "cudnn_bench", "jit_bench", "kernel_search", "matmul_bench", "reduce_bench")  # fmt: skip


def load(path: Path) -> Results:
    """A results file; the older formats (a list of rows, or ``{"environment", "results"}``,
    or matmul_bench's rows of seconds and flops) converted, their benchmark taken from the
    file's name, their ``machine`` left empty and the rest of the name as ``variant``."""
    data = json.loads(path.read_text())
    if isinstance(data, dict) and "rows" in data and "benchmark" in data:
        return data
    env: dict[str, str] = {}
    rows = data
    if isinstance(data, dict):
        env = {key: str(value) for key, value in data.get("environment", {}).items()}
        rows = data.get("results", data.get("rows", []))
    benchmark, variant = _benchmark_of(path.stem, rows)
    return {"benchmark": benchmark, "machine": "", "variant": variant,
            "environment": _environment(env), "rows": _rows(rows)}  # fmt: skip


def _benchmark_of(stem: str, rows: list[Row]) -> tuple[str, str]:
    """The benchmark a file's name starts with, and the rest of the name (the device kind of
    matmul_bench's runs, which its rows name)."""
    if rows and "flops" in rows[0]:
        device = next((r["runner"] for r in rows if is_zyx(r["runner"])), "zyx")
        found = re.search(r"\((\w+)", device)
        return "matmul_bench", found[1] if found else ""
    for known in sorted(KNOWN, key=len, reverse=True):
        if stem.startswith(known):
            return known, stem[len(known) :].strip("_")
    return stem, ""


def _rows(rows: list[Row]) -> list[Row]:
    if rows and "flops" in rows[0]:  # matmul_bench: seconds of `flops` operations
        tera = max(r["flops"] / r["seconds"] for r in rows) >= 1e12
        scale, unit = (1e12, "TFLOP/s") if tera else (1e9, "GFLOP/s")
        return [row(r["case"], r["runner"], r["flops"] / r["seconds"] / scale, unit,
                    "" if r.get("error") is None else f"relative error {r['error']:.1e}")
                for r in rows]  # fmt: skip
    return [_row(r) for r in rows]


def _row(r: Row) -> Row:
    workload = r.get("workload") or r.get("benchmark") or r.get("case")
    if "benchmark" in r and "case" in r:
        workload = f"{r['benchmark']}: {r['case']}"
    return row(str(workload), r["implementation"], r["value"], r["unit"], r.get("note", ""))


def _environment(env: Mapping[str, str]) -> dict[str, str]:
    """An older environment's fields under the schema's names (the rest kept as a note)."""
    hardware = [env[k] for k in ("device", "gpu, driver", "host", "cpu") if k in env]
    versions = [f"{k} {env[k]}" for k in ("python", "numpy", "zyx", "torch", "cupy") if k in env]
    used = {*ENVIRONMENT, "note", "device", "gpu, driver", "host", "cpu", "python", "numpy",
            "zyx", "torch", "cupy", "math"}  # fmt: skip
    rest = "; ".join([env.get("note", ""), *(f"{k}: {v}" for k, v in env.items() if k not in used)])
    rest = rest.strip("; ")
    derived = {
        "hardware": "; ".join(hardware),
        "versions": ", ".join(versions),
        "math mode": env.get("math", ""),
    }
    out = {key: env.get(key) or derived.get(key) or NOT_RECORDED for key in ENVIRONMENT}
    if rest:
        out["note"] = rest
    return out
