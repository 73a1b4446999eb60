"""The fenced code blocks of the repository's Markdown documents, for the tests that hold
the documents to their code (``test_guide.py``, ``test_docs_arrays.py``).

(Not in conftest.py: test modules import these by a name no other test folder uses.)
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^```([\w+-]*)\n(.*?)^```", re.S | re.M)


def fences(document: Path) -> list[tuple[str, str]]:
    """Every fenced block of ``document`` in order: its language tag (``""`` where it has
    none) and its text."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(document.read_text())]


def code_blocks(document: Path, language: str) -> list[str]:
    """The text of each block of ``document`` tagged ``language``, in order."""
    return [text for tag, text in fences(document) if tag == language]
