"""The tuning cache: the variant a kernel search chose, kept across runs.

An entry is one JSON file in ``cache_root() / "tune"`` (``$ZYX_CACHE_DIR/tune``, see
``zyx.cache``), named by the digest of its ``Key``. The key is complete, so that a winner
measured under other conditions never comes back: the kernel's structure (its IR and size
class, ``search.Space.key``), the device (backend, name, compute capability), what builds
and runs its kernels (driver and compiler with their versions, ``Device.versions``), the
zyx version, the search's options and the variants it chose among. The file holds the
key's parts too, and an entry whose parts differ from the key asked for is a miss.

Writes are atomic (a temporary file renamed into place): two processes or threads that
store at once leave one whole entry. An entry that cannot be read or parsed (a damaged
file, another version's format) is a miss logged on ``zyx.tune``, never an error, and the
search that follows replaces it.

Entries found or stored are also kept in memory, per process, so that a plan built again
(another shape, a plan the plan cache dropped) does not read the disk again; with
``autotune.cache`` off the memory is all there is.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zyx.cache import DiskCache, digest

if TYPE_CHECKING:
    from zyx.backend import Device

log = logging.getLogger("zyx.tune")

FORMAT = 1
"""The version of an entry's JSON layout; an entry of another is a miss."""

_ENTRY_NAME = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Identity:
    """What a kernel's time depends on besides the kernel itself."""

    backend: str
    name: str
    """The device's own name (``DeviceInfo.name``)."""
    compute_capability: tuple[int, int] | None
    versions: tuple[str, ...]
    """Driver, compiler and their versions (``Device.versions``)."""
    zyx: str

    @classmethod
    def of(cls, device: Device) -> Identity:
        from zyx import __version__

        info = device.info
        return cls(device.backend, info.name, info.compute_capability, device.versions, __version__)


@dataclass(frozen=True)
class Key:
    """Everything a search's result depends on."""

    kernel: str
    """The structure of what was searched (``search.Space.key``): its IR and sizes."""
    identity: Identity
    options: tuple[tuple[str, Any], ...]
    """The search's options (the ``autotune`` fields that change what it measures)."""
    variants: tuple[str, ...]
    """The variants it chose among (``repr`` of each), the default first."""

    def parts(self) -> dict[str, Any]:
        """The key as JSON data (the kernel's structure as its digest: it is long)."""
        parts = {
            "kernel": digest(self.kernel),
            "identity": asdict(self.identity),
            "options": dict(self.options),
            "variants": list(self.variants),
        }
        as_read: dict[str, Any] = json.loads(json.dumps(parts))  # tuples as lists, as a file has
        return as_read

    @property
    def name(self) -> str:
        """The entry's file name: a digest of every part."""
        return digest(json.dumps(self.parts(), sort_keys=True))


@dataclass(frozen=True)
class Entry:
    """A search's result: the winner and what it measured."""

    variant: str
    """``repr`` of the winning variant."""
    times: dict[str, int] = field(default_factory=dict)
    """Nanoseconds per variant timed (the best of its runs), by ``repr``."""
    kernel: str = ""
    """The kernel's name, for ``zyx tune``."""
    device: str = ""
    """The device's name, for ``zyx tune``."""
    seconds: float = 0.0
    """How long the search took, compiles included."""


@dataclass(frozen=True)
class Stored:
    """An entry on disk, as ``zyx tune`` lists it: ``entry`` is ``None`` where the file
    cannot be read as one."""

    path: Path
    entry: Entry | None
    parts: dict[str, Any]


class TuningCache:
    """Search results by key: in memory, and on disk where asked."""

    def __init__(self, name: str = "tune") -> None:
        self._disk = DiskCache(name)
        self._memory: dict[str, Entry] = {}
        self._lock = threading.Lock()

    @property
    def folder(self) -> Path:
        return self._disk.folder

    def get(self, key: Key, *, disk: bool = True) -> Entry | None:
        """The entry stored under ``key``: from memory, else (where ``disk``) from its file."""
        name = key.name
        with self._lock:
            found = self._memory.get(name)
        if found is not None or not disk:
            return found
        blob = self._disk.get(name)
        if blob is None:
            return None
        stored = _parse(self.folder / name, blob)
        if stored.entry is None:
            return None
        if stored.parts != key.parts():
            log.warning("tuning cache: %s was stored under another key: ignored", stored.path)
            return None
        with self._lock:
            self._memory[name] = stored.entry
        return stored.entry

    def put(self, key: Key, entry: Entry, *, disk: bool = True) -> None:
        """Keep ``entry`` under ``key`` in memory and, where ``disk``, in its file."""
        name = key.name
        with self._lock:
            self._memory[name] = entry
        if disk:
            document = {"format": FORMAT, "key": key.parts(), "entry": asdict(entry)}
            self._disk.put(name, json.dumps(document, indent=1).encode())

    def entries(self) -> list[Stored]:
        """Every entry on disk, by file name (unreadable ones with ``entry`` ``None``)."""
        try:
            paths = sorted(p for p in self.folder.iterdir() if _ENTRY_NAME.fullmatch(p.name))
        except OSError:
            return []
        found = []
        for path in paths:
            try:
                blob = path.read_bytes()
            except OSError as error:
                log.warning("tuning cache: cannot read %s: %s", path, error)
                found.append(Stored(path, None, {}))
                continue
            found.append(_parse(path, blob))
        return found

    def clear(self) -> int:
        """Forget every entry, in memory and on disk; the number of files removed."""
        with self._lock:
            self._memory.clear()
        removed = 0
        for stored in self.entries():
            try:
                stored.path.unlink()
                removed += 1
            except FileNotFoundError:  # another process cleared it first
                pass
        return removed


def _parse(path: Path, blob: bytes) -> Stored:
    """The entry a file holds; ``entry`` ``None`` (logged) where it holds none."""
    try:
        document = json.loads(blob)
        if document["format"] != FORMAT:
            raise ValueError(f"format {document['format']!r}, not {FORMAT}")
        parts = document["key"]
        if not isinstance(parts, dict) or not isinstance(parts["variants"], list):
            raise TypeError("its key is not an object with a list of variants")
        raw = document["entry"]
        entry = Entry(
            variant=str(raw["variant"]),
            times={str(k): int(v) for k, v in raw["times"].items()},
            kernel=str(raw["kernel"]),
            device=str(raw["device"]),
            seconds=float(raw["seconds"]),
        )
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:
        log.warning("tuning cache: %s is not an entry (%s): ignored", path, error)
        return Stored(path, None, {})
    return Stored(path, entry, parts)


cache = TuningCache()
"""The process's tuning cache."""
