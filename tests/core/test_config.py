"""Config sources and their precedence, and every way a value can be invalid: each error
names its source, the field path and the value."""

from __future__ import annotations

import json
import os
import threading
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from pydantic import PositiveInt

import zyx
import zyx.plugins
from zyx.config import (
    CONFIGURE,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    BackendSection,
    flatten,
    read_environment,
    read_file,
    validate,
)
from zyx.errors import ConfigError, ConfigWarning
from zyx.plugins import ENTRY_POINT_GROUP, Registry

HOST = EntryPoint("host", "zyx.host.plugin", ENTRY_POINT_GROUP)


class QueueSection(BackendSection):
    """A backend section like the GPU backends' ones."""

    queues: PositiveInt = 8


def registry(environ: dict[str, str]) -> Registry:
    return Registry(environ, entry_points=[HOST])


def write_config(environ: dict[str, str], data: Any) -> Path:
    """Write ``data`` as the config file in the default place of ``environ``."""
    path = Path(environ["XDG_CONFIG_HOME"]) / "zyx" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def config_error(environ: dict[str, str], **configure: Any) -> ConfigError:
    reg = registry(environ)
    with pytest.raises(ConfigError) as caught:
        if configure:
            reg.configure(**configure)
        else:
            reg.config  # noqa: B018
    return caught.value


def test_defaults_come_from_the_models(environ: dict[str, str]) -> None:
    rows = {field: (value, source) for field, value, source in registry(environ).config.rows()}
    assert rows == {
        "autotune.enabled": (True, "default"),
        "autotune.cache": (True, "default"),
        "autotune.budget": (2.0, "default"),
        "autotune.runs": (3, "default"),
        "autotune.min_time": (5e-5, "default"),
        "default_device": (None, "default"),
        "host.enabled": (True, "default"),
        "host.threads": (None, "default"),
    }


def test_later_sources_win_and_each_value_keeps_its_source(environ: dict[str, str]) -> None:
    path = write_config(
        environ, {"host": {"threads": 2}, "default_device": "host", "autotune": {"cache": False}}
    )
    reg = registry({**environ, "ZYX_HOST__THREADS": "3", "ZYX_AUTOTUNE__ENABLED": "false"})
    reg.configure(host={"threads": 4})
    cfg = reg.config
    assert cfg.values.default_device == "host" and cfg.source("default_device") == str(path)
    assert cfg.values.autotune.cache is False and cfg.source("autotune", "cache") == str(path)
    assert cfg.values.autotune.enabled is False
    assert cfg.source("autotune", "enabled") == "ZYX_AUTOTUNE__ENABLED"
    assert cfg.section("host").threads == 4  # type: ignore[attr-defined]
    assert cfg.source("host", "threads") == CONFIGURE
    assert cfg.files == (path,)


def test_environment_beats_the_file(environ: dict[str, str]) -> None:
    write_config(environ, {"host": {"threads": 2}})
    cfg = registry({**environ, "ZYX_HOST__THREADS": "3"}).config
    assert cfg.section("host").threads == 3  # type: ignore[attr-defined]
    assert cfg.source("host", "threads") == "ZYX_HOST__THREADS"


def test_home_config_is_read_without_xdg_config_home(environ: dict[str, str]) -> None:
    path = Path(environ["HOME"]) / ".config" / "zyx" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"host": {"threads": 5}}')
    del environ["XDG_CONFIG_HOME"]
    assert registry(environ).config.files == (path,)


def test_zyx_config_replaces_the_default_file(environ: dict[str, str], tmp_path: Path) -> None:
    write_config(environ, {"host": {"threads": 2}})
    named = tmp_path / "other.json"
    named.write_text('{"host": {"threads": 6}}')
    cfg = registry({**environ, "ZYX_CONFIG": str(named)}).config
    assert cfg.section("host").threads == 6  # type: ignore[attr-defined]
    assert cfg.files == (named,)


def test_zyx_config_naming_a_missing_file_is_an_error(
    environ: dict[str, str], tmp_path: Path
) -> None:
    error = config_error({**environ, "ZYX_CONFIG": str(tmp_path / "nope.json")})
    assert (error.source, error.value, error.problem) == (
        "ZYX_CONFIG",
        str(tmp_path / "nope.json"),
        "no such file",
    )


