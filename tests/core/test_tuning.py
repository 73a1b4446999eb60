"""The tuning cache (``zyx.tuning``): a complete key, atomic entries that survive concurrent
writers, damaged files ignored with a log line, ``zyx tune`` to show and clear it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import zyx
from zyx import tuning
from zyx.cli import app
from zyx.tuning import Entry, Identity, Key, TuningCache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TuningCache:
    """An empty tuning cache in a cache root of its own."""
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path / "cache"))
    return TuningCache()


def _key(kernel: str = "ops of k; sizes (4096, 64)") -> Key:
    identity = Identity.of(zyx.device("host"))
    options = (("budget", 2.0), ("runs", 3), ("min_time", 5e-5))
    return Key(kernel, identity, options, ("256", "128", "512"))


def _entry(variant: str = "128") -> Entry:
    return Entry(variant, {"256": 900, "128": 700, "512": 800}, "r_sum", "host", 0.5)


def test_an_entry_comes_back_from_disk_in_a_new_process(cache: TuningCache) -> None:
    cache.put(_key(), _entry())
    assert TuningCache().get(_key()) == _entry()  # a new cache: memory empty, read from disk
    assert [s.entry for s in cache.entries()] == [_entry()]


def test_the_identity_names_the_compiler_and_its_version() -> None:
    device = zyx.device("host")
    identity = Identity.of(device)
    assert identity.backend == "host" and identity.name == device.info.name
    assert identity.zyx == zyx.__version__
    chain = getattr(device, "toolchain", None)
    if chain is not None:  # a host with a C compiler
        assert chain.version in identity.versions and chain.command in identity.versions


def _changed_keys() -> dict[str, Key]:
    """The key with each of its parts changed, one at a time."""
    key = _key()
    ident = key.identity
    return {
        "kernel structure": replace(key, kernel="ops of k; sizes (4096, 65)"),
        "backend": replace(key, identity=replace(ident, backend="opencl")),
        "device name": replace(key, identity=replace(ident, name=ident.name + " (other)")),
        "compute capability": replace(key, identity=replace(ident, compute_capability=(9, 0))),
        "driver version": replace(key, identity=replace(ident, versions=("driver 12.8",))),
        "compiler version": replace(
            key, identity=replace(ident, versions=(*ident.versions[:-1], "gcc 99"))
        ),
        "zyx version": replace(key, identity=replace(ident, zyx="0.0.0")),
        "budget": replace(key, options=(("budget", 1.0), *key.options[1:])),
        "runs": replace(key, options=(key.options[0], ("runs", 5), key.options[2])),
        "min_time": replace(key, options=(*key.options[:2], ("min_time", 0.0))),
        "variants": replace(key, variants=("256", "128")),
    }


@pytest.mark.parametrize("part", list(_changed_keys()))
def test_a_change_of_any_part_of_the_key_misses(cache: TuningCache, part: str) -> None:
    cache.put(_key(), _entry())
    changed = _changed_keys()[part]
    assert changed.name != _key().name
    assert cache.get(changed) is None
    assert TuningCache().get(changed) is None  # not on disk either
    assert cache.get(_key()) == _entry()


def test_without_disk_nothing_is_written(cache: TuningCache) -> None:
    cache.put(_key(), _entry(), disk=False)
    assert cache.get(_key(), disk=False) == _entry()
    assert not cache.folder.exists() and TuningCache().get(_key()) is None


DAMAGED = {
    "not json": b"\x00\xff garbage",
    "truncated": b'{"format": 1, "key": {"kernel": ',
    "another format": json.dumps({"format": 99, "key": {}, "entry": {}}).encode(),
    "no entry": json.dumps({"format": 1, "key": {}}).encode(),
    "entry of strings": json.dumps(
        {"format": 1, "key": {}, "entry": {"variant": "1", "times": {"1": "fast"}}}
    ).encode(),
    "a list": b"[1, 2, 3]",
    "a key without variants": json.dumps(
        {"format": 1, "key": {"kernel": "k"}, "entry": asdict(_entry())}
    ).encode(),
    "deeply nested": b"[" * 100000 + b"]" * 100000,
    "empty": b"",
}


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_a_damaged_entry_is_a_miss_with_a_log_line(
    cache: TuningCache, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    cache.put(_key(), _entry())
    path = cache.folder / _key().name
    path.write_bytes(DAMAGED[damage])
    fresh = TuningCache()
    with caplog.at_level("WARNING", logger="zyx.tune"):
        assert fresh.get(_key()) is None
    assert str(path) in caplog.text and "ignored" in caplog.text
    assert [s.entry for s in fresh.entries()] == [None]
    fresh.put(_key(), _entry("512"))  # the search that follows replaces it
    assert TuningCache().get(_key()) == _entry("512")


def test_an_entry_under_another_key_is_a_miss(
    cache: TuningCache, caplog: pytest.LogCaptureFixture
) -> None:
    other = _changed_keys()["kernel structure"]
    cache.put(other, _entry())
    cache.folder.joinpath(other.name).rename(cache.folder / _key().name)
    with caplog.at_level("WARNING", logger="zyx.tune"):
        assert TuningCache().get(_key()) is None
    assert "another key" in caplog.text


def test_threads_storing_at_once_leave_whole_entries(cache: TuningCache) -> None:
    keys = [_key(f"kernel {i % 4}") for i in range(8)]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for round in range(40):
                cache.put(keys[i], _entry(str(round % 3)))
                assert TuningCache().get(keys[(i + 1) % 8]) in (None, *map(_entry, "012"))
        except BaseException as error:  # reported below, with the others
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    stored = cache.entries()
    assert len(stored) == 4 and all(s.entry in map(_entry, "012") for s in stored)
    assert sorted(p.name for p in cache.folder.iterdir()) == sorted(s.path.name for s in stored)


WRITER = """
import sys
from zyx.tuning import Entry, TuningCache
from tests_key import key
cache = TuningCache()
for round in range(60):
    cache.put(key, Entry(sys.argv[1], {sys.argv[1]: round}, "k", "host", 0.0))
    found = TuningCache().get(key)
    assert found is None or found.kernel == "k", found
