"""NVRTC: CUDA C source to a CUBIN (or PTX) image. Needs no GPU and no driver.

CUBIN for the device's exact architecture (``sm_XY``) is loaded by the driver as is. A
device newer than this NVRTC knows gets PTX for the newest architecture NVRTC supports
(``compute_XY``), which the driver compiles at load time. Images are cached on disk
(``zyx.cache``, folder ``cuda``) by source digest, target, NVRTC version and options.

NVRTC must be no newer than the driver: a CUDA 13.0 driver is not expected to load the PTX
of a newer NVRTC, so the distribution, which targets CUDA 13 drivers, pins
``nvidia-cuda-nvrtc==13.0.*``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cuda.bindings import nvrtc

from zyx.cache import DiskCache, digest
from zyx.codegen.c import Source
from zyx.errors import BackendError, ErrorStatus
from zyx_cuda.errors import CudaError, check

_log = logging.getLogger("zyx.compile")
_asm = logging.getLogger("zyx.asm")

_HEADERS = ("cuda_fp16.h", "cuda_bf16.h")
INSTALL_HINT = (
    "install nvidia-cuda-runtime==13.0.* (its wheel ships cuda_fp16.h and cuda_bf16.h), "
    "or set CUDA_HOME to a CUDA toolkit"
)


@dataclass(frozen=True)
class Image:
    """A compiled module: CUBIN or NUL-terminated PTX, ready for ``cuModuleLoadData``."""

    data: bytes
    format: str
    """``"cubin"`` or ``"ptx"``."""


@cache
def nvrtc_version() -> tuple[int, int]:
    major, minor = check(ErrorStatus.KERNEL_COMPILATION, "nvrtcVersion", nvrtc.nvrtcVersion())
    return int(major), int(minor)


@cache
def supported_archs() -> tuple[int, ...]:
    """The ``sm_XY`` numbers (``XY``) this NVRTC compiles for, ascending."""
    archs = check(
        ErrorStatus.KERNEL_COMPILATION, "nvrtcGetSupportedArchs", nvrtc.nvrtcGetSupportedArchs()
    )
    return tuple(sorted(archs))


def target(capability: tuple[int, int]) -> str:
    """``sm_XY`` where NVRTC supports the device, else ``compute_XY`` of the newest it
    supports below it. Raises KernelCompilation for a device older than NVRTC supports."""
    arch = capability[0] * 10 + capability[1]
    archs = supported_archs()
    if arch in archs:
        return f"sm_{arch}"
    older = [a for a in archs if a < arch]
    if not older:
        major, minor = nvrtc_version()
        raise BackendError(
            ErrorStatus.KERNEL_COMPILATION,
            f"compute capability {capability[0]}.{capability[1]} is older than NVRTC "
            f"{major}.{minor} supports (sm_{archs[0]} and newer)",
        )
    return f"compute_{older[-1]}"


@cache
def include_dir() -> Path | None:
    """The folder holding ``cuda_fp16.h`` and ``cuda_bf16.h``: the nvidia-cuda-runtime
    wheel's (found by cuda.pathfinder), else ``$CUDA_HOME/include``, else
    ``/usr/local/cuda/include``; ``None`` if none has them."""
    candidates: list[Path] = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cudart")
        if found:
            candidates.append(Path(found))
    except ImportError:
        pass
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if root := os.environ.get(variable):
            candidates.append(Path(root) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    for folder in candidates:
        if all((folder / header).is_file() for header in _HEADERS):
            return folder
    return None


class Compiler:
    """Compiles CUDA C for one compute capability, through the on-disk cache."""

    def __init__(self, capability: tuple[int, int]) -> None:
        self.target = target(capability)
        self._cache = DiskCache("cuda")

    def options(self, source: Source) -> list[str]:
        opts = [f"--gpu-architecture={self.target}", "-default-device", "--std=c++17"]
        if "#include" in source.code:
            folder = include_dir()
            if folder is None:
                raise BackendError(
                    ErrorStatus.KERNEL_COMPILATION,
                    f"{source.name}: f16/bf16 kernels need cuda_fp16.h and cuda_bf16.h, which "
                    f"were not found; {INSTALL_HINT}",
                )
            opts.append(f"--include-path={folder}")
        return opts

    def compile(self, source: Source) -> Image:
        """The image of ``source``; a failed compile raises KernelCompilation with the log."""
        options = self.options(source)
        fmt = "cubin" if self.target.startswith("sm_") else "ptx"
        version = ".".join(map(str, nvrtc_version()))
        key = digest(source.digest, self.target, version, *options)
        cached = self._cache.get(key)
        if cached is not None:
            _log.debug("cuda: %s from cache (%s)", source.name, key[:12])
            return Image(cached, fmt)
        _asm.debug("cuda source of %s:\n%s", source.name, source.code)
        data = _nvrtc(source, options, fmt)
        self._cache.put(key, data)
        _log.debug(
            "cuda: compiled %s for %s (%d bytes %s)", source.name, self.target, len(data), fmt
        )
        return Image(data, fmt)


def _nvrtc(source: Source, options: list[str], fmt: str) -> bytes:
    status = ErrorStatus.KERNEL_COMPILATION
    program = check(
        status,
        "nvrtcCreateProgram",
        nvrtc.nvrtcCreateProgram(source.code.encode(), f"{source.name}.cu".encode(), 0, [], []),
    )
    try:
        encoded = [o.encode() for o in options]
        (result,) = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
        if result:
            log = _program_log(program)
            raise CudaError(
                status,
                f"NVRTC failed to compile {source.name} ({' '.join(options)})",
                result,
                log=log + "\n--- source ---\n" + source.code,
            )
        get_size, get = (
            (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
            if fmt == "cubin"
            else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)
        )
        size = check(status, get_size.__name__, get_size(program))
        data = b" " * size
        check(status, get.__name__, get(program, data))
        return bytes(data)
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _program_log(program: nvrtc.nvrtcProgram) -> str:
    size = check(
        ErrorStatus.KERNEL_COMPILATION,
        "nvrtcGetProgramLogSize",
        nvrtc.nvrtcGetProgramLogSize(program),
    )
    log = b" " * size
    check(
        ErrorStatus.KERNEL_COMPILATION, "nvrtcGetProgramLog", nvrtc.nvrtcGetProgramLog(program, log)
    )
    return str(log.rstrip(b"\0").decode(errors="replace"))
