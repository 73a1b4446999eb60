"""BENCHMARKS.md and the charts under ``benchmarks/results/``, rendered from the results
files there (``benchmarks/results.py`` describes them).

    python benchmarks/report.py                      # render what benchmarks/results/ holds
    python benchmarks/report.py --add OUT/*.json     # take in a run's files, then render

``--add`` copies each file into ``benchmarks/results/`` under its benchmark's and machine's
name (replacing that machine's earlier run of the benchmark: git keeps the history),
converting the older formats some scripts write; ``--machine`` names the machine where a
file does not (matmul_bench's rows; ``here``: this one), ``--commit`` fills in a commit the
file lacks (a device run's copy of the tree has no git history). The same files give the
same output, byte for byte. Charts need matplotlib; ``--no-charts`` renders the document
alone.
"""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import sys
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import (  # noqa: E402
    ENVIRONMENT,
    NOT_RECORDED,
    RESULTS,
    ROOT,
    Results,
    Row,
    cpu,
    dumps,
    higher_is_better,
    is_zyx,
    load,
    name,
    number,
    version,
)
from results import commit as current_commit  # noqa: E402
from results import machine as this_machine  # noqa: E402

TITLES = {
    "cuda_bench": "CUDA: zyx-cuda against torch, cupy and raw cuda-python",
    "opencl_bench": "OpenCL: zyx-opencl against raw pyopencl",
    "frontend_bench": "Array front end against torch, torch.compile, cupy and numpy",
    "reduce_bench": "Reductions against torch, torch.compile, cupy and numpy",
    "matmul_bench": "Matmul: zyx.matmul against torch, torch.compile, cupy, tinygrad, numpy",
    "cudnn_bench": "Matmul through zyx-cudnn against torch and the cuDNN frontend",
    "jit_bench": "zyx.jit replay against eager zyx, torch and CUDA graphs",
    "launch_overhead": "zyx's own host time per launch (the native call stubbed out)",
    "host_vs_numpy": "Host device against numpy",
    "kernel_search": "Kernel search: the default variant against the search's and the best",
}
"""Each benchmark's section title, in the order of the document."""


@dataclass(frozen=True)
class Limit:
    """What the hardware itself reaches, for the workloads it bounds."""

    hardware: str
    """Part of the environment's hardware line of the machines it holds for."""
    bytes_per_second: float
    what: str

    def applies(self, results: Results, workload: str, unit: str) -> bool:
        copies = ("host to device", "device to host", "GPU 0 to GPU 1")
        return (
            self.hardware in results["environment"].get("hardware", "")
            and unit in BYTES
            and not any(copy in workload for copy in copies)
        )


BYTES = {"TB/s": 1e12, "GB/s": 1e9}
LIMITS = [
    Limit(
        "NVIDIA H200",
        4.15e12,
        "H200 device-to-device copy of 1 GiB, bytes read + written (measured 2026-11-30, "
        "shared/GPU.md)",
    )
]


# ---- tables -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One workload of one run: its rows, the zyx row shown, the peer it is compared with,
    and the limit where one holds."""

    results: Results
    name: str
    rows: list[Row]

    @property
    def unit(self) -> str:
        return str(self.rows[0]["unit"])

    @property
    def higher(self) -> bool | None:
        units = {r["unit"] for r in self.rows}
        return higher_is_better(self.unit) if len(units) == 1 else None

    def fastest(self, rows: list[Row]) -> Row | None:
        """The fastest of ``rows``; ``None`` without a direction."""
        if not rows or self.higher is None:
            return None
        pick = max if self.higher else min
        return pick(rows, key=lambda r: r["value"])

    def zyx(self) -> Row | None:
        """The zyx row the report shows: the path users take where the benchmark marks one
        (``headline``), else zyx's fastest row."""
        rows = [r for r in self.rows if is_zyx(r["implementation"])]
        return self.fastest([r for r in rows if r.get("headline")] or rows)

    def peer(self) -> Row | None:
        """The fastest peer on the run's device; only where none ran there, the fastest of
        those that ran elsewhere (a row's ``device``: numpy on the host beside a GPU)."""
        rows = [r for r in self.rows if not is_zyx(r["implementation"])]
        return self.fastest([r for r in rows if not r.get("device")] or rows)

    def speedup(self, zyx: Row, peer: float) -> float:
        """zyx's speed over a peer's: above 1 is zyx faster."""
        value = float(zyx["value"])
        return value / peer if self.higher else peer / value

    def limit(self) -> tuple[float, str] | None:
        for limit in LIMITS:
            if limit.applies(self.results, self.name, self.unit):
                return limit.bytes_per_second / BYTES[self.unit], limit.what
        return None


