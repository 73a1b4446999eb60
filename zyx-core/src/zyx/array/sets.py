"""Set functions (the standard's "Set Functions")."""

from __future__ import annotations

__all__: list[str] = []
