"""Compiles host C with the system C compiler, loads it with ctypes, caches it on disk.

The compiler is ``cc`` unless ``ZYX_HOST_COMPILER`` names another; ``ZYX_HOST_COMPILER=none``
means there is none (the host device then interprets kernels). What the compiler supports
(``-march=native``, ``-fopenmp``, ``_Float16``) is detected once per process by compiling
tiny probes. Where the assembler refuses what ``-march=native`` made of a kernel (a compiler
bug), that kernel is built again for the baseline CPU, with a warning.

Shared objects are cached in ``zyx.cache``'s folder ``host`` (``$ZYX_CACHE_DIR/host``, else
``$XDG_CACHE_HOME/zyx/host``, else ``~/.cache/zyx/host``), keyed by a hash of the source, the
compiler's path and version, the flags and the CPU (``-march=native`` code is only valid on
the CPU it was made for). Entries are written atomically, so a process never loads a
half-written file; where the cache cannot be written, kernels still compile.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from zyx.cache import DiskCache, digest
from zyx.codegen.c import Source
from zyx.errors import BackendError, ErrorStatus
from zyx.host.cpu import cpu_info

log = logging.getLogger("zyx.compile")
asm_log = logging.getLogger("zyx.asm")

KernelFunction = Callable[[ctypes.Array[ctypes.c_void_p], int], None]
"""A compiled kernel: ``fn(args, nthreads)``."""

_BASE_FLAGS = (
    "-O3", "-std=gnu11", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno", "-ffp-contract=off",
)  # fmt: skip
# -fwrapv: signed overflow wraps, as in the interpreter, instead of being UB the optimizer
# may exploit. -fno-math-errno: lets sqrt and friends vectorize. -ffp-contract=off: no
# fused multiply-adds, so each op rounds as in the IR and the host matches the interpreter
# bit for bit on IEEE ops (memory-bound kernels lose nothing by it); the IR's own Fma is
# C's fmaf / fma, one instruction under -march=native -fno-math-errno.

_PROBES = {
    "-march=native": "int zyx_probe(int x) { return x + 1; }\n",
    "-fopenmp": (
        "#include <omp.h>\n"
        "int zyx_probe(void) { int n = 0;\n"
        "#pragma omp parallel reduction(+ : n)\n"
        "n += omp_get_num_threads(); return n; }\n"
    ),
    "_Float16": "_Float16 zyx_probe(_Float16 x) { return x * x; }\n",
    # clang builds it, ignoring the attribute with a warning (its own is min_vector_width).
    "prefer-vector-width": (
        "#ifdef __clang__\n#error\n#endif\n"
        '__attribute__((target("prefer-vector-width=512"))) int zyx_probe(int x) '
        "{ return x + 1; }\n"
    ),
}


@dataclass(frozen=True)
class Toolchain:
    """A working C compiler and what it supports."""

    command: str
    """Absolute path of the compiler."""
    version: str
    """First line of ``--version``."""
    flags: tuple[str, ...]
    openmp: bool
    native_f16: bool
    wide_vectors: bool = False
    """Whether a function may ask for 512-bit vectors (``HostDialect.wide_vectors``)."""

    def describe(self) -> str:
        features = ["OpenMP" if self.openmp else "no OpenMP"]
        if "-march=native" in self.flags:
            features.append("-march=native")
        return f"{self.command} ({self.version}; {', '.join(features)})"


def find_compiler(environ: Mapping[str, str] = os.environ) -> tuple[str | None, str]:
    """The compiler's absolute path, or ``None`` and why not. Cheap: runs nothing."""
    name = environ.get("ZYX_HOST_COMPILER", "cc").strip() or "cc"
    if name.lower() == "none":
        return None, "ZYX_HOST_COMPILER=none"
    path = shutil.which(name)
    if path is None:
        return None, f"no C compiler {name!r} on PATH"
    return path, ""


@cache
def toolchain() -> Toolchain | None:
    """The detected toolchain, or ``None`` where no compiler works. Once per process."""
    path, why = find_compiler()
    if path is None:
        log.info("host: %s; kernels run in the numpy interpreter", why)
        return None
    try:
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, check=True, timeout=60
        ).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as error:
        log.warning("host: %s does not run (%s); kernels run in the numpy interpreter", path, error)
        return None
    supported = _probe_features(path)
    if supported is None:
        log.warning("host: %s cannot build a shared library; kernels run in the interpreter", path)
        return None
    flags = _BASE_FLAGS + tuple(f for f in ("-march=native", "-fopenmp") if f in supported)
    found = Toolchain(
        path, version, flags, "-fopenmp" in supported, "_Float16" in supported,
        "prefer-vector-width" in supported,
    )  # fmt: skip
    log.info("host: compiler %s", found.describe())
    return found


