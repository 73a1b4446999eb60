"""Small CPython extension modules, built at run time with the host's C compiler.

A few calls on a backend's hot path cost less in C than through any Python binding: a
``cuLaunchKernel`` through cuda-python's wrapper spends about 0.35 µs converting its
eleven arguments, a ``METH_FASTCALL`` C function about 0.05. zyx's packages are pure
Python, so a backend that wants such a call builds it here, as Triton builds its launchers:
from C source, against this interpreter's headers, with the compiler the host backend uses
(``ZYX_HOST_COMPILER``, else ``cc``). Built modules are cached on disk (``zyx.cache``
folder ``native``), keyed by the source and the interpreter, so the compiler runs once per
machine.

Native code is an optimisation, never a requirement: where there is no compiler, no
``Python.h`` or the build fails, ``load`` returns ``None`` and logs why (``zyx.compile``),
and the caller keeps its Python path. ``ZYX_NATIVE=0`` turns every native module off.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from types import ModuleType

from zyx.cache import DiskCache, digest
from zyx.host.compiler import find_compiler
from zyx.ir.ops import ParamKind

_log = logging.getLogger("zyx.compile")
_cache = DiskCache("native")
_loaded: dict[str, ModuleType | None] = {}


def enabled() -> bool:
    """Whether native modules may be used (``ZYX_NATIVE`` is not ``0``)."""
    return os.environ.get("ZYX_NATIVE", "1").strip() != "0"


def load(name: str, source: str, prelude: Sequence[str] = ()) -> ModuleType | None:
    """The extension module ``name`` (its C ``source`` defines ``PyInit_<name>``), built
    or taken from the cache; ``None``, logged, where it cannot be had. One module per name
    and process: a second call returns the first result.

    ``prelude`` names C sources of zyx's own compiled ahead of ``source``: ``"tracker"``
    (``zyx/tracker.c``) is the tracker's launch decisions for a native launcher."""
    if name not in _loaded:
        parts = [_prelude(part) for part in prelude]
        whole = "".join([*parts, f'#line 1 "{name}.c"\n', source])
        _loaded[name] = _load(name, whole) if enabled() else None
    return _loaded[name]


def tracked_params(
    kinds: Sequence[ParamKind],
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The positions of the buffer params a launcher on ``zyx/tracker.c`` tracks, the read
    ones and the written ones; ``None`` where a program has more params (64) or buffer
    params (32) than its ``ZyxTracking`` takes."""
    reads, writes = (
        tuple(i for i, k in enumerate(kinds) if k is kind)
        for kind in (ParamKind.GLOBAL, ParamKind.GLOBAL_MUT)
    )
    if len(kinds) > 64 or len(reads) + len(writes) > 32:
        return None
    return reads, writes


def _prelude(part: str) -> str:
    text = resources.files("zyx").joinpath(f"{part}.c").read_text()
    return f'#line 1 "zyx/{part}.c"\n{text}\n'


def _load(name: str, source: str) -> ModuleType | None:
    key = digest(name, source, sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "")
    path = _cache.folder / key
    if not path.is_file():
        built = _build(name, source)
        if built is None:
            return None
        _cache.put(key, built)
        if not path.is_file():  # the cache is not writable: load from a temporary file
            with tempfile.TemporaryDirectory(prefix="zyx-native-") as tmp:
                temporary = Path(tmp) / f"{name}.so"
                temporary.write_bytes(built)
                return _import(name, temporary)  # once loaded, the file may go
    return _import(name, path)


def _import(name: str, path: Path) -> ModuleType | None:
    try:
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (ImportError, OSError) as error:
        _log.warning("native module %s: cannot load %s: %s", name, path, error)
        return None
    _log.debug("native module %s loaded from %s", name, path)
    return module


def _build(name: str, source: str) -> bytes | None:
    """The shared object's bytes, or ``None`` (logged)."""
    compiler, why = find_compiler()
    include = Path(sysconfig.get_paths()["include"])
    if compiler is None or not (include / "Python.h").is_file():
        why = why or f"no Python.h in {include} (install the Python development headers)"
        _log.info("native module %s not built: %s; using the Python path", name, why)
        return None
    with tempfile.TemporaryDirectory(prefix="zyx-native-") as tmp:
        c_file, built = Path(tmp) / f"{name}.c", Path(tmp) / f"{name}.so"
        c_file.write_text(source)
        command = [compiler, "-O2", "-shared", "-fPIC", "-I", str(include), str(c_file)]
        if sys.platform == "darwin":  # Python's symbols resolve when the module is loaded
            command += ["-undefined", "dynamic_lookup"]
        try:
            result = subprocess.run(
                [*command, "-o", str(built)], capture_output=True, text=True, timeout=300
            )
        except (OSError, subprocess.SubprocessError) as error:
            _log.warning("native module %s: cannot run %s: %s", name, compiler, error)
            return None
        if result.returncode != 0:
            _log.warning("native module %s failed to build:\n%s", name, result.stderr)
            return None
        _log.info("native module %s built with %s", name, compiler)
        return built.read_bytes()
