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

Switches, from the environment:

- ``ZYX_DISABLE_PLUGIN_AUTOLOAD=1`` loads no entry point, the host's included;
- ``ZYX_PLUGINS=cuda,opencl`` loads only the entry points named;
- ``<section>.enabled = false`` in any config source disables that backend, and also the
  plugin of the same name, which is then not imported at all.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pluggy
from pydantic import BaseModel, TypeAdapter, ValidationError

import zyx.hookspecs
from zyx.backend import Device
from zyx.config import (
    CONFIGURE,
    CORE_SECTIONS,
    DEVICE,
    SCALARS,
    BackendSection,
    Config,
    RawConfig,
    Sources,
    device_problem,
    flatten,
    read_sources,
    validate,
)
from zyx.errors import ConfigError, DeviceNotFoundError, PluginError, ZyxError
from zyx.hookspecs import BackendSpec, ProbeResult

ENTRY_POINT_GROUP = "zyx.backends"

_log = logging.getLogger("zyx.dev")
_API = re.compile(r"^(\d+)\.(\d+)$")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_FALSE = frozenset({"", "0", "false", "no", "off"})
_BOOL = TypeAdapter(bool)
_PLUGIN_FAILURES = (Exception, SystemExit)
"""What plugin code may raise that quarantines its plugin or backend. A plugin that calls
``sys.exit()`` must not end the process; ``KeyboardInterrupt`` is the user's, not the
plugin's failure, and passes through."""


