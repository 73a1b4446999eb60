"""The registry, in process, with explicit entry points: the host's own and ones whose
module does not exist. (Installed third-party plugins: test_installed_plugins.py.)"""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from zyx_test_badspecs import Plain

from zyx.errors import ConfigError, DeviceNotFoundError, PluginError, ZyxError
from zyx.host.pool import HostPool
from zyx.plugins import ENTRY_POINT_GROUP, DeviceNameError, Registry, State

HOST = EntryPoint("host", "zyx.host.plugin", ENTRY_POINT_GROUP)
MISSING = EntryPoint("missing", "zyx_missing_backend.plugin", ENTRY_POINT_GROUP)


def make(environ: dict[str, str], *eps: EntryPoint) -> Registry:
    return Registry(environ, entry_points=eps or (HOST,))


def test_host_is_found_through_its_entry_point_and_opened_on_first_need(
    environ: dict[str, str],
) -> None:
    reg = make(environ)
    (backend,) = reg.backends()
    assert (backend.name, backend.plugin, backend.state) == ("host", "host", State.LOADED)
    assert backend.devices is None, "probing must not open"
    (host,) = reg.devices()
    assert host.backend == "host" and isinstance(host.pool, HostPool)
    assert reg.device("host") is reg.device("host:0") is reg.device() is host
    assert reg.plugin_manager.get_plugin("host") is not None


def test_failing_import_is_quarantined_and_others_keep_working(environ: dict[str, str]) -> None:
    reg = make(environ, HOST, MISSING)
    states = {p.name: p.state for p in reg.plugins()}
    assert states == {"host": State.LOADED, "missing": State.QUARANTINED}
    assert [d.backend for d in reg.devices()] == ["host"]
    with pytest.raises(PluginError, match="No module named 'zyx_missing_backend'") as caught:
        reg.device("missing")
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)


def test_unknown_backend_names_the_installed_ones(environ: dict[str, str]) -> None:
    with pytest.raises(PluginError, match=r"no backend 'cuda' is installed \(installed: host\)"):
        make(environ).device("cuda:1")


def test_missing_device_index_is_not_an_unavailable_backend(environ: dict[str, str]) -> None:
    with pytest.raises(DeviceNotFoundError) as caught:
        make(environ).device("host:1")
    assert str(caught.value) == "backend 'host' has no device 'host:1' (its devices: host)"
    assert isinstance(caught.value, LookupError) and caught.value.devices == ("host",)


def test_a_bad_default_device_names_the_field_and_its_source(environ: dict[str, str]) -> None:
    path = Path(environ["XDG_CONFIG_HOME"]) / "zyx" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"default_device": "host:3"}')
    reg = make(environ)
    with pytest.raises(DeviceNotFoundError) as missing:
        reg.device()
    assert str(missing.value) == (
        f"default_device = 'host:3' (from {path}): "
        "backend 'host' has no device 'host:3' (its devices: host)"
    )
    reg.configure(default_device="nosuch")
    with pytest.raises(PluginError) as unknown:
        reg.device()
    assert str(unknown.value) == (
        "default_device = 'nosuch' (from zyx.configure()): backend plugin 'nosuch' is "
        "unavailable: no backend 'nosuch' is installed (installed: host)"
    )
    assert reg.device("host").name == "host"  # an explicit request does not read it


@pytest.mark.parametrize(
    "name", ["", "Host", "host:", "host:x", "cuda:-1", ":0", "host\n", "host:\u0661", 0, b"host"]
)
def test_malformed_device_strings_are_refused(environ: dict[str, str], name: object) -> None:
    with pytest.raises(DeviceNameError, match="is not a device string") as caught:
        make(environ).device(name)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ZyxError)


def test_autoload_off_loads_nothing(environ: dict[str, str]) -> None:
    reg = make({**environ, "ZYX_DISABLE_PLUGIN_AUTOLOAD": "1"}, HOST, MISSING)
    assert {(p.state, p.reason) for p in reg.plugins()} == {
        (State.DISABLED, "ZYX_DISABLE_PLUGIN_AUTOLOAD=1")
    }
    assert reg.devices() == []
    with pytest.raises(PluginError, match="disabled by ZYX_DISABLE_PLUGIN_AUTOLOAD=1"):
        reg.device("host")


@pytest.mark.parametrize(
    ("value", "off"), [("true", True), ("On", True), ("0", False), ("no", False)]
)
def test_autoload_takes_the_boolean_words(environ: dict[str, str], value: str, off: bool) -> None:
    reg = make({**environ, "ZYX_DISABLE_PLUGIN_AUTOLOAD": value}, HOST)
    assert [p.state for p in reg.plugins()] == [State.DISABLED if off else State.LOADED]


def test_autoload_set_to_anything_else_is_a_config_error(environ: dict[str, str]) -> None:
    """``junk`` turned autoloading off, silently."""
    reg = make({**environ, "ZYX_DISABLE_PLUGIN_AUTOLOAD": "junk"}, HOST)
    with pytest.raises(ConfigError) as caught:
        reg.device()
    assert caught.value.source == "ZYX_DISABLE_PLUGIN_AUTOLOAD" and caught.value.value == "junk"