def workloads(results: Results) -> list[Workload]:
    """The run's workloads in the order its rows first name them."""
    order: dict[str, list[Row]] = {}
    for r in results["rows"]:
        order.setdefault(r["workload"], []).append(r)
    return [Workload(results, name, rows) for name, rows in order.items()]


def value(amount: float, unit: str) -> str:
    return f"{number(amount)}{'' if unit == 'x' else ' '}{unit}"


def ratio(value: float) -> str:
    return f"{value:.2f}x"


def workload_table(work: Workload) -> str:
    """The workload's rows, zyx's first; the ratio column holds zyx's speed over a peer's:
    on a peer's row (and the limit's) the zyx row shown (``Workload.zyx``, in bold) over
    it, on a zyx row that row over the peer the summary compares with (``Workload.peer``).
    A ratio has no direction where the unit gives none (a ratio itself)."""
    direction = {True: "higher is faster", False: "lower is faster", None: ""}[work.higher]
    if work.unit == "x":
        direction = "zyx's time over the reference call's: below 1 is zyx faster"
    head = f"**{work.name}** ({work.unit}{', ' + direction if direction else ''})"
    zyx, peer = work.zyx(), work.peer()
    ratios = zyx is not None and (peer is not None or work.limit() is not None)
    columns = ["implementation", "value", "ratio"] if ratios else ["implementation", "value"]
    lines = [head, "", f"| {' | '.join(columns)} |", "|---" + "|---:" * (len(columns) - 1) + "|"]
    rows = sorted(work.rows, key=lambda r: not is_zyx(r["implementation"]))
    for r in rows:
        against = ""
        if work.higher is not None and is_zyx(r["implementation"]) and peer is not None:
            against = ratio(work.speedup(r, peer["value"]))
        elif work.higher is not None and not is_zyx(r["implementation"]) and zyx is not None:
            against = ratio(work.speedup(zyx, r["value"]))
        label = f"**{r['implementation']}**" if r is zyx else r["implementation"]
        note = f" ({'; '.join(notes(r))})" if notes(r) else ""
        cells = [f"{label}{note}", value(r["value"], r["unit"]), against][: len(columns)]
        lines.append(f"| {' | '.join(cells)} |")
    limit = work.limit()
    if limit is not None:
        bound, what = limit
        against = ratio(work.speedup(zyx, bound)) if zyx is not None else ""
        lines.append(f"| limit: {what} | {value(bound, work.unit)} | {against} |")
    return "\n".join(lines) + "\n"


def notes(r: Row) -> list[str]:
    """A row's note, after where it ran where that is not the run's device (and its label
    does not say so)."""
    where = r.get("device", "")
    elsewhere = [f"on the {where}"] if where and where not in r["implementation"] else []
    return elsewhere + ([r["note"]] if r.get("note") else [])


def title(results: Results) -> str:
    return f"{TITLES.get(results['benchmark'], results['benchmark'])} ({results['machine']})"


def anchor(results: Results) -> str:
    return f"{results['benchmark']}-{results['machine']}"


def section(results: Results) -> str:
    env = results["environment"]
    lines = [f'<a id="{anchor(results)}"></a>', f"## {title(results)}", ""]
    for key in (*ENVIRONMENT, "note"):
        if key in env:
            shown = "how to reproduce" if key == "command" else key
            text = env[key]
            if key == "command" and text != NOT_RECORDED and "`" not in text:
                text = f"`{text}`"
            lines.append(f"- {shown}: {text}")
    lines.append("")
    return "\n".join(lines) + "\n" + "\n".join(workload_table(w) for w in workloads(results))