class DeviceNameError(ZyxError, ValueError):
    """A string that is not a device string (``host``, ``cuda``, ``cuda:1``)."""


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
        self._entry_points = None if entry_points is None else list(entry_points)
        self._every_plugin = every_plugin
        self._lock = threading.RLock()
        self._manager = pluggy.PluginManager(zyx.hookspecs.PROJECT)
        self._manager.add_hookspecs(zyx.hookspecs)
        self._plugins: list[PluginRecord] | None = None
        self._sources: Sources | None = None
        self._overrides: RawConfig = {}
        self._config: Config | None = None
        self._warnings: list[str] = []
        self._owners: dict[str, str] = {}
        """Entry point names to what they name: a backend name that is one belongs to that
        plugin alone."""

    # -- discovery -------------------------------------------------------------------

    def plugins(self) -> list[PluginRecord]:
        """Every entry point found, imported or not, with its state. Discovers on first call.

        Raises ``ConfigError`` if the config file cannot be read (it may disable plugins).
        """
        with self._lock:
            if self._plugins is None:
                self._plugins = []
                for ep in self._find_entry_points():
                    self._plugins.append(self._load(ep))
            return self._plugins

    def backends(self) -> list[BackendRecord]:
        """Every backend of every imported plugin, probed, with its state.

        Raises ``ConfigError`` while the config is invalid: it decides which are enabled.
        """
        with self._lock:
            self._ensure_config()
            return [b for p in self.plugins() for b in p.backends]

    @property
    def config(self) -> Config:
        """The validated configuration (raises ``ConfigError`` while it is invalid)."""
        return self._ensure_config()

    @property
    def warnings(self) -> list[str]:
        """Problems that are not errors: config sections and ``ZYX_PLUGINS`` names for
        plugins that are not installed."""
        with self._lock:
            config = self._ensure_config()  # discovery first: it finds ZYX_PLUGINS' warnings
            return [*self._warnings, *config.warnings]

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        """The pluggy manager holding every loaded plugin (for compile-time hooks)."""
        self.plugins()
        return self._manager

    def _find_entry_points(self) -> list[EntryPoint]:
        if self._entry_points is None:
            candidates = list(entry_points(group=ENTRY_POINT_GROUP))
        else:
            candidates = self._entry_points
        # A fixed order makes "the first distribution to declare a name wins" reproducible.
        candidates = sorted(candidates, key=lambda ep: (ep.name, ep.value))
        names = {ep.name for ep in candidates}
        for ep in reversed(candidates):  # the first of a name is the one that loads
            self._owners[ep.name] = ep.value
        self._warnings = [
            f"ZYX_PLUGINS names {name!r}, which is not installed"
            for name in _split(self._environ.get("ZYX_PLUGINS", ""))
            if name not in names
        ]
        for warning in self._warnings:
            _log.warning(warning)
        return candidates

    def _load(self, ep: EntryPoint) -> PluginRecord:
        """Import, check and register one entry point's plugin and collect its backends."""
        record = PluginRecord(entry_point=ep)
        refusal = self._disabled_by(ep.name)
        if refusal:
            record.disable(refusal)
        elif any(p.name == ep.name for p in self._plugins or ()):
            record.quarantine(f"another distribution already declares a plugin {ep.name!r}")
        else:
            self._import(record)
        why = f": {record.reason}" if record.reason else ""
        _log.debug("plugin %s (%s): %s%s", ep.name, ep.value, record.state.value, why)
        return record

    def _import(self, record: PluginRecord) -> None:
        """Import, check and register the plugin and probe its backends; or quarantine it."""
        try:
            module = record.entry_point.load()
        except _PLUGIN_FAILURES as error:
            record.quarantine(f"import failed: {_describe(error)}", error)
            return
        refusal = _api_refusal(module)
        if refusal:
            record.quarantine(refusal)
            return
        try:
            self._manager.register(module, name=record.name)
        except _PLUGIN_FAILURES as error:
            record.quarantine(f"its hooks are invalid: {_describe(error)}", error)
            return
        try:
            specs = self._specs(module)
        except _PLUGIN_FAILURES as error:
            self._manager.unregister(module)
            record.quarantine(f"zyx_backends() failed: {_describe(error)}", error)
            return
        for spec in specs:  # one by one: each name is checked against those before it
            backend = self._probe(spec, record)
            record.backends.append(backend)
            if backend.state is State.QUARANTINED:
                _log.debug("backend %s quarantined: %s", backend.name, backend.reason)

    def _disabled_by(self, plugin: str) -> str:
        """What disables ``plugin`` before it is imported, or ``""``."""
        if self._every_plugin:
            return ""
        autoload = self._environ.get("ZYX_DISABLE_PLUGIN_AUTOLOAD", "")
        if autoload.strip().lower() not in _FALSE:
            return f"ZYX_DISABLE_PLUGIN_AUTOLOAD={autoload}"
        wanted = self._environ.get("ZYX_PLUGINS", "")
        if wanted.strip() and plugin not in _split(wanted):
            return f"ZYX_PLUGINS={wanted} (not listed)"
        enabled = (self._raw() | self._overrides).get((plugin, "enabled"))
        if enabled is not None and _is_false(enabled.value):
            return f"{plugin}.enabled = false in {enabled.source}"
        return ""

    def _specs(self, module: Any) -> list[BackendSpec]:
        """The plugin's own ``zyx_backends()``; a plugin may provide none (hooks only)."""
        hook = self._manager.hook.zyx_backends
        impls = [impl for impl in hook.get_hookimpls() if impl.plugin is module]
        specs: list[Any] = []
        for impl in impls:
            returned: Any = impl.function()
            specs.extend(returned)
        for spec in specs:
            if not isinstance(spec, BackendSpec):
                raise TypeError(f"it returned {spec!r}, not a BackendSpec")
        return specs

    def _probe(self, spec: BackendSpec, plugin: PluginRecord) -> BackendRecord:
        """A record for ``spec``, quarantined unless its name, config and probe are good."""
        record = BackendRecord(spec=spec, plugin=plugin.name)
        clash = self._name_clash(spec.name, plugin)
        if clash:
            record.quarantine(clash)
            return record
        refusal = _spec_refusal(spec)
        if refusal:
            record.quarantine(refusal)
            return record
        record.section, record.priority = spec.config, spec.priority
        try:
            probe: Any = spec.probe()
        except _PLUGIN_FAILURES as error:
            record.quarantine(f"probe failed: {_describe(error)}", error)
            return record
        if not (isinstance(probe, ProbeResult) and isinstance(probe.libraries, dict)):
            record.quarantine(f"its probe returned {probe!r}, not a ProbeResult")
            return record
        record.probe = probe
        if not probe.available:
            record.quarantine(probe.reason or "its probe found it unavailable")
        return record

    def _name_clash(self, name: str, plugin: PluginRecord) -> str:
        """Why ``name`` cannot name a new backend of ``plugin`` (it is a device prefix and a
        config section), or ``""``."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            return f"its name {name!r} is not a lowercase identifier such as 'cuda'"
        if name in CORE_SECTIONS | SCALARS or hasattr(BaseModel, name):
            return f"the name {name!r} belongs to zyx's own config"
        # Else a plugin sorting first could take over another's backend, zyx's own host too.
        owner = self._owners.get(name)
        if owner is not None and name != plugin.name:
            return f"the name {name!r} belongs to the installed plugin {name!r} ({owner})"
        # Every other plugin was refused the plugin's own name, whichever loaded first.
        rivals = [plugin] if owner is not None else [*(self._plugins or ()), plugin]
        for other in rivals:
            if any(b.name == name for b in other.backends):
                return f"plugin {other.name!r} already provides a backend {name!r}"
        return ""

    def _find(self, name: str) -> BackendRecord | PluginRecord | None:
        """The backend called ``name``, else the plugin (which may have failed to load)."""
        plugins = self.plugins()
        # A name that is an entry point's belongs to its plugin: others were refused it.
        holders = [p for p in plugins if p.name == name or name not in self._owners]
        backends = [b for p in holders for b in p.backends if b.name == name]
        return next(iter(backends), None) or next((p for p in plugins if p.name == name), None)

    # -- config ----------------------------------------------------------------------

    def configure(self, settings: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Set config values from code; they win over the file and the environment.

        ``configure(cuda={"device_ids": [0]}, default_device="cuda")``, or the same as one
        mapping. Validated now: an invalid value raises ``ConfigError`` and changes
        nothing. The section of a backend whose devices are open can no longer change.
        """
        with self._lock:
            changes = flatten({**(settings or {}), **fields}, CONFIGURE)
            for path, setting in changes.items():
                record = self._find(path[0])
                if isinstance(record, BackendRecord) and record.devices is not None:
                    raise ConfigError(
                        CONFIGURE,
                        ".".join(path),
                        setting.value,
                        f"{path[0]} devices are open already; configure it before first use",
                    )
            overrides, previous = self._overrides | changes, self._overrides
            self._validate(overrides)
            self._overrides, self._config = overrides, None
            imported = self._import_enabled()
            try:
                self._ensure_config()
            except ConfigError:
                # A plugin it enabled brought the section that refuses the change.
                self._overrides, self._config = previous, None
                for record in imported:
                    self._unload(record)
                self._ensure_config()
                raise

    def _unload(self, record: PluginRecord) -> None:
        """Set aside ``record``'s plugin, disabled as config has it (its module stays
        imported: Python cannot unimport it, but zyx no longer uses it)."""
        if self._manager.get_plugin(record.name) is not None:
            self._manager.unregister(name=record.name)
        record.backends.clear()
        record.disable(self._disabled_by(record.name))

    def _import_enabled(self) -> list[PluginRecord]:
        """Import the plugins that config had disabled before import and now enables;
        return them."""
        enabled = [
            record
            for record in self.plugins()
            if record.state is State.DISABLED and not self._disabled_by(record.name)
        ]
        for record in enabled:
            record.enable()
            self._import(record)
        return enabled

    def _raw(self) -> RawConfig:
        return self._read_sources().raw

    def _read_sources(self) -> Sources:
        """The config file and the environment, read on first need (whether a plugin is
        enabled, or validation): raises ``ConfigError`` if the file cannot be read."""
        if self._sources is None:
            self._sources = read_sources(self._environ)
        return self._sources

    def _ensure_config(self) -> Config:
        with self._lock:
            if self._config is None:
                validated = self._validate(self._overrides)
                self._apply(validated)
                self._config = validated
                for warning in validated.warnings:
                    _log.warning("config: %s", warning)
            return self._config

    def check_config(self, raw: RawConfig, files: tuple[Path, ...] = ()) -> Config:
        """Validate ``raw`` on its own (not merged with this process's sources) against the
        sections of every installed plugin: ``zyx config validate FILE``.

        Plugins that ``ZYX_PLUGINS``, ``ZYX_DISABLE_PLUGIN_AUTOLOAD`` or config disable are
        imported for it (in a registry of their own, not this one's); a section whose
        plugin fails to load is a warning that it was not checked, and so is a
        ``default_device`` that names no device the probes see (nothing is opened).
        """
        every = Registry(self._environ, self._entry_points, every_plugin=True)
        cfg = every._check(raw, files, name_unchecked=True)
        name = cfg.values.default_device
        problem = "" if name is None else every._no_device(cfg, name)
        if not problem:
            return cfg
        asked = f"default_device = {name!r} (from {cfg.source('default_device')})"
        return replace(cfg, warnings=(*cfg.warnings, f"{asked}: {problem}"))

    def _check(
        self, raw: RawConfig, files: tuple[Path, ...], *, name_unchecked: bool = False
    ) -> Config:
        """Validate ``raw`` against the sections of the backends found; where
        ``name_unchecked``, say which sections could not be checked, and why."""
        plugins = self.plugins()
        backends = [b for p in plugins for b in p.backends]
        sections = {b.name: b.section for b in backends if b.section is not None}
        installed = {p.name for p in plugins} | {b.name for b in backends}
        unchecked = self._unchecked() if name_unchecked else {}
        return validate(raw, sections, installed, files, unchecked)

    def _unchecked(self) -> dict[str, str]:
        """Why the section of each plugin or backend that did not load has no model."""
        why: dict[str, str] = {}
        for plugin in self.plugins():
            if not plugin.usable:
                why[plugin.name] = (
                    f"plugin {plugin.name!r} is {plugin.state.value}: {plugin.reason}"
                )
            for backend in plugin.backends:
                if backend.section is None:
                    why[backend.name] = f"backend {backend.name!r} is quarantined: {backend.reason}"
        return why

    def _no_device(self, cfg: Config, name: str) -> str:
        """Why device ``name`` is not there under ``cfg`` as far as the probes see, or ``""``."""
        backend_name, index = _parse(name)
        record = self._find(backend_name)
        if record is None:
            return self._not_installed(backend_name)
        if not record.usable:
            return f"{backend_name!r} is {record.state.value}: {record.reason}"
        if not isinstance(record, BackendRecord):
            return f"plugin {backend_name!r} provides no backend of that name"
        if not getattr(cfg.values, backend_name).enabled:
            return f"{backend_name}.enabled = false (from {cfg.source(backend_name, 'enabled')})"
        seen = record.probe.devices if record.probe is not None else 0
        if index is not None and index >= seen:
            return f"backend {backend_name!r} sees {seen} device(s), so no {name!r}"
        return ""

    def _validate(self, overrides: RawConfig) -> Config:
        sources = self._read_sources()
        return self._check(sources.raw | overrides, sources.files)

    def _apply(self, cfg: Config) -> None:
        """Disable or enable each unopened backend by its section's ``enabled``."""
        for backend in (b for p in self._plugins or () for b in p.backends):
            if backend.devices is not None or backend.state is State.QUARANTINED:
                continue
            if getattr(cfg.values, backend.name).enabled:
                backend.enable()
            else:
                source = cfg.source(backend.name, "enabled")
                backend.disable(f"{backend.name}.enabled = false in {source}")

    # -- devices ---------------------------------------------------------------------

    def devices(self) -> list[Device]:
        """The devices of every usable backend, highest priority first; opens backends."""
        with self._lock:
            return [device for b in self._ranked() if b.usable for device in self._open(b)]

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

    def choose(self, name: str | None = None) -> tuple[Device, list[str]]:
        """The device :meth:`device` returns for ``name``, and the reasons, one per step.

        An error for the configured ``default_device`` names the field and its source.
        """
        with self._lock:
            if name is not None:
                return self._named(name, f"{name!r} was asked for")
            name = self.config.values.default_device
            if name is None:
                return self._default([])
            asked = f"default_device = {name!r} (from {self.config.source('default_device')})"
            return self._named(name, asked, request=asked)

    def _named(self, name: str, why: str, request: str = "") -> tuple[Device, list[str]]:
        """The device ``name`` names, and ``why``; ``request`` prefixes its errors."""
        backend_name, index = _parse(name)
        backend = self._usable(backend_name, request)
        devices = self._open(backend)
        if not backend.usable:
            raise PluginError(backend_name, backend.reason, request=request) from backend.error
        if not devices:
            raise PluginError(backend_name, "it opened no device", request=request)
        if index is None:
            first = f"{devices[0].name} is the first of {backend_name}'s {len(devices)}"
            return devices[0], [why, first]
        chosen = [d for d in devices if d.index == index]
        if not chosen:
            raise DeviceNotFoundError(name, [d.name for d in devices], request=request)
        return chosen[0], [why]

    def _ranked(self) -> list[BackendRecord]:
        """Backends by priority, highest first; ties by name."""
        return sorted(self.backends(), key=lambda b: (-b.priority, b.name))

    def _default(self, why: list[str]) -> tuple[Device, list[str]]:
        """The first device of the highest-priority backend that opened one."""
        why.append("no default_device is configured: backends ranked by priority")
        for backend in self._ranked():
            devices = self._open(backend) if backend.usable else ()
            standing = f"{len(devices)} device(s)" if devices else backend.reason or "no devices"
            why.append(f"{backend.name} (priority {backend.priority}): {standing}")
            if devices:
                why.append(f"{devices[0].name} is the first device of {backend.name}")
                return devices[0], why
        raise PluginError("(default device)", "no backend opened a device; see `zyx doctor`")

    def _usable(self, name: str, request: str = "") -> BackendRecord:
        """The backend ``name`` if it is usable; else ``PluginError`` saying why."""
        self._ensure_config()
        record = self._find(name)
        if record is None:
            raise PluginError(name, self._not_installed(name), request=request)
        if record.state is State.DISABLED:
            raise PluginError(name, f"disabled by {record.reason}", request=request)
        if record.state is State.QUARANTINED:
            raise PluginError(name, record.reason, request=request) from record.error
        if not isinstance(record, BackendRecord):
            reason = f"plugin {name!r} provides no backend of that name"
            raise PluginError(name, reason, request=request)
        return record

    def _not_installed(self, name: str) -> str:
        installed = ", ".join(sorted({b.name for b in self.backends()})) or "none"
        return f"no backend {name!r} is installed (installed: {installed})"

    def _open(self, backend: BackendRecord) -> tuple[Device, ...]:
        """The backend's devices, opened on first need; a failure quarantines it."""
        if backend.devices is not None or not backend.usable:
            return backend.devices or ()
        try:
            devices = tuple(backend.spec.open(self.config.section(backend.name)))
            for device in devices:
                if not isinstance(device, Device):
                    raise TypeError(f"open() returned {device!r}, not a zyx.backend.Device")
        except _PLUGIN_FAILURES as error:
            backend.quarantine(f"open failed: {_describe(error)}", error)
            _log.debug("backend %s quarantined: %s", backend.name, backend.reason)
            return ()
        backend.devices = devices
        _log.debug("backend %s opened: %s", backend.name, [d.name for d in devices])
        return devices


