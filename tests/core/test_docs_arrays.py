"""``docs/arrays.md`` and the README's quick start, as a user reads them: every Python
example runs as shown and prints what its comments say.

A ``print`` line of an example ends with a comment holding its output (one line);
``# e.g. ...`` marks output that varies by machine, which is not checked. The examples
run in this process, each in a namespace of its own, on the default device.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from docs_support import DOCS, ROOT, code_blocks, fences

ARRAYS = DOCS / "arrays.md"
README = ROOT / "README.md"

EXAMPLES = code_blocks(ARRAYS, "python")

_PRINT = re.compile(r"^\s*print\(.*?\)(?:\s+# (?P<output>.*))?$")


def printed(code: str) -> list[str | None]:
    """Per ``print`` line of ``code``: the output its comment shows, or ``None`` (e.g.)."""
    out: list[str | None] = []
    for line in code.splitlines():
        match = _PRINT.match(line)
        if match is None:
            continue
        output = match.group("output")
        assert output is not None, f"a print without its output as a comment: {line!r}"
        out.append(None if output.startswith("e.g.") else output)
    return out


def _name(code: str) -> str:
    """A test id: the example's first line that is not an import or blank."""
    lines = [line for line in code.splitlines() if line and not line.startswith(("import", "from"))]
    return lines[0][:50] if lines else code.splitlines()[0]


def test_the_examples_are_python_or_shell() -> None:
    tags = {tag for tag, _ in fences(ARRAYS)}
    assert tags <= {"python", "bash"}, f"untagged or other blocks are not run: {tags}"
    assert len(EXAMPLES) >= 15


@pytest.mark.parametrize("code", EXAMPLES, ids=[_name(code) for code in EXAMPLES])
def test_every_example_runs_and_prints_what_it_says(
    code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    exec(compile(code, str(ARRAYS), "exec"), {"__name__": "docs_example"})  # noqa: S102
    lines = capsys.readouterr().out.splitlines()
    # In order; an example printing in a loop repeats a line, which its comment shows once.
    rest = iter(lines)
    for want in printed(code):
        if want is not None:
            assert want in rest, f"{want!r} not printed (in order); it printed {lines}"


def test_the_links_lead_to_files_that_exist() -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", ARRAYS.read_text()):
        assert (ARRAYS.parent / target).exists(), target


def test_the_readme_quick_start_runs_as_shown() -> None:
    text = README.read_text()
    quick = text[text.index("## Quick start") : text.index("## Installing a backend")]
    # The two commands of the quick start, as they were: other docs and CI point at them.
    assert "pip install ./zyx-core && zyx check     # install the core" in quick
    assert "pip install uv nox && nox               # run the test suite" in quick
    assert "(docs/arrays.md)" in quick
    (code,) = code_blocks(README, "python")
    assert len(code.splitlines()) == 5
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[12. 30.]\n"