def _probe_features(compiler: str) -> set[str] | None:
    """The optional features the compiler supports, or ``None`` if it builds nothing."""
    supported: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="zyx-probe-") as tmp:
        if not _builds(compiler, Path(tmp), "int zyx_probe(void) { return 0; }\n", []):
            return None
        for feature, code in _PROBES.items():
            flags = [feature] if feature.startswith("-") else []
            if _builds(compiler, Path(tmp), code, flags):
                supported.add(feature)
    return supported


def _builds(compiler: str, tmp: Path, code: str, flags: list[str]) -> bool:
    source = tmp / "probe.c"
    source.write_text(code)
    command = [compiler, *_BASE_FLAGS, *flags, str(source), "-o", str(tmp / "probe.so")]
    try:
        return subprocess.run(command, capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class HostCompiler:
    """Builds and loads kernels with one toolchain; the shared objects are cached on disk."""

    def __init__(self, toolchain: Toolchain, cache: DiskCache | None = None) -> None:
        self.toolchain = toolchain
        self.cache = cache if cache is not None else DiskCache("host")
        cpu = cpu_info()
        self._identity = digest(
            toolchain.command, toolchain.version, *toolchain.flags, cpu.model, *sorted(cpu.flags)
        )

    def key(self, source: Source) -> str:
        """The cache key of ``source`` built by this toolchain for this CPU."""
        return digest(self._identity, source.digest)

    def compile(self, source: Source) -> tuple[ctypes.CDLL, KernelFunction]:
        """The loaded library and its kernel function. Raises KernelCompilation with the
        compiler's stderr in ``log``."""
        key = self.key(source)
        cached = self.cache.path(key)
        if os.path.isfile(cached):
            log.debug("host: cache hit for %s: %s", source.name, cached)
            try:
                return _load(cached, source.name)
            except BackendError as error:  # a damaged entry is a miss: built again below
                log.warning("host: cached %s unusable, rebuilding: %s", source.name, error)
        asm_log.debug("host: source of %s:\n%s", source.name, source.code)
        with tempfile.TemporaryDirectory(prefix="zyx-cc-") as tmp:
            built = self._build(source, Path(tmp))
            self.cache.put(key, built.read_bytes())
            # Loaded before the temporary folder goes, in case the cache could not store it.
            return _load(cached if os.path.isfile(cached) else str(built), source.name)

    def _build(self, source: Source, tmp: Path) -> Path:
        # Not named for the kernel: a long name would pass the file system's limit.
        c_file, built = tmp / "kernel.c", tmp / "kernel.so"
        c_file.write_text(source.code)
        flags = self.toolchain.flags
        result = self._run(source, flags, c_file, built)
        if result.returncode != 0 and "-march=native" in flags and _assembler_failed(result):
            # The compiler's own bug: gcc 12.2 emits `vinsert<i128vldq>` for some AVX-512
            # code. Code for the baseline x86-64 is slower but right, and it is cached as
            # this kernel's build, so the fault costs one extra compile.
            log.warning(
                "host: %s's assembler refused its -march=native code for %s; built without "
                "it:\n%s", self.toolchain.command, source.name, result.stderr.strip()[:2000],
            )  # fmt: skip
            portable = tuple(f for f in flags if f != "-march=native")
            result = self._run(source, portable, c_file, built)
        if result.returncode != 0:
            raise BackendError(
                ErrorStatus.KERNEL_COMPILATION,
                f"{self.toolchain.command} failed on kernel {source.name!r} "
                f"(exit status {result.returncode})",
                log=result.stderr,
            )
        if result.stderr:
            log.debug("host: compiler output for %s:\n%s", source.name, result.stderr)
        return built

    def _run(
        self, source: Source, flags: tuple[str, ...], c_file: Path, built: Path
    ) -> subprocess.CompletedProcess[str]:
        command = [self.toolchain.command, *flags, str(c_file), "-o", str(built)]
        log.info("host: compiling %s: %s", source.name, " ".join(command))
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as error:
            raise BackendError(
                ErrorStatus.KERNEL_COMPILATION, f"cannot run {self.toolchain.command}: {error}"
            ) from error


def _assembler_failed(result: subprocess.CompletedProcess[str]) -> bool:
    """Whether the C was fine and the assembler refused what the compiler made of it (GNU
    as, or clang's integrated one)."""
    return "Assembler messages:" in result.stderr or "error: instruction requires" in result.stderr


def _load(path: str, name: str) -> tuple[ctypes.CDLL, KernelFunction]:
    try:
        library = ctypes.CDLL(path)
        function = getattr(library, name)
    except (OSError, AttributeError) as error:
        raise BackendError(
            ErrorStatus.KERNEL_COMPILATION, f"cannot load {path}: {error}"
        ) from error
    # No argtypes: its one caller passes the pointer array and an int, which ctypes passes
    # as they are; a prototype cost 0.25 us a launch (its from_param calls) and 25 us at a
    # process's first load (the POINTER type made).
    function.restype = None
    return library, function