def test_xdg_config_home_naming_a_file_means_no_config_file(
    environ: dict[str, str], tmp_path: Path
) -> None:
    not_a_folder = tmp_path / "config-home"
    not_a_folder.write_text("")
    assert registry({**environ, "XDG_CONFIG_HOME": str(not_a_folder)}).config.files == ()
    named = str(not_a_folder / "config.json")  # a file ZYX_CONFIG names must exist
    error = config_error({**environ, "ZYX_CONFIG": named})
    assert (error.source, error.value, error.problem) == ("ZYX_CONFIG", named, "no such file")


def test_misspelt_top_level_key_is_an_unknown_key(environ: dict[str, str]) -> None:
    path = write_config(environ, {"default_devise": "host"})
    assert str(config_error(environ)) == (
        f"{path}: default_devise = 'host': unknown key; "
        "the config takes: autotune, default_device, host"
    )
    path.unlink()
    error = config_error(environ, default_devise="host")
    assert (error.source, error.field) == (CONFIGURE, "default_devise")


def test_default_device_in_capitals_says_device_strings_are_lowercase(
    environ: dict[str, str],
) -> None:
    error = config_error({**environ, "ZYX_DEFAULT_DEVICE": "CUDA:1"})
    assert str(error) == (
        "ZYX_DEFAULT_DEVICE: default_device = 'CUDA:1': not a device string "
        "(lowercase, like 'host', 'cuda' or 'cuda:1'); did you mean 'cuda:1'?"
    )


def test_bad_json_names_file_line_and_column(environ: dict[str, str]) -> None:
    path = write_config(environ, '{\n  "host": {"threads": 2,}\n}\n')
    error = config_error(environ)
    assert error.source == f"{path}:2:25"  # the "}" after the trailing comma
    assert error.value == '"host": {"threads": 2,}'
    assert "double quotes" in error.problem


def test_truncated_json_names_the_end_of_the_file(environ: dict[str, str]) -> None:
    path = write_config(environ, '{"host": {"threads": 2},\n')
    error = config_error(environ)
    assert error.source == f"{path}:2:1"
    assert error.value == '{"host": {"threads": 2},'


@pytest.mark.parametrize(
    ("data", "field"),
    [([1, 2], "(top level)"), ({"host": 3}, "host"), ({"autotune": [True]}, "autotune")],
)
def test_file_of_the_wrong_shape_is_an_error(
    environ: dict[str, str], data: Any, field: str
) -> None:
    path = write_config(environ, data)
    error = config_error(environ)
    assert (error.source, error.field) == (str(path), field)


@pytest.mark.parametrize(
    ("section", "field", "value", "problem"),
    [
        ("host", "threads", "many", "valid integer"),
        ("host", "threads", 0, "greater than 0"),
        ("host", "threads", -2, "greater than 0"),
        ("host", "threads", 100000, "less than or equal to 1024"),
        ("host", "threads", True, "valid integer"),
        ("host", "threads", "4", "valid integer"),
        ("host", "enabled", "perhaps", "valid boolean"),
        ("autotune", "cache", [1], "valid boolean"),
        ("host", "thread", 4, "unknown key; host takes: enabled, threads"),
        ("autotune", "size", 1, "unknown key; autotune takes: enabled, cache, budget, runs,"),
        ("autotune", "budget", -1, "greater than or equal to 0"),
        ("autotune", "budget", "1s", "valid number"),
        ("autotune", "runs", 0, "greater than or equal to 1"),
        ("autotune", "min_time", -1e-6, "greater than or equal to 0"),
    ],
)
def test_invalid_value_in_the_file_names_file_field_and_value(
    environ: dict[str, str], section: str, field: str, value: Any, problem: str
) -> None:
    path = write_config(environ, {section: {field: value}})
    error = config_error(environ)
    assert (error.source, error.field, error.value) == (str(path), f"{section}.{field}", value)
    assert problem in error.problem
    assert str(error).startswith(f"{path}: {section}.{field} = {value!r}: ")


@pytest.mark.parametrize(
    ("variable", "text", "field", "value"),
    [
        ("ZYX_HOST__THREADS", "abc", "host.threads", "abc"),
        ("ZYX_HOST__THREADS", "0", "host.threads", 0),
        ("ZYX_HOST__THREADS", "[1]", "host.threads", [1]),
        ("ZYX_HOST__THREADZ", "1", "host.threadz", 1),
        ("ZYX_DEFAULT_DEVICE", "CUDA:x", "default_device", "CUDA:x"),
        ("ZYX_DEFAULT_DEVICE__ID", "1", "default_device.id", 1),
    ],
)
def test_invalid_environment_value_names_the_variable(
    environ: dict[str, str], variable: str, text: str, field: str, value: Any
) -> None:
    error = config_error({**environ, variable: text})
    assert (error.source, error.field, error.value) == (variable, field, value)