def test_zyx_plugins_loads_only_those_listed(environ: dict[str, str]) -> None:
    reg = make({**environ, "ZYX_PLUGINS": "host, ghost"}, HOST, MISSING)
    missing = {p.name: p for p in reg.plugins()}["missing"]
    assert missing.state is State.DISABLED
    assert missing.reason == "ZYX_PLUGINS=host, ghost (not listed)"
    assert [d.backend for d in reg.devices()] == ["host"]
    assert reg.warnings == ["ZYX_PLUGINS names 'ghost', which is not installed"]


def test_config_disables_a_plugin_before_importing_it(environ: dict[str, str]) -> None:
    reg = make({**environ, "ZYX_MISSING__ENABLED": "false"}, HOST, MISSING)
    missing = {p.name: p for p in reg.plugins()}["missing"]
    assert (missing.state, missing.reason) == (
        State.DISABLED,
        "missing.enabled = false in ZYX_MISSING__ENABLED",
    )


def test_config_disables_a_backend(environ: dict[str, str]) -> None:
    reg = make({**environ, "ZYX_HOST__ENABLED": "false"})
    assert reg.devices() == []
    with pytest.raises(PluginError, match="disabled by host.enabled = false in ZYX_HOST__"):
        reg.device("host")


def test_configure_reenables_a_backend_disabled_by_the_environment(
    environ: dict[str, str],
) -> None:
    reg = make({**environ, "ZYX_HOST__ENABLED": "false"})
    assert reg.devices() == []
    reg.configure(host={"enabled": True})
    assert [d.backend for d in reg.devices()] == ["host"]


def test_second_distribution_with_the_same_plugin_name_is_quarantined(
    environ: dict[str, str],
) -> None:
    twin = EntryPoint("host", "zyx_other_host.plugin", ENTRY_POINT_GROUP)
    reg = make(environ, HOST, twin)
    first, second = reg.plugins()
    assert (first.target, first.state) == ("zyx.host.plugin", State.LOADED)
    assert second.state is State.QUARANTINED and "already declares" in second.reason


def test_default_device_from_config_is_an_explicit_request(environ: dict[str, str]) -> None:
    reg = make({**environ, "ZYX_DEFAULT_DEVICE": "missing"}, HOST, MISSING)
    with pytest.raises(PluginError, match="missing"):
        reg.device()


def test_backend_names_that_cannot_be_sections_are_quarantined(environ: dict[str, str]) -> None:
    plugin = EntryPoint("badnames", "zyx_test_badnames", ENTRY_POINT_GROUP)
    reg = make(environ, HOST, plugin)
    backends = [b for b in reg.backends() if b.plugin == "badnames"]
    assert backends[-1].reason == "plugin 'badnames' already provides a backend 'fine'"
    states = {b.name: (b.state, b.reason) for b in backends[:-1]}
    assert states["copy"] == (State.QUARANTINED, "the name 'copy' belongs to zyx's own config")
    assert states["autotune"][0] is State.QUARANTINED
    assert "not a lowercase identifier" in states["Bad-Name"][1]
    assert states["fine"] == (State.LOADED, "")
    assert reg.config.source("fine", "enabled") == "default"
    assert reg.device("host").backend == "host"


BADSPECS = EntryPoint("badspecs", "zyx_test_badspecs", ENTRY_POINT_GROUP)


def test_a_wrongly_declared_backend_is_quarantined_and_every_other_works(
    environ: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="zyx.dev"):
        reg = make(environ, HOST, BADSPECS)
        reasons = {b.name: b.reason for b in reg.backends() if b.state is State.QUARANTINED}
    for name, reason in reasons.items():
        assert f"backend {name} quarantined: {reason}" in caplog.messages, "ZYX_DEBUG=1 says"
    assert reasons == {
        "plain": f"its config {Plain!r} is not a subclass of zyx.config.BackendSection",
        "required": "its config section Required has fields without defaults: path",
        "raising": "its config section Raising fails on its defaults: "
        "TypeError: a validator with a bug",
        "unranked": "its priority None is not an int",
        "nothing": "its probe returned None, not a ProbeResult",
        "nolibraries": "its probe returned ProbeResult(available=True, devices=1, reason='', "
        "libraries=None), not a ProbeResult",
    }
    assert [d.backend for d in reg.devices()] == ["host"]
    assert reg.device().backend == "host"
    assert reg.config.section("badspecs").level == 1  # type: ignore[attr-defined]


