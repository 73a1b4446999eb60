"""The plugin API: the hooks a backend plugin implements, and what they return.

A plugin is a plain module named by an entry point in group ``zyx.backends``::

    [project.entry-points."zyx.backends"]
    mybackend = "zyx_mybackend.plugin"

The module declares the plugin API version it was written for and implements hooks::

    import zyx.hookspecs as api

    ZYX_PLUGIN_API = "1.0"

    @api.hookimpl
    def zyx_backends() -> list[api.BackendSpec]:
        return [api.BackendSpec(name="mybackend", config=MySection, probe=probe, open=open_)]

Hooks run at discovery and compile time only, never per launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from zyx.backend import Device
    from zyx.config import BackendSection
    from zyx.graph.claims import Claim
    from zyx.graph.schedule import Graph

PROJECT = "zyx"
PLUGIN_API_VERSION = (1, 0)
"""A plugin written for ``major.minor`` loads when ``major`` matches and ``minor`` is not newer."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@dataclass(frozen=True)
class ProbeResult:
    """What a cheap, side-effect-free look at the machine found."""

    available: bool
    """Whether ``open`` can be expected to succeed."""
    devices: int = 0
    """How many devices the backend sees (before config filters them)."""
    reason: str = ""
    """Why it is unavailable, or a note worth showing in ``zyx doctor``."""
    libraries: dict[str, str] = field(default_factory=dict)
    """Native libraries found: name to path (or to a note saying it was not found)."""


@dataclass(frozen=True)
class BackendSpec:
    """One backend a plugin provides."""

    name: str
    """The backend's name: the device-string prefix (``cuda``) and the config section."""
    config: type[BackendSection]
    """The model of this backend's config section: a subclass of
    ``zyx.config.BackendSection`` (``extra="forbid"``) whose fields all have defaults."""
    probe: Callable[[], ProbeResult]
    """Is the native library there, how many devices? Cheap; must not open devices."""
    open: Callable[[Any], Sequence[Device]]
    """Open the devices the config section selects (each with its own pool)."""
    priority: int = 0
    """Higher wins when zyx picks a default device; the host backend has priority 0.

    A spec whose config, priority or callables are not of these kinds, or whose probe
    returns anything but a ``ProbeResult``, quarantines its backend."""


@hookspec
def zyx_backends() -> Sequence[BackendSpec]:  # type: ignore[empty-body]
    """Return the backends this plugin provides.

    Called once, at discovery, after the plugin's ``ZYX_PLUGIN_API`` was found compatible.
    Must not open devices or load heavy native libraries: that is ``BackendSpec.open``'s
    job, called only when devices are first needed. An exception here quarantines the
    plugin with its reason; other plugins keep working.
    """


@hookspec
def zyx_match_graph(graph: Graph, device: Device) -> Sequence[Claim] | None:
    """Claim parts of ``graph`` that this plugin runs with its own programs on ``device``.

    Called at a plan cache miss, before kernelizing: once per graph (``zyx.graph.schedule.
    Graph``: its ``targets``, its nodes in dependency ``order``, each node's ``consumers``)
    and device of its unrealized nodes. Return ``zyx.graph.claims.Claim`` objects (each
    names the node it computes, the nodes it reads and its launches), or ``None``.
    ``zyx.graph.claims.matmuls(graph)`` finds the matrix products with their operands'
    strides. The claims of one node (every plugin's, then core's generated matmul) race
    each other and zyx's generated kernels for the same nodes (``Device.launch_timed``, as
    one kernel search: ``zyx.race``); the fastest runs, and the choice is remembered by
    the claims' ``key``s, on disk too. An exception, or a claim that is not valid, loses
    this call's claims (a warning on ``zyx.sched``); a claim that fails to build or run
    drops out of its race.
    """
