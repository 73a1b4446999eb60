"""``docs/writing-a-backend.md``, as a backend author uses it: its excerpts are whole files'
worth of code, down to their imports, and its ``pyproject.toml`` builds."""

from __future__ import annotations

import builtins
import symtable
import tomllib

import pytest
from docs_support import DOCS, code_blocks

GUIDE = DOCS / "writing-a-backend.md"


def blocks(language: str) -> list[str]:
    return code_blocks(GUIDE, language)


def excerpts() -> list[str]:
    """The Python excerpts that stand alone: not a method's (indented), not generated code."""
    return [
        code
        for code in blocks("python")
        if not code.startswith((" ", "\t")) and not code.startswith("# generated")
    ]


def undefined(code: str) -> set[str]:
    """The names ``code`` uses that it neither defines, imports nor takes from builtins."""
    module = symtable.symtable(code, "<excerpt>", "exec")
    known = {
        symbol.get_name()
        for symbol in module.get_symbols()
        if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()
    }
    used: set[str] = set()
    tables = [module]
    while tables:
        table = tables.pop()
        used |= {
            symbol.get_name()
            for symbol in table.get_symbols()
            if symbol.is_global() or (table is module and symbol.is_referenced())
        }
        tables += table.get_children()
    return {name for name in used - known if not hasattr(builtins, name)}


def test_the_pyproject_excerpt_builds() -> None:
    """It had no [build-system]: pip then fell back to setuptools' legacy build."""
    (pyproject,) = blocks("toml")
    data = tomllib.loads(pyproject)
    assert data["build-system"]["requires"] and data["build-system"]["build-backend"]
    assert data["project"]["entry-points"]["zyx.backends"] == {"example": "zyx_example.plugin"}


@pytest.mark.parametrize("code", excerpts(), ids=lambda code: code.splitlines()[0][:40])
def test_every_excerpt_imports_what_it_uses(code: str) -> None:
    assert not undefined(code), f"the excerpt uses {sorted(undefined(code))} unimported"


def test_the_guide_says_what_a_new_author_trips_on() -> None:
    text = " ".join(GUIDE.read_text().split())
    assert "Set the pool's `name`" in text
    assert "**Barriers and local memory on a CPU.**" in text
    assert "a kernel may be named `memcpy`" in text
    assert "a double for an f64 -> f16 cast, which it must round once" in text
