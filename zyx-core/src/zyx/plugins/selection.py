"""Device choice: backends opened on first need, and the device a name asks for, or the
config's ``default_device``, or else the first device of the highest-priority backend."""

from __future__ import annotations

import logging

from zyx.backend import Device
from zyx.config import DEVICE, Config, device_problem
from zyx.errors import DeviceNotFoundError, PluginError, ZyxError
from zyx.plugins.discovery import Discovery
from zyx.plugins.records import PLUGIN_FAILURES, BackendRecord, State, describe
from zyx.plugins.settings import Settings

_log = logging.getLogger("zyx.dev")


class DeviceNameError(ZyxError, ValueError):
    """A string that is not a device string (``host``, ``cuda``, ``cuda:1``)."""


Choice = tuple[Device, list[str]]
"""A device, and why it was chosen, one reason per step."""


class Selection:
    """The devices of one registry's backends. Not locked: its registry calls it under the
    registry's lock."""

    def __init__(self, discovery: Discovery, settings: Settings) -> None:
        self._discovery = discovery
        self._settings = settings

    def devices(self) -> list[Device]:
        """The devices of every usable backend, highest priority first; opens backends."""
        return [device for b in self._ranked() if b.usable for device in self._open(b)]

    def choose(self, name: str | None = None) -> Choice:
        """The device ``name`` names (``None``: the configured ``default_device``, else the
        best available), and why. An error for the configured ``default_device`` names the
        field and its source."""
        if name is not None:
            return self._named(name, f"{name!r} was asked for")
        config = self._settings.config
        name = config.values.default_device
        if name is None:
            return self._default([])
        asked = f"default_device = {name!r} (from {config.source('default_device')})"
        return self._named(name, asked, request=asked)

    def no_device(self, cfg: Config, name: str) -> str:
        """Why device ``name`` is not there under ``cfg`` as far as the probes see, or
        ``""``. Opens nothing."""
        backend_name, index = parse(name)
        record = self._discovery.find(backend_name)
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

    def _named(self, name: str, why: str, request: str = "") -> Choice:
        """The device ``name`` names, and ``why``; ``request`` prefixes its errors."""
        backend_name, index = parse(name)
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
        self._settings.config  # noqa: B018 (it decides which backends are enabled)
        return sorted(self._discovery.backends(), key=lambda b: (-b.priority, b.name))

    def _default(self, why: list[str]) -> Choice:
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
        self._settings.config  # noqa: B018 (it decides which backends are enabled)
        record = self._discovery.find(name)
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
        installed = ", ".join(sorted({b.name for b in self._discovery.backends()})) or "none"
        return f"no backend {name!r} is installed (installed: {installed})"

    def _open(self, backend: BackendRecord) -> tuple[Device, ...]:
        """The backend's devices, opened on first need; a failure quarantines it."""
        if backend.devices is not None or not backend.usable:
            return backend.devices or ()
        try:
            devices = tuple(backend.spec.open(self._settings.config.section(backend.name)))
            for device in devices:
                if not isinstance(device, Device):
                    raise TypeError(f"open() returned {device!r}, not a zyx.backend.Device")
        except PLUGIN_FAILURES as error:
            backend.quarantine(f"open failed: {describe(error)}", error)
            _log.debug("backend %s quarantined: %s", backend.name, backend.reason)
            return ()
        backend.devices = devices
        _log.debug("backend %s opened: %s", backend.name, [d.name for d in devices])
        return devices


def parse(name: str) -> tuple[str, int | None]:
    """``"cuda:1"`` to ``("cuda", 1)``; ``"host"`` to ``("host", None)``."""
    match = DEVICE.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise DeviceNameError(f"{name!r} is {device_problem(name)}")
    return match[1], None if match[2] is None else int(match[2])
