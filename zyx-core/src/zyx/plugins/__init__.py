"""Backend discovery: entry points in group ``zyx.backends``, loaded through pluggy.

Nothing here runs at ``import zyx``. The first call that needs devices reads the entry
points, imports each plugin, checks the plugin API version it declares, collects its
``BackendSpec``s, reads the config and probes the backends; a backend is opened when its
devices are first needed.

Whatever fails on the way (an import, a missing shared library, an incompatible API
version, a probe or an ``open`` that raises, plugin code that calls ``sys.exit()``)
quarantines that plugin or backend with its reason and the exception; every other backend
keeps working. Asking for a quarantined backend by name raises ``PluginError`` chained to
the original exception: zyx never replaces a backend it was asked for by another one. A
backend name that is an entry point's name belongs to that plugin alone.

A ``Registry`` is three parts, one concern each: ``discovery`` (finding, importing and
quarantining plugins; the environment's switches), ``settings`` (the configuration) and
``selection`` (opening backends and choosing devices). The registry holds the lock that
makes them safe to use from any thread.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import replace
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pluggy

from zyx import debug
from zyx.backend import Device
from zyx.config import CONFIGURE, Config, RawConfig, Setting, flatten
from zyx.errors import ConfigWarning
from zyx.plugins.discovery import ENTRY_POINT_GROUP, Discovery
from zyx.plugins.records import BackendRecord, PluginRecord, Standing, State
from zyx.plugins.selection import Choice, DeviceNameError, Selection
from zyx.plugins.settings import Settings

_log = logging.getLogger("zyx.dev")

__all__ = [
    "ENTRY_POINT_GROUP", "BackendRecord", "DeviceNameError", "PluginRecord", "Registry",
    "Standing", "State", "configure", "device", "devices", "registry",
]  # fmt: skip


class Registry:
    """The plugins and backends of one process (see :func:`registry`).

    Construct one explicitly to look at another environment: ``environ`` replaces
    ``os.environ`` (switches, config variables, the config file's location) and
    ``entry_points`` replaces the installed entry points of group ``zyx.backends``.
    ``every_plugin`` imports every plugin installed, whatever ``ZYX_PLUGINS``,
    ``ZYX_DISABLE_PLUGIN_AUTOLOAD`` or config say: to check config against all of them.
    """

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        entry_points: Iterable[EntryPoint] | None = None,
        *,
        every_plugin: bool = False,
    ) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self._lock = threading.RLock()
        self._discovery = Discovery(
            self._environ, entry_points, self._enabled, every_plugin=every_plugin
        )
        self._settings = Settings(self._environ, self._discovery)
        self._selection = Selection(self._discovery, self._settings)

    def plugins(self) -> list[PluginRecord]:
        """Every entry point found, imported or not, with its state. Discovers on first call.

        Raises ``ConfigError`` if the config file cannot be read (it may disable plugins).
        """
        with self._lock:
            return self._discovery.plugins()

    def backends(self) -> list[BackendRecord]:
        """Every backend of every imported plugin, probed, with its state.

        Raises ``ConfigError`` while the config is invalid: it decides which are enabled.
        """
        with self._lock:
            self._settings.config  # noqa: B018 (it enables and disables the backends)
            return self._discovery.backends()

    @property
    def config(self) -> Config:
        """The validated configuration (raises ``ConfigError`` while it is invalid)."""
        with self._lock:
            return self._settings.config

    @property
    def warnings(self) -> list[str]:
        """Problems that are not errors: config sections and ``ZYX_PLUGINS`` names for
        plugins that are not installed."""
        with self._lock:
            config = self._settings.config  # discovery first: it finds ZYX_PLUGINS' warnings
            return [*self._discovery.warnings, *config.warnings]

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        """The pluggy manager holding every loaded plugin (for compile-time hooks)."""
        self.plugins()
        return self._discovery.manager

    def configure(self, settings: Mapping[str, Any] | None = None, /, **fields: Any) -> list[str]:
        """Set config values from code; they win over the file and the environment.

        ``configure(cuda={"device_ids": [0]}, default_device="cuda")``, or the same as one
        mapping. Validated now: an invalid value raises ``ConfigError`` and changes
        nothing. The section of a backend whose devices are open can no longer change.
        Returns the warnings of the sections it ignores, as a config file's: those no
        installed backend owns (``hots``, ``tpu``).
        """
        with self._lock:
            return self._settings.configure(flatten({**(settings or {}), **fields}, CONFIGURE))

    def check_config(self, raw: RawConfig, files: tuple[Path, ...] = ()) -> Config:
        """Validate ``raw`` on its own (not merged with this process's sources) against the
        sections of every installed plugin: ``zyx config validate FILE``.

        Plugins that ``ZYX_PLUGINS``, ``ZYX_DISABLE_PLUGIN_AUTOLOAD`` or config disable are
        imported for it (in a registry of their own, not this one's); a section whose
        plugin fails to load is a warning that it was not checked, and so is a
        ``default_device`` that names no device the probes see (nothing is opened).
        """
        every = Registry(self._environ, self._discovery.entry_points, every_plugin=True)
        cfg = every._settings.check(raw, files, name_unchecked=True)
        name = cfg.values.default_device
        problem = "" if name is None else every._selection.no_device(cfg, name)
        if not problem:
            return cfg
        asked = f"default_device = {name!r} (from {cfg.source('default_device')})"
        return replace(cfg, warnings=(*cfg.warnings, f"{asked}: {problem}"))

    def devices(self) -> list[Device]:
        """The devices of every usable backend, highest priority first; opens backends."""
        with self._lock:
            return self._selection.devices()

    def device(self, name: str | None = None) -> Device:
        """The device ``name`` names (``cuda``, ``cuda:1``, ``host``), opening its backend.

        ``None`` means ``default_device`` from the config, else the first device of the
        backend with the highest priority. A backend that is not usable raises
        ``PluginError``, chained to the failure that quarantined it; an index the backend
        does not have raises ``DeviceNotFoundError``. Why the device was
        chosen is logged on ``zyx.dev`` (``ZYX_DEBUG=1``) and shown by ``zyx doctor --explain``.
        """
        device, why = self.choose(name)
        _log.debug("device %s chosen: %s", device.name, why)
        return device

    def choose(self, name: str | None = None) -> Choice:
        """The device :meth:`device` returns for ``name``, and the reasons, one per step.

        An error for the configured ``default_device`` names the field and its source.
        """
        with self._lock:
            return self._selection.choose(name)

    def _enabled(self, plugin: str) -> Setting | None:
        return self._settings.setting(plugin, "enabled")


_registry: Registry | None = None
_registry_lock = threading.Lock()


def registry() -> Registry:
    """The process's registry, created on first call from ``os.environ``; ``ZYX_DEBUG``
    turns its logging channels on then (``zyx.debug.setup``), not at ``import zyx``."""
    global _registry
    with _registry_lock:
        if _registry is None:
            debug.setup()
            _registry = Registry()
        return _registry


def devices() -> list[Device]:
    """Every device of every usable backend, highest priority first."""
    return registry().devices()


def device(name: str | None = None) -> Device:
    """The device ``name`` names: ``"host"``, ``"cuda"``, ``"cuda:1"``, ``"opencl:0"``.

    ``None``: the configured ``default_device``, else the best device available.
    """
    return registry().device(name)


def configure(settings: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
    """Set config values from code; they win over the config file and the environment.

    ``zyx.configure(cuda={"device_ids": [0]}, default_device="cuda")``. A section no
    installed backend owns is ignored with a ``ConfigWarning`` at the caller, as a config
    file's is with a warning that ``zyx doctor`` shows (a typo such as ``hots``, or a
    backend not installed here: code written for CUDA machines still runs elsewhere).
    """
    for note in registry().configure(settings, **fields):
        warnings.warn(note, ConfigWarning, stacklevel=2)
