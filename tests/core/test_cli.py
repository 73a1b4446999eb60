"""The ``zyx`` command, run in process with typer's runner against a registry of this
test's own environment."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import zyx.plugins
from zyx import native as zyx_native
from zyx.cli import app, describe, user_errors
from zyx.errors import PluginError
from zyx.plugins import ENTRY_POINT_GROUP, Registry

HOST = EntryPoint("host", "zyx.host.plugin", ENTRY_POINT_GROUP)
MISSING = EntryPoint("missing", "zyx_missing_backend.plugin", ENTRY_POINT_GROUP)


def invoke(
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    *args: str,
    entry_points: tuple[EntryPoint, ...] = (HOST, MISSING),
) -> tuple[int, str, str]:
    """Run ``zyx ARGS`` with the process registry replaced by one built from ``environ``
    and ``entry_points``."""
    monkeypatch.setattr(zyx.plugins, "_registry", Registry(environ, entry_points))
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_devices_lists_the_host(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]) -> None:
    code, out, _ = invoke(monkeypatch, environ, "devices")
    assert code == 0
    rows = [line.split() for line in out.splitlines()]
    assert any(row[:2] == ["host", "host"] and "TFLOP/s" in row for row in rows)
    lines = out.splitlines()
    named = lines.index(next(line for line in lines if line.startswith("host: ")))
    assert "f32" in lines[named + 1].split()  # the dtypes below the name
    assert "missing: quarantined (see `zyx doctor`)" not in out  # a plugin, not a backend


def test_devices_read_at_80_columns(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    """The host's name, a table cell, wrapped to 14 lines of 7 characters."""
    monkeypatch.setattr(zyx.plugins, "_registry", Registry(environ, (HOST,)))
    result = CliRunner().invoke(app, ["devices"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    (row,) = [line.split() for line in lines if line.split()[:2] == ["host", "host"]]
    assert row[3] == "GiB" and row[5:] == ["TFLOP/s", "1024", "1"]  # one line, whole
    assert len(lines) <= 10, result.stdout


def test_version_names_the_core_and_the_plugin_api() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"zyx-core {zyx.__version__}, plugin API 1.0"


def test_devices_with_nothing_usable_is_an_error(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    code, _, err = invoke(monkeypatch, {**environ, "ZYX_HOST__ENABLED": "false"}, "devices")
    assert code == 1 and "no backend opened a device" in err


def test_doctor_reports_plugins_libraries_and_config(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    code, out, _ = invoke(monkeypatch, {**environ, "ZYX_TPU__CORES": "4"}, "doctor")
    assert code == 1, "it reports a quarantined plugin"
    assert out.rstrip().endswith("1 problem: plugin missing is quarantined")
    assert "host (zyx-core" in out or "host (zyx.host.plugin): loaded" in out
    assert "missing (zyx_missing_backend.plugin): quarantined" in out
    assert "No module named 'zyx_missing_backend'" in out
    assert "host: C compiler:" in out
    assert "section 'tpu' (from ZYX_TPU__CORES) is for a backend that is not installed" in out


@pytest.mark.parametrize("command", ["devices", "doctor"])
def test_plugins_that_call_sys_exit_do_not_end_the_command(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], command: str
) -> None:
    exiting = (
        EntryPoint("exitimport", "zyx_test_exit_import", ENTRY_POINT_GROUP),
        EntryPoint("exits", "zyx_test_exits", ENTRY_POINT_GROUP),
    )
    code, out, _ = invoke(monkeypatch, environ, command, entry_points=(HOST, *exiting))
    assert code == (0 if command == "devices" else 1)  # the doctor reports the quarantines
    if command == "devices":
        assert "exitopen: quarantined (see `zyx doctor`)" in out
    else:
        assert "exitimport (zyx_test_exit_import): quarantined" in out
        assert "import failed: SystemExit: it called sys.exit('plugin refuses')" in out


def test_config_show_names_each_source(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    code, out, _ = invoke(monkeypatch, {**environ, "ZYX_HOST__THREADS": "2"}, "config", "show")
    assert code == 0
    rows = {tuple(cell.strip() for cell in line.split("│")[1:4]) for line in out.splitlines()}
    assert ("host.threads", "2", "ZYX_HOST__THREADS") in rows
    assert ("autotune.enabled", "true", "default") in rows  # JSON, as a config file has it
    assert ("default_device", "null", "default") in rows


def test_invalid_config_is_one_red_message_without_traceback(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    code, out, err = invoke(monkeypatch, {**environ, "ZYX_HOST__THREADS": "0"}, "config", "show")
    assert code == 1 and out == ""
    assert err.strip() == (
        "error: ZYX_HOST__THREADS: host.threads = 0: Input should be greater than 0"
    )


def test_config_validate_accepts_a_good_file(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "good.json"
    path.write_text(json.dumps({"host": {"threads": 4}, "cuda": {"queues": 2}}))
    code, out, _ = invoke(monkeypatch, environ, "config", "validate", str(path))
    assert code == 0
    assert "section 'cuda'" in out and f"{path} is valid" in out.replace("\n", "")


def test_config_validate_names_the_bad_field(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"host": {"threads": "all"}}))
    code, _, err = invoke(monkeypatch, environ, "config", "validate", str(path))
    assert code == 1
    assert f"{path}: host.threads = 'all'" in err.replace("\n", "")
    assert "Traceback" not in err


def test_config_validate_lists_every_problem(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    config = {"host": {"threads": "all", "treads": 2}, "default_device": "CUDA", "typo": 1}
    path.write_text(json.dumps(config))
    code, _, err = invoke(monkeypatch, environ, "config", "validate", str(path))
    assert code == 1 and "more problem" not in err  # it said "(and 3 more problems)"
    lines = err.splitlines()
    assert len(lines) == 4 and all(line.startswith(f"error: {path}: ") for line in lines)
    for field in ("host.threads = 'all'", "host.treads = 2", "default_device", "typo = 1"):
        assert any(field in line for line in lines), field


@pytest.mark.parametrize("named", ["/dev/zero", "nested", "digits", "large"])
def test_a_config_file_that_hung_or_tracebacked_is_one_line(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], tmp_path: Path, named: str
) -> None:
    texts = {
        "nested": '{"host": {"threads": ' + "[" * 100_000 + "]" * 100_000 + "}}",
        "digits": '{"host": {"threads": ' + "9" * 5000 + "}}",
        "large": json.dumps({"host": {"treads": "z" * 500_000}}),
    }
    path = Path(named)
    if named in texts:
        path = tmp_path / "config.json"
        path.write_text(texts[named])
    code, out, err = invoke(monkeypatch, {**environ, "ZYX_CONFIG": str(path)}, "devices")
    assert code == 1 and out == ""
    assert err.startswith(f"error: {path}: ") and err.count("\n") == 1 and len(err) < 1000


@pytest.mark.parametrize(
    ("device", "problem"),
    [
        ("host:3", "backend 'host' sees 1 device(s), so no 'host:3'"),
        ("nosuch", "no backend 'nosuch' is installed (installed: host)"),
        ("missing", "'missing' is quarantined: import failed: ModuleNotFoundError"),
    ],
)
def test_config_validate_warns_of_a_default_device_that_is_not_there(
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    tmp_path: Path,
    device: str,
    problem: str,
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"default_device": device}))
    code, out, _ = invoke(monkeypatch, environ, "config", "validate", str(path))
    assert code == 0
    assert f"warning: default_device = {device!r} (from {path}): {problem}" in out.replace("\n", "")


def test_doctor_reports_a_default_device_that_is_not_there(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    code, out, _ = invoke(monkeypatch, {**environ, "ZYX_DEFAULT_DEVICE": "host:3"}, "doctor")
    assert code == 1 and "the configured default_device is unusable" in out
    assert (
        "error: default_device = 'host:3' (from ZYX_DEFAULT_DEVICE): "
        "backend 'host' has no device 'host:3' (its devices: host)"
    ) in out
    environ["ZYX_DEFAULT_DEVICE"] = "host"
    code, out, _ = invoke(monkeypatch, environ, "doctor", entry_points=(HOST,))
    assert "default_device = 'host' (from ZYX_DEFAULT_DEVICE): host" in out
    assert code == 0 and "problem" not in out, "nothing to report"


BADSPECS = EntryPoint("badspecs", "zyx_test_badspecs", ENTRY_POINT_GROUP)


@pytest.mark.parametrize(
    ("switch", "section"),
    [
        ({"ZYX_PLUGINS": "host"}, {"levle": 2}),
        ({"ZYX_DISABLE_PLUGIN_AUTOLOAD": "1"}, {"levle": 2}),
        ({}, {"enabled": False, "levle": 2}),
    ],
)
def test_config_validate_checks_the_sections_of_disabled_plugins(
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    tmp_path: Path,
    switch: dict[str, str],
    section: dict[str, object],
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"badspecs": section}))
    args = ("config", "validate", str(path))
    code, _, err = invoke(monkeypatch, {**environ, **switch}, *args, entry_points=(HOST, BADSPECS))
    assert code == 1
    assert f"{path}: badspecs.levle = 2: unknown key; badspecs takes: enabled, level" in err


def test_config_validate_names_the_sections_it_could_not_check(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"missing": {"anything": 1}, "host": {"threads": 2}}))
    code, out, _ = invoke(monkeypatch, environ, "config", "validate", str(path))
    assert code == 0
    assert (
        f"warning: section 'missing' (from {path}) was not checked: plugin 'missing' is "
        "quarantined: import failed: ModuleNotFoundError"
    ) in out
    assert f"{path}: valid where checked; not checked: missing" in out
    assert "is valid" not in out


