"""zyx.native: extension modules built at run time, cached, and absent without a compiler."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from zyx import native

SOURCE = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *twice(PyObject *self, PyObject *x) {
    long v = PyLong_AsLong(x);
    if (v == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLong(2 * v);
}
static PyMethodDef methods[] = {{"twice", twice, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "NAME", NULL, -1, methods};
PyMODINIT_FUNC PyInit_NAME(void) { return PyModule_Create(&module); }
"""

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH")


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An empty cache and no module loaded yet in this process."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ZYX_NATIVE", raising=False)
    monkeypatch.setattr(native, "_loaded", {})


def source(name: str) -> str:
    return SOURCE.replace("NAME", name)


@needs_cc
def test_builds_loads_and_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = native.load("_zyx_test_twice", source("_zyx_test_twice"))
    assert module is not None and module.twice(21) == 42
    assert native.load("_zyx_test_twice", source("_zyx_test_twice")) is module
    assert len(list((tmp_path / "native").iterdir())) == 1
    # A later process finds it in the cache and needs no compiler.
    monkeypatch.setattr(native, "_loaded", {})
    monkeypatch.setenv("ZYX_HOST_COMPILER", "none")
    again = native.load("_zyx_test_twice", source("_zyx_test_twice"))
    assert again is not None and again.twice(-4) == -8


def test_no_compiler_means_none_and_a_reason(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ZYX_HOST_COMPILER", "none")
    with caplog.at_level(logging.INFO, logger="zyx.compile"):
        assert native.load("_zyx_test_absent", source("_zyx_test_absent")) is None
    assert "ZYX_HOST_COMPILER=none" in caplog.text


def test_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYX_NATIVE", "0")
    assert not native.enabled()
    assert native.load("_zyx_test_off", source("_zyx_test_off")) is None


@needs_cc
def test_a_build_error_is_logged_with_the_compiler_output(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = source("_zyx_test_broken").replace("return PyLong_FromLong", "return undeclared +")
    with caplog.at_level(logging.WARNING, logger="zyx.compile"):
        assert native.load("_zyx_test_broken", broken) is None
    assert "_zyx_test_broken: failed to build" in caplog.text and "undeclared" in caplog.text
    why = native.status()["_zyx_test_broken"]  # what zyx doctor shows
    assert why is not None and why.startswith("failed to build") and "undeclared" in why


@needs_cc
def test_an_unwritable_cache_still_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("ZYX_CACHE_DIR", str(blocked))  # the cache folder cannot be made
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    module = native.load("_zyx_test_uncached", source("_zyx_test_uncached"))
    assert module is not None and module.twice(5) == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"], "the temporary file went"


RUN_WITHOUT_NATIVE = """
import numpy as np, zyx
from zyx import runtime
from zyx.allocator import Allocator, allocator
from zyx.graph import structure
x = zyx.asarray(np.arange(6, dtype=np.float32), device="host")
for c in (1.0, 2.0, 3.0):
    y = zyx.sort(x * c + x, descending=True)
    assert (y.numpy() == np.sort(np.arange(6) * (c + 1))[::-1]).all()
assert zyx.stats().plans_reused >= 2, zyx.stats()
assert structure.fastest() is structure.structure
assert runtime._runner is None and runtime.runtime._last[1].native is None
assert allocator.allocate.__func__ is Allocator.allocate
print("ok")
"""


def test_zyx_native_0_runs_the_front_end_in_python(environ: dict[str, str]) -> None:
    """The structure walk, the plans' runs and the allocator: each its Python spec."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_NATIVE],
        env={**environ, "ZYX_NATIVE": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
