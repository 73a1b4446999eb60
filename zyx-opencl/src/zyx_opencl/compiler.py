"""Builds OpenCL C for one device, keeping program binaries in zyx's disk cache.

Build options are those of zyx 0.17's OpenCL backend, which zyx's spec requires:
``-cl-finite-math-only -cl-no-signed-zeros -cl-mad-enable``.
``-cl-finite-math-only`` lets the compiler assume no NaN or infinity ever occurs, so
kernels fed with them may give other results than the reference (the conformance suite
avoids both, except for the NaN poison it writes to outputs, which kernels overwrite).

A binary is cached under a digest of the source, the device's name, the driver's and the
platform's versions, and the options: a driver update rebuilds everything. A CPU device's
binaries are the host CPU's machine code (PoCL's for the CPU it runs on, under a name as
vague as "pthread-AMD EPYC"), so the host CPU's model and features join the key: a cache
shared by machines (a home on NFS, an image's baked cache) never hands one AVX-512 code it
lacks. A cached binary that the driver refuses counts as a miss.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pyopencl as cl

from zyx.cache import DiskCache, digest
from zyx.codegen import Source
from zyx.errors import BackendError, ErrorStatus
from zyx.host.cpu import cpu_info

BUILD_OPTIONS = ("-cl-finite-math-only", "-cl-no-signed-zeros", "-cl-mad-enable")

_log = logging.getLogger("zyx.compile")


class Compiler:
    """Turns sources into built ``cl.Program``s for one device of one context."""

    def __init__(self, context: cl.Context, device: cl.Device) -> None:
        self.context = context
        self.device = device
        self.cache = DiskCache("opencl")
        self._target = (device.name, device.driver_version, device.platform.version,
                        *host_code(device))  # fmt: skip

    def build(self, source: Source) -> cl.Program:
        """The program built from ``source``: from the cache, else compiled (and cached).
        A compile error raises ``KernelCompilation`` with the compiler's log."""
        key = digest(source.digest, *self._target, *BUILD_OPTIONS)
        start = time.perf_counter()
        binary = self.cache.get(key)
        program = None if binary is None else self._from_binary(binary)
        hit = program is not None
        if program is None:
            program = self._from_source(source)
            self.cache.put(key, program.binaries[0])
        if _log.isEnabledFor(logging.DEBUG):
            how = "cache hit" if hit else "compiled"
            ms = (time.perf_counter() - start) * 1e3
            _log.debug("%s for %s: %s in %.1f ms", source.name, self.device.name, how, ms)
        return program

    def _from_binary(self, binary: bytes) -> cl.Program | None:
        try:
            program: cl.Program = cl.Program(self.context, [self.device], [binary])
            with _quiet():
                program.build(options=list(BUILD_OPTIONS))
        except cl.Error as error:
            _log.debug("cached binary refused by %s: %s", self.device.name, error)
            return None
        return program

    def _from_source(self, source: Source) -> cl.Program:
        program = cl.Program(self.context, source.code)
        try:
            with _quiet():
                # Creating the native program first makes pyopencl build it without its own
                # cache (this one knows driver and options) and keep it: a failed build
                # still has its log.
                program.get_info(cl.program_info.NUM_DEVICES)
                program.build(options=list(BUILD_OPTIONS))
        except cl.Error as error:
            log = program.get_build_info(self.device, cl.program_build_info.LOG)
            raise BackendError(
                ErrorStatus.KERNEL_COMPILATION,
                f"kernel {source.name!r} does not build for {self.device.name}",
                log=log or str(error),
            ) from error
        if _log.isEnabledFor(logging.DEBUG):
            log = program.get_build_info(self.device, cl.program_build_info.LOG).strip()
            if log:
                _log.debug("%s: build log:\n%s", source.name, log)
        return program


def host_code(device: cl.Device) -> tuple[str, ...]:
    """What a device's binaries depend on beyond its name and driver: for a CPU device, the
    host CPU's model and features; nothing for others."""
    if not device.type & cl.device_type.CPU:
        return ()
    cpu = cpu_info()
    return (cpu.model, *sorted(cpu.flags))


@contextmanager
def _quiet() -> Iterator[None]:
    """Keep pyopencl's warnings about non-empty build logs and about building without its
    cache from the user: both are zyx's choices (the log goes to ``zyx.compile``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        warnings.filterwarnings("ignore", "Pre-build attribute access", UserWarning)
        yield
