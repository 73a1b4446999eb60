"""Configuration: the config file and the environment, read once, ``zyx.configure()`` on top,
validated against the sections of the backends that discovery found."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from zyx.config import (
    Config,
    RawConfig,
    Setting,
    Sources,
    read_sources,
    validate,
)
from zyx.errors import ConfigError
from zyx.plugins.discovery import Discovery
from zyx.plugins.records import BackendRecord, State

_log = logging.getLogger("zyx.dev")


class Settings:
    """The configuration of one registry (see ``zyx.config`` for the sources and their
    order). Not locked: its registry calls it under the registry's lock."""

    def __init__(self, environ: Mapping[str, str], discovery: Discovery) -> None:
        self._environ = environ
        self._discovery = discovery
        self._sources: Sources | None = None
        self._overrides: RawConfig = {}
        """What ``zyx.configure()`` set."""
        self._config: Config | None = None

    def setting(self, *path: str) -> Setting | None:
        """The value some source set at ``path`` (``("cuda", "enabled")``), unvalidated."""
        return (self._read_sources().raw | self._overrides).get(path)

    @property
    def config(self) -> Config:
        """The validated configuration (raises ``ConfigError`` while it is invalid). The
        first validation also enables or disables each unopened backend by its section."""
        if self._config is None:
            validated = self._validate(self._overrides)
            self._apply(validated)
            self._config = validated
            for warning in validated.warnings:
                _log.warning("config: %s", warning)
        return self._config

    def configure(self, changes: RawConfig) -> list[str]:
        """Override the file and the environment with ``changes``. Validated now: an invalid
        value raises ``ConfigError`` and changes nothing. The section of a backend whose
        devices are open can no longer change. Returns the warnings of the sections among
        ``changes`` that are ignored, as a config file's are (no installed backend owns
        them: a typo, or a backend not installed here)."""
        for path, setting in changes.items():
            record = self._discovery.find(path[0])
            if isinstance(record, BackendRecord) and record.devices is not None:
                raise ConfigError(
                    setting.source,
                    ".".join(path),
                    setting.value,
                    f"{path[0]} devices are open already; configure it before first use",
                )
        overrides, previous = self._overrides | changes, self._overrides
        self._validate(overrides)
        self._overrides, self._config = overrides, None
        imported = self._discovery.import_enabled()
        try:
            self.config  # noqa: B018 (validates, with the sections of what it imported)
        except ConfigError:
            # A plugin it enabled brought the section that refuses the change.
            self._overrides, self._config = previous, None
            for record in imported:
                self._discovery.unload(record)
            self.config  # noqa: B018 (as it was)
            raise
        sections = dict.fromkeys(path[0] for path in changes)  # each once, in order
        ignored = self.config.ignored
        return [ignored[name] for name in sections if name in ignored]

    def check(
        self, raw: RawConfig, files: tuple[Path, ...], *, name_unchecked: bool = False
    ) -> Config:
        """Validate ``raw`` against the sections of the backends found; where
        ``name_unchecked``, say which sections could not be checked, and why."""
        backends = self._discovery.backends()
        sections = {b.name: b.section for b in backends if b.section is not None}
        installed = {p.name for p in self._discovery.plugins()} | {b.name for b in backends}
        unchecked = self._unchecked() if name_unchecked else {}
        return validate(raw, sections, installed, files, unchecked)

    def _read_sources(self) -> Sources:
        """The config file and the environment, read on first need (whether a plugin is
        enabled, or validation): raises ``ConfigError`` if the file cannot be read."""
        if self._sources is None:
            self._sources = read_sources(self._environ)
        return self._sources

    def _validate(self, overrides: RawConfig) -> Config:
        sources = self._read_sources()
        return self.check(sources.raw | overrides, sources.files)

    def _unchecked(self) -> dict[str, str]:
        """Why the section of each plugin or backend that did not load has no model."""
        why: dict[str, str] = {}
        for plugin in self._discovery.plugins():
            if not plugin.usable:
                why[plugin.name] = (
                    f"plugin {plugin.name!r} is {plugin.state.value}: {plugin.reason}"
                )
            for backend in plugin.backends:
                if backend.section is None:
                    why[backend.name] = f"backend {backend.name!r} is quarantined: {backend.reason}"
        return why

    def _apply(self, cfg: Config) -> None:
        """Disable or enable each unopened backend by its section's ``enabled``."""
        for backend in self._discovery.backends():
            if backend.devices is not None or backend.state is State.QUARANTINED:
                continue
            if getattr(cfg.values, backend.name).enabled:
                backend.enable()
            else:
                source = cfg.source(backend.name, "enabled")
                backend.disable(f"{backend.name}.enabled = false in {source}")
