"""``import zyx`` is cheap: no plugin, no numpy, pydantic or pluggy, and under 150 ms."""

from __future__ import annotations

import re
import subprocess
import sys

HEAVY = ("numpy", "pydantic", "pluggy", "typer", "rich", "zyx.plugins", "zyx.host", "zyx_")


def test_import_zyx_loads_no_plugin_and_no_heavy_module(environ: dict[str, str]) -> None:
    code = "import sys, zyx; print('\\n'.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True
    )
    loaded = [m for m in done.stdout.split() if m.startswith(HEAVY)]
    assert loaded == []


def test_import_zyx_takes_under_150_ms(environ: dict[str, str]) -> None:
    # The total of -X importtime's self times covers everything the import pulled in.
    # Best of three, so a busy machine's one slow run does not decide.
    best = min(_import_time_us(environ) for _ in range(3))
    assert best < 150_000, f"import zyx took {best / 1000:.1f} ms"


def _import_time_us(environ: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import zyx"],
        env=environ,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = re.findall(r"^import time:\s+(\d+) \|", done.stderr, flags=re.MULTILINE)
    assert rows, done.stderr
    return sum(map(int, rows))
