"""Discovery and quarantine: the entry points of group ``zyx.backends``, each imported,
checked, registered with pluggy and its backends probed, or set aside with the reason.

Switches, from the environment (read here, before anything is imported):

- ``ZYX_DISABLE_PLUGIN_AUTOLOAD=1`` loads no entry point, the host's included (``0`` or
  unset loads them; ``true``/``false``, ``yes``/``no``, ``on``/``off`` too; any other value
  is a ``ConfigError``, as it would be in a config file);
- ``ZYX_PLUGINS=cuda,opencl`` loads only the entry points named;
- ``<section>.enabled = false`` in any config source disables the plugin of that name,
  which is then not imported at all.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy
from pydantic import BaseModel, TypeAdapter, ValidationError

import zyx
import zyx.hookspecs
from zyx.config import CORE_SECTIONS, SCALARS, BackendSection, Setting
from zyx.errors import ConfigError
from zyx.hookspecs import BackendSpec, ProbeResult
from zyx.plugins.records import (
    PLUGIN_FAILURES,
    BackendRecord,
    PluginRecord,
    State,
    describe,
)

ENTRY_POINT_GROUP = "zyx.backends"

_log = logging.getLogger("zyx.dev")
_API = re.compile(r"^(\d+)\.(\d+)$")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_FALSE = frozenset({"", "0", "false", "no", "off"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_BOOL = TypeAdapter(bool)

EnabledSetting = Callable[[str], Setting | None]
"""The config's ``<plugin>.enabled`` setting, from any source, or ``None`` where unset."""