def _api_refusal(module: object) -> str:
    """Why the plugin API version ``module`` declares is refused, or ``""``."""
    major, minor = zyx.hookspecs.PLUGIN_API_VERSION
    ours = f"zyx-core {zyx.__version__} has plugin API {major}.{minor}"
    declared = getattr(module, "ZYX_PLUGIN_API", None)
    if declared is None:
        return f"it does not declare ZYX_PLUGIN_API; {ours}"
    match = _API.match(declared) if isinstance(declared, str) else None
    if match is None:
        return f'ZYX_PLUGIN_API = {declared!r} is not "major.minor"; {ours}'
    their_major, their_minor = int(match[1]), int(match[2])
    if their_major != major:
        return f"it was written for plugin API {declared}; {ours} (major versions differ)"
    if their_minor > minor:
        return f"it was written for plugin API {declared}; {ours} (it needs a newer zyx-core)"
    return ""


def _spec_refusal(spec: BackendSpec) -> str:
    """Why ``spec``'s config section, priority or callables are unusable, or ``""``: zyx
    relies on them later, where a bad one would break every backend, not only this one."""
    section = spec.config
    if not (isinstance(section, type) and issubclass(section, BackendSection)):
        return f"its config {section!r} is not a subclass of zyx.config.BackendSection"
    try:
        section()
    except ValidationError as error:
        fields = ", ".join(".".join(map(str, e["loc"])) for e in error.errors())
        return f"its config section {section.__name__} has fields without defaults: {fields}"
    except _PLUGIN_FAILURES as error:  # a validator of its own that fails
        return f"its config section {section.__name__} fails on its defaults: {_describe(error)}"
    if not isinstance(spec.priority, int) or isinstance(spec.priority, bool):
        return f"its priority {spec.priority!r} is not an int"
    if not (callable(spec.probe) and callable(spec.open)):
        return "its probe and open must be callables"
    return ""


def _describe(error: BaseException) -> str:
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


def _is_false(value: Any) -> bool:
    """Whether ``value`` reads as ``False`` for a bool field (``0``, ``"off"``, ...)."""
    try:
        return _BOOL.validate_python(value) is False
    except ValidationError:
        return False  # not a bool at all: validating the config reports it


def _split(names: str) -> list[str]:
    return [name.strip() for name in names.split(",") if name.strip()]


def _parse(name: str) -> tuple[str, int | None]:
    """``"cuda:1"`` to ``("cuda", 1)``; ``"host"`` to ``("host", None)``."""
    match = DEVICE.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise DeviceNameError(f"{name!r} is {device_problem(name)}")
    return match[1], None if match[2] is None else int(match[2])


_registry: Registry | None = None
_registry_lock = threading.Lock()


def registry() -> Registry:
    """The process's registry, created on first call from ``os.environ``."""
    global _registry
    with _registry_lock:
        if _registry is None:
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

    ``zyx.configure(cuda={"device_ids": [0]}, default_device="cuda")``
    """
    registry().configure(settings, **fields)