def test_invalid_configure_names_configure_and_changes_nothing(environ: dict[str, str]) -> None:
    reg = registry(environ)
    with pytest.raises(ConfigError) as caught:
        reg.configure({"host": {"threads": 0}})
    assert (caught.value.source, caught.value.field, caught.value.value) == (
        CONFIGURE,
        "host.threads",
        0,
    )
    assert reg.config.source("host", "threads") == "default"


def test_configure_cannot_change_an_open_backend(environ: dict[str, str]) -> None:
    reg = registry(environ)
    reg.devices()
    with pytest.raises(ConfigError, match="host devices are open already"):
        reg.configure(host={"threads": 2})
    reg.configure(default_device="host")  # what does not touch open backends still works
    assert reg.config.values.default_device == "host"


def test_sections_for_backends_not_installed_are_warnings(
    environ: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(environ, {"cuda": {"device_ids": [0]}, "host": {"threads": 1}})
    reg = registry({**environ, "ZYX_OPENCL__QUEUES": "4"})
    expected = [
        f"section 'cuda' (from {path}) is for a backend that is not installed; ignored",
        "section 'opencl' (from ZYX_OPENCL__QUEUES) is for a backend that is not installed; "
        "ignored",
    ]
    assert reg.warnings == expected
    assert reg.config.section("host").threads == 1  # type: ignore[attr-defined]
    logged = [r.getMessage() for r in caplog.records if r.name == "zyx.dev"]
    assert logged == [f"config: {warning}" for warning in expected]


def test_section_of_an_installed_but_broken_plugin_is_no_warning(
    environ: dict[str, str],
) -> None:
    broken = EntryPoint("broken", "zyx_missing_backend.plugin", ENTRY_POINT_GROUP)
    reg = Registry({**environ, "ZYX_BROKEN__QUEUES": "4"}, entry_points=[HOST, broken])
    assert reg.warnings == []


def test_control_variables_are_not_config_fields() -> None:
    environ = {"ZYX_DEBUG": "1", "ZYX_PLUGINS": "host", "ZYX_CONFIG": "x", "PATH": "/bin"}
    assert read_environment(environ) == {}


def test_environment_values_are_json_and_bare_words_are_strings() -> None:
    raw = read_environment({"ZYX_Q__QUEUES": "4", "ZYX_Q__IDS": "[0, 2]", "ZYX_Q__NAME": "abc"})
    assert {path: s.value for path, s in raw.items()} == {
        ("q", "queues"): 4,
        ("q", "ids"): [0, 2],
        ("q", "name"): "abc",
    }


@pytest.mark.parametrize("queues", [0, -1, 1.5, "eight", None])
def test_backend_section_rejects_bad_queues(queues: Any) -> None:
    raw = flatten({"q": {"queues": queues}}, "test.json")
    with pytest.raises(ConfigError) as caught:
        validate(raw, {"q": QueueSection})
    assert (caught.value.source, caught.value.field, caught.value.value) == (
        "test.json",
        "q.queues",
        queues,
    )


def test_all_problems_are_counted() -> None:
    raw = flatten({"q": {"queues": 0, "extra": 1, "enabled": "x"}}, "test.json")
    with pytest.raises(ConfigError, match=r"\(and 2 more problems\)"):
        validate(raw, {"q": QueueSection})


def test_read_file_of_a_missing_optional_file_is_empty(tmp_path: Path) -> None:
    assert read_file(tmp_path / "absent.json") == {}


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe{")
    with pytest.raises(ConfigError, match="cannot be read") as caught:
        read_file(path)
    assert caught.value.source == str(path)


# ---- sources that hang, flood or traceback -------------------------------------------------


def test_a_fifo_is_refused_without_waiting_for_a_writer(
    environ: dict[str, str], tmp_path: Path
) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    environ["ZYX_CONFIG"] = str(fifo)
    errors: list[BaseException] = []

    def read_it() -> None:
        try:
            registry(environ).device()
        except BaseException as error:  # noqa: BLE001 - the test looks at whatever it was
            errors.append(error)

    # In a thread: the read waited for a writer forever, and would hang the test run.
    reader = threading.Thread(target=read_it, daemon=True)
    reader.start()
    reader.join(30)
    assert not reader.is_alive(), "reading ZYX_CONFIG waits for a writer of the FIFO"
    (error,) = errors
    assert isinstance(error, ConfigError) and "is not a regular file" in str(error)


def test_a_device_file_is_refused_unread(environ: dict[str, str]) -> None:
    # /dev/zero was read until MemoryError.
    error = config_error({**environ, "ZYX_CONFIG": "/dev/zero"})
    assert error.source == "/dev/zero" and "not a regular file" in error.problem


def test_a_file_over_the_size_limit_is_refused(environ: dict[str, str]) -> None:
    path = write_config(environ, '{"host": {"threads": 2}}' + " " * MAX_FILE_BYTES)
    error = config_error(environ)
    assert error.source == str(path) and f"over {MAX_FILE_BYTES} bytes" in error.problem


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_json_nested_too_deep_is_one_config_error(environ: dict[str, str], depth: int) -> None:
    """100,000 levels raised RecursionError from the JSON parser; fewer, past MAX_DEPTH,
    reach validation as a value no field takes."""
    nested = "[" * depth + "]" * depth
    path = write_config(environ, '{"host": {"threads": ' + nested + "}}")
    assert "nested deeper than" in str(config_error(environ))
    path.unlink()
    environ["ZYX_HOST__THREADS"] = nested
    error = config_error(environ)
    assert error.source == "ZYX_HOST__THREADS" and "nested deeper than" in error.problem
    assert len(str(error)) < 1000


def test_configure_with_a_value_nested_too_deep_is_one_config_error(
    environ: dict[str, str],
) -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    error = config_error(environ, host={"threads": value})
    assert error.field == "host.threads" and "nested deeper than" in error.problem


def test_an_integer_of_too_many_digits_is_one_config_error(environ: dict[str, str]) -> None:
    digits = "9" * 5000  # json raised ValueError: Exceeds the limit (4300 digits)
    path = write_config(environ, '{"host": {"threads": ' + digits + "}}")
    error = config_error(environ)
    assert error.source == str(path) and "a number of more than" in error.problem
    path.unlink()
    error = config_error({**environ, "ZYX_HOST__THREADS": digits})
    assert error.source == "ZYX_HOST__THREADS" and len(str(error)) < 1000
    error = config_error(environ, host={"threads": 10**5000})  # its repr raised too
    assert "an int of about 5000 digits" in str(error)


def test_a_huge_value_is_cut_in_the_message(environ: dict[str, str]) -> None:
    huge = "z" * (900 << 10)
    write_config(environ, {"host": {"treads": huge}})
    error = config_error(environ)
    assert error.field == "host.treads" and error.value == huge
    assert len(str(error)) < 1000 and "unknown key; host takes" in str(error)


def test_every_problem_is_kept_in_the_error() -> None:
    raw = flatten({"q": {"queues": 0, "extra": 1}, "default_devic": "host"}, "test.json")
    with pytest.raises(ConfigError) as caught:
        validate(raw, {"q": QueueSection})
    fields = [problem.field for problem in caught.value.problems]
    assert sorted(fields) == ["default_devic", "q.extra", "q.queues"]
    assert "(and 2 more problems)" in str(caught.value)
    assert all("more problem" not in problem.alone for problem in caught.value.problems)


def test_configure_of_a_section_no_backend_owns_warns_as_a_file_does(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``zyx.configure(hots=...)`` (a typo of host) was accepted without a word."""
    monkeypatch.setattr(zyx.plugins, "_registry", registry(environ))
    with pytest.warns(
        ConfigWarning, match=r"section 'hots' \(from zyx.configure\(\)\) is for a backend"
    ) as caught:
        zyx.configure(hots={"threads": 2})
    assert "did you mean 'host'?" in str(caught[0].message)
    assert caught[0].filename == __file__, "the warning points at the caller"
    write_config(environ, {"hots": {"threads": 2}})
    assert registry(environ).warnings == [
        f"section 'hots' (from {Path(environ['XDG_CONFIG_HOME']) / 'zyx' / 'config.json'}) is "
        "for a backend that is not installed; ignored; did you mean 'host'?"
    ]
