"""benchmarks/report.py renders results files into BENCHMARKS.md's tables: zyx's best row,
each peer's value and zyx's speed over it in the direction of the unit, the hardware limit
where one holds, and no ratio where no peer ran."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def report() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("report")
    finally:
        sys.path.remove(str(BENCHMARKS))


def run(hardware: str, rows: list[tuple[str, str, float, str]]) -> dict[str, Any]:
    env = {"date": "2026-12-03 08:00 UTC", "hardware": hardware, "driver": "580.159",
           "versions": "Python 3.12.3", "commit": "abc1234", "math mode": "IEEE f32",
           "command": "python benchmarks/x.py"}  # fmt: skip
    return {"benchmark": "cuda_bench", "machine": "nvidia-h200", "environment": env,
            "rows": [{"workload": w, "implementation": i, "value": v, "unit": u}
                     for w, i, v, u in rows]}  # fmt: skip


def test_tables_ratios_and_limit(report: ModuleType) -> None:
    results = run("NVIDIA H200 (sm_90)", [
        ("add f32", "zyx IR, 1/thread", 2.0, "TB/s"),
        ("add f32", "zyx IR, 4/thread", 4.0, "TB/s"),
        ("add f32", "torch", 5.0, "TB/s"),
        ("add f32", "cupy", 2.0, "TB/s"),
        ("launch", "zyx Device.launch", 3.0, "µs"),
        ("launch", "torch add_", 6.0, "µs"),
        ("zyx only", "zyx recording", 1.5, "µs"),
    ])  # fmt: skip
    text = report.render([results], [])
    # zyx's best (4) over each peer; a slower zyx row over the best peer (torch's 5).
    assert "| **zyx IR, 4/thread** | 4 TB/s | 0.80x |" in text
    assert "| zyx IR, 1/thread | 2 TB/s | 0.40x |" in text
    assert "| torch | 5 TB/s | 0.80x |" in text
    assert "| cupy | 2 TB/s | 2.00x |" in text
    # The H200's copy bandwidth bounds a TB/s workload there: 4 / 4.15.
    assert "| limit: H200 device-to-device copy" in text and "| 4.15 TB/s | 0.96x |" in text
    # Time: zyx's speed over torch's is torch's time over zyx's.
    assert "| **zyx Device.launch** | 3 µs | 2.00x |" in text
    assert "| torch add_ | 6 µs | 2.00x |" in text
    # No peer ran: the table has no ratio column, the summary no peer.
    assert "**zyx only** (µs, lower is faster)\n\n| implementation | value |\n" in text
    assert "| zyx only | 1.5 µs | — | — | — |" in text
    assert "- commit: abc1234" in text and "- how to reproduce: `python benchmarks/x.py`" in text
    assert report.render([results], []) == text


def test_no_limit_off_the_h200(report: ModuleType) -> None:
    text = report.render([run("AMD EPYC, 2 cores", [("add f32", "zyx host", 40.0, "GB/s")])], [])
    assert "| limit:" not in text
    assert "| add f32 | 40 GB/s | — | — | — |" in text


def test_older_formats_converted(report: ModuleType, tmp_path: Path) -> None:
    """matmul_bench's rows of seconds and flops become TFLOP/s; the machine is asked for."""
    rows = [{"case": "f32:4096", "runner": "zyx (cuda:0)", "seconds": 0.004, "flops": 1.6e11,
             "error": 1e-6},
            {"case": "f32:4096", "runner": "torch (cuda)", "seconds": 0.002, "flops": 1.6e11,
             "error": None}]  # fmt: skip
    source = tmp_path / "matmul_cuda.json"
    source.write_text(json.dumps(rows))
    with pytest.raises(SystemExit, match="--machine"):
        report.add([source], tmp_path, "", "")
    report.add([source], tmp_path, "nvidia-h200", "abc1234")
    added = json.loads((tmp_path / "matmul_bench_nvidia-h200_cuda.json").read_text())
    assert added["environment"]["commit"] == "abc1234"
    text = report.render([added], [])
    assert "| **zyx (cuda:0)** (relative error 1.0e-06) | 40 TFLOP/s | 0.50x |" in text
