"""What the registry knows of each plugin and backend: its state, and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from importlib.metadata import EntryPoint

from pydantic import BaseModel

from zyx.backend import Device
from zyx.hookspecs import BackendSpec, ProbeResult

PLUGIN_FAILURES = (Exception, SystemExit)
"""What plugin code may raise that quarantines its plugin or backend. A plugin that calls
``sys.exit()`` must not end the process; ``KeyboardInterrupt`` is the user's, not the
plugin's failure, and passes through."""


class State(Enum):
    """Where a plugin or backend stands."""

    LOADED = "loaded"
    QUARANTINED = "quarantined"
    DISABLED = "disabled"


@dataclass
class Standing:
    """State, and why: the quarantine reason, or what disabled it. Keeps the exception."""

    state: State = State.LOADED
    reason: str = ""
    error: BaseException | None = None

    def quarantine(self, reason: str, error: BaseException | None = None) -> None:
        self.state, self.reason, self.error = State.QUARANTINED, reason, error

    def disable(self, by: str) -> None:
        self.state, self.reason, self.error = State.DISABLED, by, None

    def enable(self) -> None:
        self.state, self.reason, self.error = State.LOADED, "", None

    @property
    def usable(self) -> bool:
        return self.state is State.LOADED


@dataclass(kw_only=True)
class BackendRecord(Standing):
    """One backend a plugin provides; ``devices`` is ``None`` until it is opened."""

    spec: BackendSpec
    plugin: str
    section: type[BaseModel] | None = None
    """The config section model, once it is known to be a usable one."""
    priority: int = 0
    """The spec's priority, once it is known to be an int."""
    probe: ProbeResult | None = None
    devices: tuple[Device, ...] | None = None

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(kw_only=True)
class PluginRecord(Standing):
    """One entry point of group ``zyx.backends``."""

    entry_point: EntryPoint
    backends: list[BackendRecord] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.entry_point.name

    @property
    def target(self) -> str:
        """What the entry point names: ``zyx_cuda.plugin``."""
        return self.entry_point.value

    @property
    def distribution(self) -> str:
        """``name version`` of the distribution that declares it (``""``: none known)."""
        dist = self.entry_point.dist
        return f"{dist.name} {dist.version}" if dist is not None else ""


def describe(error: BaseException) -> str:
    """``Type: message`` of ``error`` and of each exception it was raised from."""
    parts: list[str] = []
    current: BaseException | None = error
    while current is not None and len(parts) < 8:
        parts.append(f"{type(current).__name__}: {_message(current)}")
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return "; caused by ".join(parts)


def _message(error: BaseException) -> str:
    """``error``'s message, or what it means where it has none (``MemoryError()``)."""
    if isinstance(error, SystemExit):  # its message is its exit code, often None
        return f"it called sys.exit({error.code!r})"
    if str(error):
        return str(error)
    return "out of memory" if isinstance(error, MemoryError) else "(no message)"
