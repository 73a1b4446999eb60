"""zyx.cache: the root folder's precedence, round trips, atomic and failure-tolerant writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from zyx.cache import DiskCache, cache_root, digest


def test_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ZYX_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "zyx"
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path / "own"))
    assert cache_root() == tmp_path / "own"


def test_round_trip_and_miss(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    cache = DiskCache("test")
    key = digest("source", "device")
    assert cache.get(key) is None
    cache.put(key, b"\x00binary")
    assert cache.get(key) == b"\x00binary"
    assert [p.name for p in (tmp_path / "test").iterdir()] == [key]  # no temporary left


def test_key_parts_are_separated() -> None:
    assert digest("ab", "c") != digest("a", "bc")


def test_unwritable_folder_is_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ZYX_CACHE_DIR", str(blocker))
    cache = DiskCache("test")
    cache.put("key", b"x")  # must not raise
    assert cache.get("key") is None
