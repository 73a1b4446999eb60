"""Rendering kernels to source code: the C-family renderer and its dialects."""

from zyx.codegen.c import CDialect, Source, sanitize

__all__ = ["CDialect", "Source", "sanitize"]