def test_configure_refused_by_the_plugin_it_enables_changes_nothing(
    environ: dict[str, str],
) -> None:
    reg = make({**environ, "ZYX_BADSPECS__ENABLED": "false"}, HOST, BADSPECS)
    assert [d.backend for d in reg.devices()] == ["host"]
    with pytest.raises(ConfigError, match="badspecs.levle = 2: unknown key"):
        reg.configure(badspecs={"enabled": True, "levle": 2})
    assert [d.backend for d in reg.devices()] == ["host"]
    plugin = {p.name: p for p in reg.plugins()}["badspecs"]
    assert (plugin.state, plugin.backends) == (State.DISABLED, [])
    assert reg.plugin_manager.get_plugin("badspecs") is None
    reg.configure(badspecs={"enabled": True, "level": 2})  # the registry is not stuck
    assert reg.config.section("badspecs").level == 2  # type: ignore[attr-defined]


def test_a_section_validator_that_fails_on_a_value_is_a_config_error(
    environ: dict[str, str],
) -> None:
    reg = make({**environ, "ZYX_PICKY__MODE": "b"}, HOST, BADSPECS)
    with pytest.raises(ConfigError) as caught:
        reg.devices()
    error = caught.value
    assert (error.source, error.field) == ("ZYX_PICKY__MODE", "picky")
    assert "its validator failed: TypeError: cannot handle 'b'" in error.problem


@pytest.mark.parametrize("value", ["0", "False", "off", "no"])
def test_every_false_spelling_disables_a_plugin_before_import(
    environ: dict[str, str], value: str
) -> None:
    reg = make({**environ, "ZYX_MISSING__ENABLED": value}, HOST, MISSING)
    missing = {p.name: p for p in reg.plugins()}["missing"]
    assert missing.state is State.DISABLED, missing.reason


def test_warnings_are_complete_on_the_first_call(environ: dict[str, str]) -> None:
    reg = make({**environ, "ZYX_PLUGINS": "host,ghost"})
    assert reg.warnings == ["ZYX_PLUGINS names 'ghost', which is not installed"]


def exits(name: str, target: str) -> EntryPoint:
    return EntryPoint(name, target, ENTRY_POINT_GROUP)


def test_plugin_code_that_calls_sys_exit_is_quarantined_wherever_it_runs(
    environ: dict[str, str],
) -> None:
    reg = make(
        environ,
        HOST,
        exits("exitimport", "zyx_test_exit_import"),
        exits("exitdir", "zyx_test_exits:EXITING_DIR"),
        exits("exitspecs", "zyx_test_exits:ExitingBackends"),
        exits("exits", "zyx_test_exits"),
    )
    plugins = {p.name: (p.state, p.reason) for p in reg.plugins()}
    assert plugins["exitimport"] == (
        State.QUARANTINED,
        "import failed: SystemExit: it called sys.exit('plugin refuses')",
    )
    assert plugins["exitdir"] == (
        State.QUARANTINED,
        "its hooks are invalid: SystemExit: it called sys.exit('listing refused')",
    )
    assert plugins["exitspecs"] == (
        State.QUARANTINED,
        "zyx_backends() failed: SystemExit: it called sys.exit(3)",
    )
    assert [d.backend for d in reg.devices()] == ["host"]
    backends = {b.name: b.reason for b in reg.backends() if b.state is State.QUARANTINED}
    assert backends == {
        "exitsection": "its config section Exiting fails on its defaults: "
        "SystemExit: it called sys.exit('the section refuses')",
        "exitprobe": "probe failed: SystemExit: it called sys.exit(None)",
        "exitopen": "open failed: SystemExit: it called sys.exit(None)",
        "nomemory": "open failed: MemoryError: out of memory",
    }
    with pytest.raises(PluginError, match="exit") as caught:
        reg.device("exitopen")
    assert isinstance(caught.value.__cause__, SystemExit)


def test_keyboard_interrupt_in_plugin_code_is_not_swallowed(environ: dict[str, str]) -> None:
    reg = make(environ, HOST, exits("interrupted", "zyx_test_exits:Interrupted"))
    with pytest.raises(KeyboardInterrupt):
        reg.plugins()


TAKEOVER = EntryPoint("aadup", "zyx_test_takeover", ENTRY_POINT_GROUP)


@pytest.mark.parametrize("plugins", ["", "aadup"])
def test_a_backend_name_that_is_another_plugins_name_belongs_to_that_plugin(
    environ: dict[str, str], plugins: str
) -> None:
    # Even while the owner is not loaded (ZYX_PLUGINS=aadup), the name stays its own.
    reg = make({**environ, "ZYX_PLUGINS": plugins}, TAKEOVER, HOST)
    states = {(b.plugin, b.name): (b.state, b.reason) for b in reg.backends()}
    assert states[("aadup", "host")] == (
        State.QUARANTINED,
        "the name 'host' belongs to the installed plugin 'host' (zyx.host.plugin)",
    )
    assert states[("aadup", "aadup")] == (State.LOADED, "")
    if plugins:
        with pytest.raises(PluginError, match="disabled by ZYX_PLUGINS=aadup"):
            reg.device("host")
    else:
        assert states[("host", "host")] == (State.LOADED, "")
        assert isinstance(reg.device("host").pool, HostPool)
