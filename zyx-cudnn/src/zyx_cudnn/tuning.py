"""The plans ``zyx_cudnn.plans`` timed fastest, kept across runs in zyx's tuning cache
(``zyx.tuning``: one JSON file per key in ``$ZYX_CACHE_DIR/tune``, which ``zyx tune`` lists
and clears), so that a later process rebuilds that one plan instead of building and timing
every candidate.

A plan is named by its ``Choice``: the engine id and knob values the frontend reports for it
(``pygraph.get_engine_and_knobs_at_index``), which ``pygraph.create_execution_plan``
replays. The key is complete: the spec (shapes, strides, offsets, dtypes, epilogue, ``tf32``),
the device (name, compute capability, driver, NVRTC), zyx's version, cuDNN's, the frontend's
and zyx-cudnn's, the heuristics asked for the candidates and the timed runs of each. An
entry whose winner does not read as a choice is a miss, logged; one whose plan no longer
builds is timed anew and replaced (``plans._tune``).
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from zyx import tuning
from zyx.tuning import Entry, Identity, Key, TuningCache
from zyx_cudnn.graphs import HEURISTICS
from zyx_cudnn.spec import Spec

log = logging.getLogger("zyx.tune.cudnn")

VARIANTS = tuple(f"cudnn heuristics {mode}" for mode in HEURISTICS)
"""The key's variants: the plans of these heuristic modes, which the versions in the key
determine."""

TIMED_ON = "normal"
"""What the plans are timed on (``zyx.search.fill_for_timing``): a standard normal sample.
In the key, so that winners chosen on the uninitialized buffers timed before are not
found."""


@dataclass(frozen=True)
class Choice:
    """One cuDNN plan of a graph: its engine and knob values."""

    engine: int
    knobs: tuple[tuple[int, int], ...]
    """``(knob type, value)`` pairs, sorted: the type as its number (``cudnn.knob_type``'s
    values are append-only, so a number names one type across versions)."""

    @classmethod
    def of(cls, engine: int, knobs: Mapping[Any, int]) -> Choice:
        """What ``get_engine_and_knobs_at_index`` returns, as plain data."""
        return cls(int(engine), tuple(sorted((int(k), int(v)) for k, v in knobs.items())))

    def knob_map(self, knob_type: Callable[[int], Any]) -> dict[Any, int]:
        """The knobs as ``create_execution_plan`` takes them; ``ValueError`` for a type
        ``knob_type`` does not know."""
        return {knob_type(k): v for k, v in self.knobs}

    def text(self) -> str:
        """The choice as JSON, as an entry holds it."""
        return json.dumps({"engine": self.engine, "knobs": [list(k) for k in self.knobs]})

    @classmethod
    def parse(cls, text: str) -> Choice | None:
        """The choice ``text`` holds, or ``None`` where it holds none."""
        try:
            data = json.loads(text)
            engine, knobs = data["engine"], data["knobs"]
            pairs = tuple((k, v) for k, v in knobs)
        except (ValueError, TypeError, KeyError, RecursionError):
            return None
        numbers = [engine, *(n for pair in pairs for n in pair)]
        if not all(type(n) is int for n in numbers):  # bool and float are not knobs
            return None
        return cls(engine, tuple(sorted(pairs)))


def libraries(cudnn: Any) -> tuple[str, ...]:
    """The versions of what builds and runs the plans besides the device's own: libcudnn,
    the frontend, zyx-cudnn."""
    ours = importlib.metadata.version("zyx-cudnn")
    return (f"cudnn {cudnn.backend_version()}", f"cudnn-frontend {cudnn.__version__}",
            f"zyx-cudnn {ours}")  # fmt: skip


def key(spec: Spec, identity: Identity, libraries: tuple[str, ...], runs: int) -> Key:
    """The tuning cache's key of ``spec`` on the device of ``identity``, with cuDNN's
    ``libraries`` and ``runs`` timed runs per plan on ``TIMED_ON`` data."""
    device = replace(identity, versions=(*identity.versions, *libraries))
    return Key(repr(spec), device, (("runs", runs), ("data", TIMED_ON)), VARIANTS)


def lookup(key: Key, disk: bool = True, cache: TuningCache | None = None) -> Choice | None:
    """The plan stored under ``key`` (on disk too where ``disk``; in ``cache``, else the
    process's tuning cache as it is now), or ``None``."""
    cache = tuning.cache if cache is None else cache
    entry = cache.get(key, disk=disk)
    if entry is None:
        return None
    choice = Choice.parse(entry.variant)
    if choice is None:
        log.warning("tuning cache: %r under %s is not a cuDNN plan: ignored", entry.variant,
                    cache.folder / key.name)  # fmt: skip
    return choice


def store(
    key: Key, winner: Choice, times: Mapping[Choice, int], kernel: str, device: str,
    seconds: float, disk: bool = True, cache: TuningCache | None = None,
) -> None:  # fmt: skip
    """Keep ``winner`` under ``key`` with what was measured (on disk too where ``disk``; in
    ``cache``, else the process's tuning cache as it is now): ``times`` in nanoseconds per
    plan, ``kernel`` and ``device`` named for ``zyx tune``."""
    cache = tuning.cache if cache is None else cache
    measured = {c.text(): ns for c, ns in times.items()}
    cache.put(key, Entry(winner.text(), measured, kernel, device, seconds), disk=disk)
