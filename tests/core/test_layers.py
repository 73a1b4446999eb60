"""The layers import downward only (DESIGN.md): the IR, its codegen and the backend
contract know nothing of the suite, the plugins, the config, the CLI or any backend."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import zyx

SRC = Path(zyx.__file__).parent
BELOW_THE_CONTRACT = [
    "ir", "codegen", "dtypes.py", "errors.py", "device_info.py", "backend.py", "streams.py",
    "staging.py",
]  # fmt: skip
ABOVE = ("zyx.testing", "zyx.plugins", "zyx.config", "zyx.cli", "zyx.check", "zyx.host", "zyx_")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def _modules() -> list[Path]:
    paths = [SRC / part for part in BELOW_THE_CONTRACT]
    return sorted(p for path in paths for p in ([path] if path.is_file() else path.rglob("*.py")))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_the_ir_codegen_and_contract_import_nothing_above_them(path: Path) -> None:
    upward = sorted(name for name in _imports(path) if name.startswith(ABOVE))
    assert upward == [], f"{path.relative_to(SRC)} imports {upward}"


@pytest.mark.parametrize("path", sorted((SRC / "ir").rglob("*.py")), ids=lambda p: p.name)
def test_the_ir_imports_no_contract(path: Path) -> None:
    """The contract checks kernels with the IR (``check_limits``); the IR checks them
    against a ``DeviceInfo`` of its own module, so the two never import each other."""
    assert "zyx.backend" not in _imports(path)
