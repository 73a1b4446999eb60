"""Small CPython extension modules, built at run time with the host's C compiler.

A few calls on a backend's hot path cost less in C than through any Python binding, which
converts each argument at each call (benchmarks/launch_overhead.py times a launch both
ways). zyx's packages are pure Python, so a backend that wants such a call builds it here,
as Triton builds its launchers:
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
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from zyx.backend import Buffer, MemoryPool, Program
from zyx.cache import DiskCache, digest
from zyx.host.compiler import find_compiler
from zyx.ir.ops import ParamKind, SymDim
from zyx.streams import Access, Sequencer

_log = logging.getLogger("zyx.compile")
_cache = DiskCache("native")
_loaded: dict[str, ModuleType | None] = {}
_why: dict[str, str] = {}
"""Per module that could not be had, why (what ``load`` logged)."""
_loading = threading.Lock()


def enabled() -> bool:
    """Whether native modules may be used (``ZYX_NATIVE`` is not ``0``)."""
    return os.environ.get("ZYX_NATIVE", "1").strip() != "0"


def load(name: str, source: str, prelude: Sequence[str] = ()) -> ModuleType | None:
    """The extension module ``name`` (its C ``source`` defines ``PyInit_<name>``), built
    or taken from the cache; ``None``, logged, where it cannot be had. One module per name
    and process: a second call returns the first result.

    ``prelude`` names C sources of zyx's own compiled ahead of ``source``: ``"tracker"``
    (``zyx/tracker.c``) is the tracker's launch decisions for a native launcher, which
    reads a ``LaunchLayout``."""
    with _loading:  # one build per module, whichever thread asks first
        if name not in _loaded:
            parts = [_prelude(part) for part in prelude]
            whole = "".join([*parts, f'#line 1 "{name}.c"\n', source])
            if enabled():
                _loaded[name] = _load(name, whole)
            else:
                _loaded[name], _why[name] = None, "ZYX_NATIVE=0"
        return _loaded[name]


def status() -> dict[str, str | None]:
    """Per native module this process asked for: ``None`` where it is in use, else why
    its Python path runs instead (``zyx doctor`` shows this)."""
    with _loading:
        return {
            name: None if module is not None else _why.get(name, "not built")
            for name, module in _loaded.items()
        }


def _fail(name: str, level: int, why: str) -> None:
    """Log, and keep for ``status``, why module ``name`` cannot be had."""
    _why[name] = why
    _log.log(level, "native module %s: %s; using the Python path", name, why)


MAX_PARAMS = 64
MAX_BUFFERS = 32
"""The most params, and buffer params, a ``ZyxTracking`` takes (``zyx/tracker.c``)."""
_LONG_LONG = (-(1 << 63), (1 << 63) - 1)
"""The ints C reads as ``long long``: ints past them go to the Python path."""


@dataclass(frozen=True)
class LaunchLayout:
    """What a native launcher needs of one program and its device's queues: the one
    structure ``zyx/tracker.c`` reads (``zyx_tracking_init``, by these field names), the
    same for every backend, built once per program by :func:`launch_layout`. A backend's
    launcher takes it and one object of its own (its native handles and its Python path).
    """

    params: int
    """How many params the program takes."""
    reads: tuple[int, ...]
    """The positions of its ``Global`` params, in param order."""
    writes: tuple[int, ...]
    """The positions of its ``GlobalMut`` params, in param order."""
    scalars: tuple[tuple[int, int, int, bool], ...]
    """Per ``Variable``: its position and the plain values it takes as C reads them: the
    ints from the first to the second (``Program.scalar_ranges`` within ``long long``), and
    whether any ``float`` too."""
    grid: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
    """Per axis, the work-groups: ``(-1, count)``, or ``(param, div)`` for
    ``ceil(args[param] / div)`` (a ``SymDim``)."""
    limits: tuple[int, int, int]
    """The most work-groups per axis (``DeviceInfo.max_global_work_dims``)."""
    pool: MemoryPool
    """The pool a buffer argument must be of."""
    load: list[int]
    """``DependencyTracker.load``, which the launcher updates in place."""
    issued: list[int]
    """``Sequencer.issued``, likewise."""
    reached: list[int]
    """``Sequencer.reached``, which it reads."""
    track: Callable[[Buffer], Access[int]]
    """``DependencyTracker.track``: a new record for an untracked buffer."""
    queues: tuple[int, ...]
    """The queues' native handles (streams, command queues), as addresses."""
    lock: Any
    """The device's lock (``MemoryPool.lock``): a ``Lock`` of the launcher's own module
    (``new_lock``), which its ``submit`` takes in C."""
    extent_code: tuple[tuple[int, int, int, int], ...] = ()
    """``Program.extents.code``: the instructions of what the kernel reaches in its buffers
    (``zyx.ir.extent``), which the launcher evaluates per launch (``zyx_fits``)."""
    extent_needs: tuple[int, ...] = ()
    """``Program.extents.needs``: per param, the node of the bytes its buffer must hold,
    ``-1`` where nothing is known (one entry per param)."""
    buffer_type: type[Buffer] = Buffer
    record_type: type[Access[int]] = Access


