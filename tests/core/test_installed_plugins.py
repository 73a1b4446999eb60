"""Discovery with real, installed plugins: zyx-core and every distribution in
tests/plugins live in one throwaway venv, and each test runs Python there."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a runtime import of 'conftest' is ambiguous when pytest runs all of tests/
    from conftest import PluginVenv

STATES = """
import json, sys
from zyx.plugins import registry
reg = registry()
reg.devices()
print(json.dumps({
    "plugins": {p.name: [p.state.value, p.reason] for p in reg.plugins()},
    "backends": {b.name: [b.state.value, b.reason] for b in reg.backends()},
    "devices": [d.name for d in reg.devices()],
    "imported": sorted(m for m in sys.modules if m.startswith("zyx_test")),
}))
"""

EXPLICIT = """
import json, sys, zyx
try:
    zyx.device(sys.argv[1] if len(sys.argv) > 1 else {name!r})
except zyx.PluginError as error:
    chain, cause = [], error.__cause__
    while cause is not None:
        chain.append(type(cause).__name__)
        cause = cause.__cause__
    print(json.dumps({{"message": str(error), "chain": chain}}))
"""


def explicit(venv: PluginVenv, name: str) -> dict[str, object]:
    result: dict[str, object] = venv.json(EXPLICIT.format(name=name))
    return result


def test_import_zyx_imports_no_plugin(plugin_venv: PluginVenv) -> None:
    loaded = plugin_venv.json(
        "import json, sys, zyx; print(json.dumps(sorted(m for m in sys.modules"
        " if m.startswith(('zyx_', 'zyx.plugins', 'zyx.host', 'numpy', 'pydantic', 'pluggy')))))"
    )
    assert loaded == []


def test_broken_plugins_are_quarantined_with_reasons_and_the_rest_work(
    plugin_venv: PluginVenv,
) -> None:
    seen = plugin_venv.json(STATES)
    plugins, backends = seen["plugins"], seen["backends"]
    assert plugins["host"] == ["loaded", ""] and plugins["good"] == ["loaded", ""]
    state, reason = plugins["importerror"]
    assert state == "quarantined"
    assert "ImportError: zyx-test-importerror needs libzyx_test_missing.so.1" in reason
    assert "caused by OSError: libzyx_test_missing.so.1: cannot open shared object" in reason
    assert plugins["badapi"] == [
        "quarantined",
        "it was written for plugin API 2.0; zyx-core 0.1.0 has plugin API 1.0 "
        "(major versions differ)",
    ]
    assert "plugin API 1.99" in plugins["newminor"][1]
    assert "needs a newer zyx-core" in plugins["newminor"][1]
    assert plugins["noapi"] == [
        "quarantined",
        "it does not declare ZYX_PLUGIN_API; zyx-core 0.1.0 has plugin API 1.0",
    ]
    assert backends["probefails"] == [
        "quarantined",
        "probe failed: RuntimeError: driver query crashed",
    ]
    assert backends["openfails"][0] == "quarantined"
    assert backends["openfails"][1].startswith("open failed: BackendError: DyLibNotFound")
    assert seen["devices"] == ["good:0", "good:1", "host"]


def test_asking_for_a_quarantined_backend_raises_chained_to_the_cause(
    plugin_venv: PluginVenv,
) -> None:
    opened = explicit(plugin_venv, "openfails")
    assert "libzyx_test_openfails.so.3" in str(opened["message"])
    assert opened["chain"] == ["BackendError", "OSError"]
    imported = explicit(plugin_venv, "importerror:0")
    assert imported["chain"] == ["ImportError", "OSError"]
    refused = explicit(plugin_venv, "badapi")
    assert "plugin API 2.0" in str(refused["message"]) and refused["chain"] == []
    probed = explicit(plugin_venv, "probefails")
    assert probed["chain"] == ["RuntimeError"]


def test_unknown_backend_lists_what_is_installed(plugin_venv: PluginVenv) -> None:
    unknown = explicit(plugin_venv, "tpu")
    assert "no backend 'tpu' is installed (installed: good, host, openfails, probefails)" in str(
        unknown["message"]
    )


def test_default_device_is_the_usable_backend_of_highest_priority(
    plugin_venv: PluginVenv,
) -> None:
    # openfails (priority 9) is quarantined; good (5) beats host (0). Asking for nothing
    # in particular is not asking for openfails.
    assert plugin_venv.json("import json, zyx; print(json.dumps(zyx.device().name))") == "good:0"


def test_config_reaches_the_backend_section(plugin_venv: PluginVenv) -> None:
    names = plugin_venv.json(
        "import json, zyx; print(json.dumps([d.name for d in zyx.devices()]))",
        ZYX_GOOD__DEVICES="3",
    )
    assert names == ["good:0", "good:1", "good:2", "host"]


def test_autoload_off_loads_no_plugin(plugin_venv: PluginVenv) -> None:
    seen = plugin_venv.json(STATES, ZYX_DISABLE_PLUGIN_AUTOLOAD="1")
    assert {state for state, _ in seen["plugins"].values()} == {"disabled"}
    assert seen["devices"] == [] and seen["backends"] == {}


def test_zyx_plugins_imports_only_those_listed(plugin_venv: PluginVenv) -> None:
    seen = plugin_venv.json(STATES, ZYX_PLUGINS="host,good")
    assert seen["imported"] == ["zyx_test_good"]
    assert seen["plugins"]["importerror"] == ["disabled", "ZYX_PLUGINS=host,good (not listed)"]
    assert seen["devices"] == ["good:0", "good:1", "host"]


def test_config_file_disables_a_plugin(plugin_venv: PluginVenv) -> None:
    path = plugin_venv.home / "zyx.json"
    path.write_text(json.dumps({"good": {"enabled": False}}))
    seen = plugin_venv.json(STATES, ZYX_CONFIG=str(path))
    assert seen["plugins"]["good"] == ["disabled", f"good.enabled = false in {path}"]
    assert "zyx_test_good" not in seen["imported"]
    assert seen["devices"] == ["host"]


def test_doctor_names_each_broken_plugin_and_why(plugin_venv: PluginVenv) -> None:
    done = plugin_venv.zyx("doctor", env={"COLUMNS": "200"})
    assert done.returncode == 1, done.stderr  # it reports the quarantines
    text = done.stdout
    assert "importerror (zyx-test-importerror 0.1.0): quarantined" in text
    assert "libzyx_test_missing.so.1: cannot open shared object file" in text
    assert "openfails (plugin openfails, priority 9): quarantined" in text
    assert "good (plugin good, priority 5): loaded: good:0, good:1" in text
    assert "good: libgood.so: /opt/good/libgood.so" in text
    assert "Traceback" not in done.stderr


def test_devices_command_lists_the_working_devices(plugin_venv: PluginVenv) -> None:
    done = plugin_venv.zyx("devices", env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "good:1" in done.stdout and "test device 1" in done.stdout
    assert "openfails: quarantined (see `zyx doctor`)" in done.stdout
