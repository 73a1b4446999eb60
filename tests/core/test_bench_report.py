"""benchmarks/report.py renders results files into BENCHMARKS.md's tables: zyx's best row
(or the headline row where one is marked), each peer's value and zyx's speed over it in the
direction of the unit, the best peer on the run's device before one that ran elsewhere, the
hardware limit where one holds, and no ratio where no peer ran."""

from __future__ import annotations

import importlib
import json
import os
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


def run(hardware: str, rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """A run's results: rows of (workload, implementation, value, unit[, flags])."""
    env = {"date": "2026-12-03 08:00 UTC", "hardware": hardware, "driver": "580.159",
           "versions": "Python 3.12.3", "commit": "abc1234", "math mode": "IEEE f32",
           "command": "python benchmarks/x.py"}  # fmt: skip
    return {"benchmark": "cuda_bench", "machine": "nvidia-h200", "environment": env,
            "rows": [{"workload": w, "implementation": i, "value": v, "unit": u,
                      **(more[0] if more else {})}
                     for w, i, v, u, *more in rows]}  # fmt: skip


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


def test_headline_row_and_peer_on_the_device(report: ModuleType) -> None:
    """The headline row stands for zyx though a lower layer's is faster; a peer that ran on
    another device (numpy on the host beside a GPU) counts only where none ran on it."""
    results = run("NVIDIA H200 (sm_90)", [
        ("matmul host time", "zyx.realize(x @ y)", 100.0, "µs", {"headline": True}),
        ("matmul host time", "zyx Device.launch", 10.0, "µs"),
        ("matmul host time", "torch.mm", 20.0, "µs"),
        ("a + b", "zyx", 50.0, "µs"),
        ("a + b", "torch", 25.0, "µs"),
        ("a + b", "numpy (host)", 1.0, "µs", {"device": "host"}),
        ("sum", "zyx", 40.0, "µs"),
        ("sum", "numpy (host)", 10.0, "µs", {"device": "host"}),
        ("sum", "torch (cpu)", 20.0, "µs", {"device": "host", "note": "eager"}),
    ])  # fmt: skip
    text = report.render([results], [])
    assert "| **zyx.realize(x @ y)** | 100 µs | 0.20x |" in text
    assert "| zyx Device.launch | 10 µs | 2.00x |" in text
    assert "| torch.mm | 20 µs | 0.20x |" in text
    assert "| matmul host time | 100 µs (zyx.realize(x @ y)) | 20 (torch.mm) | 0.20x | — |" in text
    # torch on the GPU is the peer; numpy on the host keeps its row and zyx's ratio over it.
    assert "| a + b | 50 µs | 25 (torch) | 0.50x | — |" in text
    assert "| **zyx** | 50 µs | 0.50x |" in text and "| numpy (host) | 1 µs | 0.02x |" in text
    # Without a peer on the device, the host's numpy stands in; a row whose label does not
    # say where it ran says so.
    assert "| sum | 40 µs | 10 (numpy (host)) | 0.25x | — |" in text
    assert "| torch (cpu) (on the host; eager) | 20 µs | 0.50x |" in text


def test_the_command_names_the_settings_that_change_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run with zyx-cudnn off (or native code off, or some plugins only) says so in its
    command, so that the reproduction it shows is the run; logging and paths do not."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        results = importlib.import_module("results")
    finally:
        sys.path.remove(str(BENCHMARKS))
    monkeypatch.setattr(sys, "argv", [str(BENCHMARKS / "matmul_bench.py"), "--device", "cuda"])
    for name in list(os.environ):
        if name.startswith("ZYX_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ZYX_CUDA__CUDNN", "false")
    monkeypatch.setenv("ZYX_NATIVE", "0")
    monkeypatch.setenv("ZYX_DEBUG", "256")
    monkeypatch.setenv("ZYX_CACHE_DIR", "/tmp/x")
    assert results.command() == (
        "ZYX_CUDA__CUDNN=false ZYX_NATIVE=0 python benchmarks/matmul_bench.py --device cuda"
    )