def summary(runs: list[Results]) -> str:
    """One line a workload: the zyx row shown against the peer it is compared with (both
    named where the workload has more than one zyx row), and against the limit; each run
    with its date and commit, so that a run of an older tree reads as one."""
    lines = [
        "| run | measured | workload | zyx | best peer | zyx vs best peer | zyx vs limit |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for results in runs:
        for work in workloads(results):
            zyx, peer, limit = work.zyx(), work.peer(), work.limit()
            if zyx is None:
                continue
            shown = value(zyx["value"], zyx["unit"])
            if sum(is_zyx(r["implementation"]) for r in work.rows) > 1:
                shown += f" ({zyx['implementation']})"
            against = f"{number(peer['value'])} ({peer['implementation']})" if peer else "—"
            speed = ratio(work.speedup(zyx, peer["value"])) if peer else "—"
            bound = ratio(work.speedup(zyx, limit[0])) if limit else "—"
            run = f"[{results['benchmark']} ({results['machine']})](#{anchor(results)})"
            env = results["environment"]
            when = f"{env.get('date', '?')[:10]}, {env.get('commit', '?')}"
            lines.append(
                f"| {run} | {when} | {work.name} | {shown} | {against} | {speed} | {bound} |"
            )
    return "\n".join(lines) + "\n"


def ordered(runs: Iterable[Results]) -> list[Results]:
    """In the order of ``TITLES``; for each benchmark the GPU machines' runs first."""
    rank = {name: i for i, name in enumerate(TITLES)}

    def key(r: Results) -> tuple[int, str, bool, str]:
        cpu_only = "NVIDIA" not in r["environment"].get("hardware", "")
        return rank.get(r["benchmark"], len(rank)), r["benchmark"], cpu_only, r["machine"]

    return sorted(runs, key=key)


def render(runs: list[Results], charts: list[str]) -> str:
    """The whole document."""
    runs = ordered(runs)
    links = " · ".join(f"[{Path(c).stem}]({c})" for c in charts)
    intro = """# Benchmarks

Generated by `python benchmarks/report.py` from the results files in
[benchmarks/results/](benchmarks/results/) (one per benchmark and machine, the latest
run of each; earlier runs are in git's history): do not edit by hand. Each table is one
workload of one run, zyx beside the peers installed there, all measured in that run.
zyx's row in bold, the one the summary shows, is the path users take where the benchmark
marks one (`zyx.realize(x @ y)` beside the `Device.launch` of its kernel), else zyx's
fastest. The best peer is the fastest that ran on the run's device; a reference that ran
elsewhere (numpy on the host beside a GPU run) counts only where none did. **ratio** is
zyx's speed over a peer's, above 1 where zyx is faster: on a peer's row (and on the
hardware limit's, where one is known) the bold row over it, on zyx's rows that row over
the best peer. Each run's environment (hardware, driver, versions, commit, math mode) and
the command that reproduces it are listed with it. `nox -s bench` reruns what a machine
without a GPU can (host and PoCL, small sizes); the GPU runs (an H200, and an H100 SXM
where the lent machine was one: compare runs of one machine only) come from the
`scripts/gpu-*.sh` each names.
"""
    if links:
        intro += f"\nCharts: {links}.\n"
    body = "\n".join(section(r) for r in runs)
    return f"{intro}\n## Summary\n\n{summary(runs)}\n{body}".rstrip("\n") + "\n"


# ---- charts -----------------------------------------------------------------------------


CHARTS: dict[str, Callable[[str, str], bool]] = {
    "bandwidth": lambda bench, unit: (
        unit in BYTES and bench in ("cuda_bench", "opencl_bench", "reduce_bench", "host_vs_numpy")
    ),
    "launch": lambda bench, unit: (
        higher_is_better(unit) is not None
        and bench in ("cuda_bench", "opencl_bench", "jit_bench")
        and unit not in BYTES
    ),
    "matmul": lambda bench, unit: bench in ("matmul_bench", "cudnn_bench"),
    "frontend": lambda bench, unit: bench == "frontend_bench",
}
"""Each chart's workloads, by benchmark and unit: those with a peer beside zyx."""


def charted(runs: list[Results], chart: str) -> list[Workload]:
    keep = CHARTS[chart]
    return [
        w
        for r in ordered(runs)
        for w in workloads(r)
        if keep(r["benchmark"], w.unit) and w.zyx() is not None and w.peer() is not None
    ]


def draw(works: list[Workload], path: Path, heading: str) -> None:
    """One panel per workload: the zyx row shown and every peer as bars, the limit as a
    line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 2
    rows = math.ceil(len(works) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(14, 2.6 * rows + 0.6), squeeze=False)
    for ax, work in zip(axes.flat, works):
        zyx = work.zyx()
        assert zyx is not None
        bars = [zyx, *(r for r in work.rows if not is_zyx(r["implementation"]))]
        labels = [textwrap.shorten(r["implementation"], 42, placeholder="…") for r in bars]
        colors = ["tab:blue" if is_zyx(r["implementation"]) else "tab:gray" for r in bars]
        drawn = ax.barh(range(len(bars)), [r["value"] for r in bars], color=colors)
        ax.bar_label(drawn, labels=[number(r["value"]) for r in bars], fontsize=7, padding=2)
        ax.margins(x=0.15)
        ax.set_yticks(range(len(bars)), labels, fontsize=8)
        ax.invert_yaxis()
        limit = work.limit()
        if limit is not None:
            ax.axvline(limit[0], color="tab:red", linestyle="--", linewidth=1)
        better = "higher is faster" if work.higher else "lower is faster"
        ax.set_xlabel(f"{work.unit} ({better})", fontsize=8)
        caption = f"{work.name} [{work.results['machine']}]"
        ax.set_title("\n".join(textwrap.wrap(caption, 70)), fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
    for ax in axes.flat[len(works) :]:
        ax.axis("off")
    fig.suptitle(f"{heading}: zyx (blue) against the peers (grey); dashed: the hardware limit")
    fig.tight_layout()
    fig.savefig(path, dpi=72, metadata={"Software": None})
    plt.close(fig)


def charts(runs: list[Results], folder: Path) -> list[Path]:
    made = []
    for chart in CHARTS:
        works = charted(runs, chart)
        path = folder / f"{chart}.png"
        if works:
            draw(works, path, chart.capitalize())
            made.append(path)
        elif path.exists():
            path.unlink()
    return made


# ---- main -------------------------------------------------------------------------------


def add(paths: list[Path], folder: Path, machine: str, commit: str) -> None:
    """Copy each run's file into ``folder`` in the schema, named for its benchmark and
    machine ("here": this machine, which also fills in the environment such a file lacks)."""
    for path in paths:
        results = load(path)
        if "variant" in results:  # an older format: the file names no machine
            if not machine:
                raise SystemExit(f"{path}: the file names no machine: give --machine")
            if machine == "here":
                here(results["environment"], path)
            variant = results.pop("variant")
            label = this_machine() if machine == "here" else machine
            results["machine"] = f"{label}_{variant}" if variant else label
        env = results["environment"]
        if commit and env.get("commit", NOT_RECORDED).startswith(NOT_RECORDED):
            env["commit"] = commit
        target = folder / name(results["benchmark"], results["machine"])
        target.write_text(dumps(results))
        print(f"{path} -> {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")


def here(env: dict[str, str], path: Path) -> None:
    """Fill in what a file written on this machine does not say: the date it was written,
    the CPU, Python's and numpy's versions, the commit."""
    written = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC)
    known = {
        "date": f"{written:%Y-%m-%d %H:%M} UTC",
        "hardware": cpu(),
        "versions": f"Python {platform.python_version()}, numpy {version('numpy')}",
        "commit": current_commit(),
    }
    for key, value in known.items():
        if env.get(key, NOT_RECORDED) == NOT_RECORDED:
            env[key] = value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--add", nargs="+", type=Path, default=[], help="run files to take in")
    parser.add_argument(
        "--machine", default="", help="machine of added files that name none ('here': this one)"
    )
    parser.add_argument("--commit", default="", help="commit of added files that name none")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--no-charts", action="store_true")
    args = parser.parse_args(argv)
    args.results.mkdir(parents=True, exist_ok=True)
    add(args.add, args.results, args.machine, args.commit)
    runs = [load(p) for p in sorted(args.results.glob("*.json"))]
    made = [] if args.no_charts else charts(runs, args.results)
    base = args.output.resolve().parent
    links = [p.resolve().relative_to(base).as_posix() for p in made]
    args.output.write_text(render(runs, links))
    print(f"wrote {args.output} ({len(runs)} runs) and {len(made)} charts")


if __name__ == "__main__":
    main()
