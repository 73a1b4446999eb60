"""No code is rendered to source and run: zyx's launch, check and schedule paths are plain
Python (the specification) and C (zyx/tracker.c and the backends' native.c)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGES = ["zyx-core/src/zyx", "zyx-cuda/src/zyx_cuda", "zyx-opencl/src/zyx_opencl"]
RUNNERS = {"exec", "eval", "compile"}


def calls_of_runners(path: Path) -> list[str]:
    """``file:line name`` of each call of ``exec``, ``eval`` or the builtin ``compile`` in
    ``path`` (a method called ``compile``, as ``device.compile``, is no such call)."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.func.id}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in RUNNERS
    ]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_execs_or_evals_source(package: str) -> None:
    found = [
        call for path in sorted((ROOT / package).rglob("*.py")) for call in calls_of_runners(path)
    ]
    assert found == [], found