def new_lock(module: ModuleType | None) -> Any:
    """A lock for a pool and its device (``MemoryPool.lock``): the ``Lock`` of a backend's
    native ``module`` (built with ``prelude=("tracker",)``), which its launchers take in C,
    or ``threading.RLock()`` without one. Both are re-entrant and used alike from Python."""
    return threading.RLock() if module is None else module.Lock()


def launch_layout(
    program: Program, sequencer: Sequencer[Any], queues: Sequence[int]
) -> LaunchLayout | None:
    """``program``'s layout on ``sequencer``'s queues (``queues``: their native handles);
    ``None`` where it has more params (``MAX_PARAMS``) or buffer params (``MAX_BUFFERS``)
    than a ``ZyxTracking`` takes: its launches then all take the Python path."""
    kinds = program.param_kinds
    reads, writes = (
        tuple(i for i, k in enumerate(kinds) if k is kind)
        for kind in (ParamKind.GLOBAL, ParamKind.GLOBAL_MUT)
    )
    if len(kinds) > MAX_PARAMS or len(reads) + len(writes) > MAX_BUFFERS:
        return None
    low, high = _LONG_LONG
    scalars = tuple(
        (i, max(bounds[0], low), min(bounds[1], high), bounds[2])
        for i, bounds in enumerate(program.scalar_ranges)
        if bounds is not None
    )
    x, y, z = ((d.param, d.div) if isinstance(d, SymDim) else (-1, d) for d in program.global_size)
    return LaunchLayout(
        params=len(kinds),
        reads=reads,
        writes=writes,
        scalars=scalars,
        grid=(x, y, z),
        limits=program.device.info.max_global_work_dims,
        extent_code=program.extents.code,
        extent_needs=program.extents.needs,
        **_tracking(program.device.pool, sequencer, queues),
    )


def read_layout(pool: MemoryPool, sequencer: Sequencer[Any], queues: Sequence[int]) -> LaunchLayout:
    """The layout of a read of one of ``pool``'s buffers on ``sequencer``'s queues, as of a
    launch that reads its one param: a native reader tracks it as a launcher does."""
    return LaunchLayout(
        params=1,
        reads=(0,),
        writes=(),
        scalars=(),
        grid=((-1, 1), (-1, 1), (-1, 1)),
        limits=(1, 1, 1),
        extent_needs=(-1,),
        **_tracking(pool, sequencer, queues),
    )


def _tracking(pool: MemoryPool, sequencer: Sequencer[Any], queues: Sequence[int]) -> dict[str, Any]:
    """A ``LaunchLayout``'s fields of ``pool`` and ``sequencer``'s books, shared in place."""
    tracker = sequencer.tracker
    return {
        "pool": pool,
        "load": tracker.load,
        "issued": sequencer.issued,
        "reached": sequencer.reached,
        "track": tracker.track,
        "queues": tuple(queues),
        "lock": pool.lock,
    }


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
        _fail(name, logging.WARNING, f"cannot load {path}: {error}")
        return None
    _log.debug("native module %s loaded from %s", name, path)
    return module


def _build(name: str, source: str) -> bytes | None:
    """The shared object's bytes, or ``None`` (logged)."""
    compiler, why = find_compiler()
    include = Path(sysconfig.get_paths()["include"])
    if compiler is None or not (include / "Python.h").is_file():
        why = why or f"no Python.h in {include} (install the Python development headers)"
        _fail(name, logging.INFO, f"not built: {why}")
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
            _fail(name, logging.WARNING, f"cannot run {compiler}: {error}")
            return None
        if result.returncode != 0:
            _fail(name, logging.WARNING, f"failed to build:\n{result.stderr}")
            return None
        _log.info("native module %s built with %s", name, compiler)
        return built.read_bytes()
