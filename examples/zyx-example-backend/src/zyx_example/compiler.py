"""Compiles rendered kernels: Python's own ``compile``, then ``exec`` into a fresh namespace.

A GPU backend calls its vendor's compiler here (NVRTC, ``clBuildProgram``) and caches the
binary on disk; this backend's binary is a code object, cheap to rebuild, so an in-memory
cache keyed by the source is enough.
"""

from __future__ import annotations

import linecache
import logging
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from zyx.codegen import Source
from zyx.errors import BackendError, ErrorStatus

from zyx_example.codegen import prelude

KernelFunction = Callable[..., None]
"""A compiled kernel: ``f(*args, groups=(g0, g1, g2), first=group, count=groups)``."""

_log = logging.getLogger("zyx.compile")


@lru_cache(maxsize=512)
def compile_source(source: Source) -> KernelFunction:
    """The function ``source`` defines. A failure raises KernelCompilation with the log."""
    filename = f"<zyx-example {source.name} {source.digest[:12]}>"
    try:
        code = compile(source.code, filename, "exec")
    except SyntaxError as error:
        log = f"{filename}:{error.lineno}: {error.msg}\n{error.text or ''}"
        raise BackendError(
            ErrorStatus.KERNEL_COMPILATION, f"{source.name}: rendered invalid Python", log=log
        ) from error
    # Tracebacks through a kernel then show its rendered lines, not just line numbers.
    linecache.cache[filename] = (len(source.code), None, source.code.splitlines(True), filename)
    namespace: dict[str, Any] = prelude()
    exec(code, namespace)
    _log.debug("compiled %s (%d lines)", source.name, source.code.count("\n"))
    function: KernelFunction = namespace[source.name]
    return function