"""


def test_processes_storing_one_key_at_once_leave_one_whole_entry(
    cache: TuningCache, tmp_path: Path
) -> None:
    key = _key()
    (tmp_path / "tests_key.py").write_text(
        "from zyx.tuning import Identity, Key\n"
        f"key = Key({key.kernel!r}, Identity(*{tuple(vars(key.identity).values())!r}), "
        f"{key.options!r}, {key.variants!r})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, variant], env=env, stderr=subprocess.PIPE)
        for variant in ("256", "128", "512", "256")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err.decode()
    found = TuningCache().get(key)
    assert found is not None and found.variant in ("256", "128", "512")
    assert [p.name for p in cache.folder.iterdir()] == [key.name]  # no temporary file left


def test_clear_forgets_memory_and_disk(cache: TuningCache) -> None:
    cache.put(_key(), _entry())
    cache.put(_key("another"), _entry())
    assert cache.clear() == 2
    assert cache.get(_key()) is None and cache.entries() == []
    assert cache.clear() == 0


def test_zyx_tune_shows_and_clears_the_cache(
    cache: TuningCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuning, "cache", cache)
    cache.put(_key(), _entry())
    cache.put(_key("damaged"), _entry())
    (cache.folder / _key("damaged").name).write_bytes(b"{")
    unranked = Key("a plugin's", _key().identity, (), ())  # no variants: no default to compare
    cache.put(unranked, Entry("plan 3", {"plan 3": 5}, "cudnn_plan", "host", 0.1))
    shown = CliRunner().invoke(app, ["tune"], env={"COLUMNS": "120"})
    assert shown.exit_code == 0, shown.output
    assert "3 entries" in shown.output and str(cache.folder) in shown.output
    row = next(line for line in shown.output.splitlines() if "r_sum" in line)
    assert row.split()[1:5] == ["host", "128", "1.29x", "3"]  # 900 ns / 700 ns
    assert "cudnn_plan" in shown.output and "1 unreadable" in shown.output
    cleared = CliRunner().invoke(app, ["tune", "--clear"])
    assert cleared.exit_code == 0 and "removed 3 entries" in cleared.output
    assert cache.entries() == [] and "0 entries" in CliRunner().invoke(app, ["tune"]).output