class Discovery:
    """The plugins of one environment, found on the first call of :meth:`plugins`.

    ``entry_points`` replaces the installed ones; ``every_plugin`` imports every plugin
    installed, whatever the switches say (to check config against all of them).
    ``enabled`` reads a plugin's ``enabled`` setting, which may keep it from being imported.
    Not locked: its registry calls it under the registry's lock.
    """

    def __init__(
        self,
        environ: Mapping[str, str],
        entry_points: Iterable[EntryPoint] | None,
        enabled: EnabledSetting,
        *,
        every_plugin: bool = False,
    ) -> None:
        self.environ = environ
        self.entry_points = None if entry_points is None else list(entry_points)
        self.every_plugin = every_plugin
        self._enabled = enabled
        self.manager = pluggy.PluginManager(zyx.hookspecs.PROJECT)
        self.manager.add_hookspecs(zyx.hookspecs)
        self._plugins: list[PluginRecord] | None = None
        self.warnings: list[str] = []
        """``ZYX_PLUGINS`` names of plugins that are not installed."""
        self._owners: dict[str, str] = {}
        """Entry point names to what they name: a backend name that is one belongs to that
        plugin alone."""

    def plugins(self) -> list[PluginRecord]:
        """Every entry point found, imported or not, with its state."""
        if self._plugins is None:
            self._plugins = []
            for ep in self._find_entry_points():
                self._plugins.append(self._load(ep))
        return self._plugins

    def backends(self) -> list[BackendRecord]:
        """Every backend of every imported plugin, with its state."""
        return [b for p in self.plugins() for b in p.backends]

    def find(self, name: str) -> BackendRecord | PluginRecord | None:
        """The backend called ``name``, else the plugin (which may have failed to load)."""
        plugins = self.plugins()
        # A name that is an entry point's belongs to its plugin: others were refused it.
        holders = [p for p in plugins if p.name == name or name not in self._owners]
        backends = [b for p in holders for b in p.backends if b.name == name]
        return next(iter(backends), None) or next((p for p in plugins if p.name == name), None)

    def import_enabled(self) -> list[PluginRecord]:
        """Import the plugins that config had disabled before import and now enables;
        return them."""
        enabled = [
            record
            for record in self.plugins()
            if record.state is State.DISABLED and not self.disabled_by(record.name)
        ]
        for record in enabled:
            record.enable()
            self._import(record)
        return enabled

    def unload(self, record: PluginRecord) -> None:
        """Set aside ``record``'s plugin, disabled as config has it (its module stays
        imported: Python cannot unimport it, but zyx no longer uses it)."""
        if self.manager.get_plugin(record.name) is not None:
            self.manager.unregister(name=record.name)
        record.backends.clear()
        record.disable(self.disabled_by(record.name))

    def disabled_by(self, plugin: str) -> str:
        """What disables ``plugin`` before it is imported, or ``""``."""
        if self.every_plugin:
            return ""
        autoload = self.environ.get("ZYX_DISABLE_PLUGIN_AUTOLOAD", "")
        if _autoload_off(autoload):
            return f"ZYX_DISABLE_PLUGIN_AUTOLOAD={autoload}"
        wanted = self.environ.get("ZYX_PLUGINS", "")
        if wanted.strip() and plugin not in _split(wanted):
            return f"ZYX_PLUGINS={wanted} (not listed)"
        enabled = self._enabled(plugin)
        if enabled is not None and _is_false(enabled.value):
            return f"{plugin}.enabled = false in {enabled.source}"
        return ""

    def _find_entry_points(self) -> list[EntryPoint]:
        if self.entry_points is None:
            candidates = list(entry_points(group=ENTRY_POINT_GROUP))
        else:
            candidates = self.entry_points
        # A fixed order makes "the first distribution to declare a name wins" reproducible.
        candidates = sorted(candidates, key=lambda ep: (ep.name, ep.value))
        names = {ep.name for ep in candidates}
        for ep in reversed(candidates):  # the first of a name is the one that loads
            self._owners[ep.name] = ep.value
        self.warnings = [
            f"ZYX_PLUGINS names {name!r}, which is not installed"
            for name in _split(self.environ.get("ZYX_PLUGINS", ""))
            if name not in names
        ]
        for warning in self.warnings:
            _log.warning(warning)
        return candidates

    def _load(self, ep: EntryPoint) -> PluginRecord:
        """Import, check and register one entry point's plugin and collect its backends."""
        record = PluginRecord(entry_point=ep)
        refusal = self.disabled_by(ep.name)
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
        except PLUGIN_FAILURES as error:
            record.quarantine(f"import failed: {describe(error)}", error)
            return
        refusal = _api_refusal(module)
        if refusal:
            record.quarantine(refusal)
            return
        try:
            self.manager.register(module, name=record.name)
        except PLUGIN_FAILURES as error:
            record.quarantine(f"its hooks are invalid: {describe(error)}", error)
            return
        try:
            specs = self._specs(module)
        except PLUGIN_FAILURES as error:
            self.manager.unregister(module)
            record.quarantine(f"zyx_backends() failed: {describe(error)}", error)
            return
        for spec in specs:  # one by one: each name is checked against those before it
            backend = self._probe(spec, record)
            record.backends.append(backend)
            if backend.state is State.QUARANTINED:
                _log.debug("backend %s quarantined: %s", backend.name, backend.reason)

    def _specs(self, module: Any) -> list[BackendSpec]:
        """The plugin's own ``zyx_backends()``; a plugin may provide none (hooks only).

        Its implementations are called one plugin at a time, not through pluggy's
        ``hook.zyx_backends()``: that call runs every plugin's and stops at the first that
        raises, so one broken plugin would hide the backends of all the others, and the
        error would not say whose it was."""
        hook = self.manager.hook.zyx_backends
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
        except PLUGIN_FAILURES as error:
            record.quarantine(f"probe failed: {describe(error)}", error)
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
    except PLUGIN_FAILURES as error:  # a validator of its own that fails
        return f"its config section {section.__name__} fails on its defaults: {describe(error)}"
    if not isinstance(spec.priority, int) or isinstance(spec.priority, bool):
        return f"its priority {spec.priority!r} is not an int"
    if not (callable(spec.probe) and callable(spec.open)):
        return "its probe and open must be callables"
    return ""


def _autoload_off(text: str) -> bool:
    """Whether ``ZYX_DISABLE_PLUGIN_AUTOLOAD``'s ``text`` turns autoloading off. A value that
    is no boolean is a ``ConfigError``: ``junk`` turned it off, silently."""
    word = text.strip().lower()
    if word in _TRUE | _FALSE:
        return word in _TRUE
    problem = "must be 1 (load no plugin) or 0 (load them), or unset"
    raise ConfigError("ZYX_DISABLE_PLUGIN_AUTOLOAD", "(plugin autoload)", text, problem)


def _is_false(value: Any) -> bool:
    """Whether ``value`` reads as ``False`` for a bool field (``0``, ``"off"``, ...)."""
    try:
        return _BOOL.validate_python(value) is False
    except ValidationError:
        return False  # not a bool at all: validating the config reports it


def _split(names: str) -> list[str]:
    return [name.strip() for name in names.split(",") if name.strip()]
