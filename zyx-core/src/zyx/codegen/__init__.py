"""Rendering kernels to source code: the C-family renderer and its dialects."""

from zyx.codegen.c import CDialect, Source, guarded_division, sanitize

__all__ = ["CDialect", "Source", "guarded_division", "sanitize"]
