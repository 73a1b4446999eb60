"""Plugin API versioning, end to end: real plugins installed in a throwaway venv, each
declaring the ``ZYX_PLUGIN_API`` it was written for.

The rule (``zyx.hookspecs.PLUGIN_API_VERSION``): a plugin written for ``major.minor`` loads
when ``major`` is the core's and ``minor`` is not newer. The installed test plugins declare
1.0 (zyx-test-good), 1.99 (zyx-test-newminor) and 2.0 (zyx-test-badapi). zyx-core is at
1.0, so no plugin can be for an *older* minor yet; the tests that need one run the
venv's Python as a later core would be, with its version constant raised before
discovery, which is all that the check reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import zyx

if TYPE_CHECKING:  # a runtime import of 'conftest' is ambiguous when pytest runs all of tests/
    from conftest import PluginVenv

CORE = f"zyx-core {zyx.__version__}"

STATES = """
import json
import zyx.hookspecs
zyx.hookspecs.PLUGIN_API_VERSION = ({major}, {minor})
from zyx.plugins import registry
reg = registry()
print(json.dumps({{
    "plugins": {{p.name: [p.state.value, p.reason] for p in reg.plugins()}},
    "devices": [d.name for d in reg.devices()],
}}))
"""


def plugin_states(venv: PluginVenv, core: tuple[int, int]) -> dict[str, list[str]]:
    """Each plugin's ``[state, reason]`` when the core has plugin API ``core``; also checks
    that the loaded plugins' devices open."""
    seen = venv.json(
        STATES.format(major=core[0], minor=core[1]), ZYX_PLUGINS="good,newminor,badapi"
    )
    states: dict[str, list[str]] = seen["plugins"]
    if states["good"][0] == "loaded":
        assert seen["devices"][:2] == ["good:0", "good:1"]
    return states


def test_a_plugin_for_an_older_minor_loads(plugin_venv: PluginVenv) -> None:
    # zyx-test-good was written for 1.0; a core at 1.3 still has every hook 1.0 had.
    assert plugin_states(plugin_venv, (1, 3))["good"] == ["loaded", ""]


@pytest.mark.parametrize(
    ("core", "plugin", "written_for", "why"),
    [
        ((1, 3), "badapi", "2.0", "major versions differ"),
        ((1, 3), "newminor", "1.99", "it needs a newer zyx-core"),
        ((2, 0), "good", "1.0", "major versions differ"),
    ],
    ids=["future-major", "future-minor", "past-major"],
)
def test_an_incompatible_plugin_is_refused_naming_both_versions(
    plugin_venv: PluginVenv, core: tuple[int, int], plugin: str, written_for: str, why: str
) -> None:
    state, reason = plugin_states(plugin_venv, core)[plugin]
    assert state == "quarantined"
    assert reason == (
        f"it was written for plugin API {written_for}; "
        f"{CORE} has plugin API {core[0]}.{core[1]} ({why})"
    )


def test_asking_for_a_refused_plugin_names_both_versions(plugin_venv: PluginVenv) -> None:
    done = plugin_venv.run("import zyx; zyx.device('badapi')")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("zyx.errors.PluginError: backend plugin 'badapi' is unavailable")
    assert "plugin API 2.0" in last and "has plugin API 1.0" in last


def test_doctor_shows_the_refusal_and_the_core_version(plugin_venv: PluginVenv) -> None:
    done = plugin_venv.zyx("doctor", env={"COLUMNS": "200"})
    assert done.returncode == 1, done.stderr  # it reports the refused plugins
    assert f"{CORE}, plugin API 1.0," in done.stdout
    assert "badapi (zyx-test-badapi 0.1.0): quarantined" in done.stdout
    assert (
        f"it was written for plugin API 2.0; {CORE} has plugin API 1.0 (major versions differ)"
        in done.stdout
    )