def test_config_validate_of_a_missing_file(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], tmp_path: Path
) -> None:
    code, _, err = invoke(monkeypatch, environ, "config", "validate", str(tmp_path / "no.json"))
    assert code == 1 and "zyx config validate: (file)" in err and "no such file" in err


def test_user_errors_become_one_message_with_the_cause(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    monkeypatch.setattr(zyx.plugins, "_registry", Registry(environ, [HOST, MISSING]))
    demo = typer.Typer()

    @demo.command()
    @user_errors
    def ask() -> None:
        zyx.plugins.device("missing")

    result = CliRunner().invoke(demo, [])
    assert result.exit_code == 1
    assert result.stderr == (
        "error: backend plugin 'missing' is unavailable: import failed: "
        "ModuleNotFoundError: No module named 'zyx_missing_backend'\n"
    )


def test_describe_adds_a_cause_the_message_does_not_state() -> None:
    try:
        try:
            raise OSError("libcuda.so.1: cannot open shared object file")
        except OSError as cause:
            raise PluginError("cuda", "no driver") from cause
    except PluginError as error:
        assert describe(error) == (
            "backend plugin 'cuda' is unavailable: no driver "
            "(caused by OSError: libcuda.so.1: cannot open shared object file)"
        )


def test_doctor_says_when_the_host_compiler_does_not_work(
    environ: dict[str, str], tmp_path: Path
) -> None:
    # In a process of its own: the host detects its compiler once per process.
    broken = tmp_path / "brokencc"
    broken.write_text(
        '#!/bin/sh\ncase "$*" in *--version*) echo "brokencc 1.0";; *) exit 1;; esac\n'
    )
    broken.chmod(0o755)
    environ |= {"ZYX_HOST_COMPILER": str(broken), "ZYX_PLUGINS": "host", "COLUMNS": "300"}
    environ["ZYX_CACHE_DIR"] = str(tmp_path)
    command = [sys.executable, "-m", "zyx", "doctor"]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, check=True)
    device_line = next(
        line for line in done.stdout.splitlines() if line.strip().startswith("host: ")
    )
    assert "numpy interpreter" in device_line and "does not work" in device_line
    assert f"host: C compiler: {broken}" in done.stdout


def test_doctor_says_which_of_zyxs_c_modules_are_in_use(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    _, out, _ = invoke(monkeypatch, environ, "doctor")
    built = zyx_native.status()
    assert {"_zyx_structure", "_zyx_runner", "_zyx_allocator"} <= built.keys()
    for name, why in built.items():
        assert f"{name}: {'in use' if why is None else 'off: '}" in out


def test_doctor_says_why_zyxs_c_modules_are_off(environ: dict[str, str]) -> None:
    environ |= {"ZYX_NATIVE": "0", "ZYX_PLUGINS": "host", "COLUMNS": "300"}
    command = [sys.executable, "-m", "zyx", "doctor"]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, check=True)
    for name in ("_zyx_structure", "_zyx_runner", "_zyx_allocator"):
        assert f"{name}: off: ZYX_NATIVE=0" in done.stdout
