"""Device selection: priority order, ``default_device``, device strings, and the reasons
``zyx doctor --explain`` shows."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
from typer.testing import CliRunner

import zyx.plugins
from zyx.cli import app
from zyx.errors import PluginError
from zyx.plugins import ENTRY_POINT_GROUP, Registry

HOST = EntryPoint("host", "zyx.host.plugin", ENTRY_POINT_GROUP)
RANKED = EntryPoint("ranked", "zyx_test_ranked", ENTRY_POINT_GROUP)


def test_highest_priority_backend_with_a_device_wins(environ: dict[str, str]) -> None:
    reg = Registry(environ, [HOST, RANKED])
    device, why = reg.choose()
    assert device.name == "ahead:0"
    assert why == [
        "no default_device is configured: backends ranked by priority",
        "empty (priority 9): no devices",
        "ahead (priority 5): 1 device(s)",
        "ahead:0 is the first device of ahead",
    ]
    assert [d.backend for d in reg.devices()] == ["ahead", "host"]


def test_default_device_overrides_priority_and_names_its_source(environ: dict[str, str]) -> None:
    reg = Registry({**environ, "ZYX_DEFAULT_DEVICE": "host"}, [HOST, RANKED])
    device, why = reg.choose()
    assert device.name == "host"
    assert why[0] == "default_device = 'host' (from ZYX_DEFAULT_DEVICE)"


def test_device_string_picks_backend_and_index(environ: dict[str, str]) -> None:
    reg = Registry(environ, [HOST, RANKED])
    assert reg.device("ahead:0").name == "ahead:0"
    device, why = reg.choose("ahead")
    assert device.name == "ahead:0"
    assert why == ["'ahead' was asked for", "ahead:0 is the first of ahead's 1"]


def test_doctor_explain_says_why(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]) -> None:
    monkeypatch.setattr(zyx.plugins, "_registry", Registry(environ, [HOST, RANKED]))
    result = CliRunner().invoke(app, ["doctor", "--explain"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stdout
    assert "default device: ahead:0" in result.stdout
    assert "empty (priority 9): no devices" in result.stdout


def test_a_backend_that_opened_no_device_is_unavailable(environ: dict[str, str]) -> None:
    with pytest.raises(PluginError, match="backend plugin 'empty' is unavailable: it opened no"):
        Registry(environ, [HOST, RANKED]).device("empty")
