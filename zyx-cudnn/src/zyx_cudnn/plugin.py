"""zyx-cudnn's plugin: matmuls and their epilogues on zyx-cuda's devices, as cuDNN graphs.

``zyx_match_graph`` offers, for each matmul of a graph on a CUDA device, the longest
claim cuDNN can build (``zyx_cudnn.match`` finds them, ``zyx_cudnn.plans`` builds and tunes
them); zyx races it against its generated kernels and runs the faster. It claims nothing
while ``cuda.cudnn`` is false. Without libcudnn, or with a frontend it cannot use, the
backend ``cudnn`` is quarantined with the reason (``zyx doctor`` shows it), its hook claims
nothing, and CUDA works as without it. Importing this module loads no native library.

Config section ``cudnn``: ``allow_tf32`` (default false) lets f32 matmuls run on TF32
tensor cores; without it f32 matmuls are not claimed (cuDNN's f32 plans were all TF32 on
the H200: ``zyx_cudnn.graphs``). ``autotune.enabled = false`` takes the first plan that
builds instead of timing them all; ``autotune.cache`` keeps the fastest on disk
(``zyx_cudnn.tuning``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, cast

from pydantic import Field

from zyx.config import BackendSection
from zyx.graph.claims import Claim
from zyx.hookspecs import BackendSpec, ProbeResult, hookimpl
from zyx_cudnn import library

if TYPE_CHECKING:
    from zyx.backend import Device
    from zyx.config import AutotuneSection
    from zyx.graph.schedule import Graph
    from zyx_cuda.config import CudaSection
    from zyx_cuda.device import CudaDevice
    from zyx_cudnn.match import Candidate

ZYX_PLUGIN_API = "1.0"

log = logging.getLogger("zyx.sched.cudnn")


class CudnnSection(BackendSection):
    """Config section ``cudnn`` (whether it claims at all is ``cuda.cudnn``)."""

    allow_tf32: Annotated[bool, Field(strict=True)] = False
    """Let f32 matmuls run on TF32 tensor cores (inputs rounded to 10 mantissa bits: a
    relative error near 1e-3 rather than 1e-5); false leaves them to the generated kernels,
    true fp32. Strict: ``1``
    and ``"yes"`` are errors, not a change of precision."""


def probe() -> ProbeResult:
    found = library.status()
    return ProbeResult(available=found.available, reason=found.reason, libraries=found.libraries)


def open_cudnn(section: CudnnSection) -> Sequence[Device]:
    """cuDNN runs on zyx-cuda's devices; it has none of its own."""
    return []


@hookimpl
def zyx_backends() -> list[BackendSpec]:
    return [BackendSpec(name="cudnn", config=CudnnSection, probe=probe, open=open_cudnn)]


@hookimpl
def zyx_match_graph(graph: Graph, device: Device) -> list[Claim] | None:
    if device.backend != "cuda" or not library.status().available:
        return None
    from zyx.plugins import registry

    config = registry().config
    if not cast("CudaSection", config.section("cuda")).cudnn:
        return None
    tf32 = cast("CudnnSection", config.section("cudnn")).allow_tf32
    autotune = cast("AutotuneSection", config.section("autotune"))
    from zyx_cudnn.match import candidates

    claims = []
    for options in candidates(graph, device, tf32):
        longest = None
        for option in options:  # the longest epilogue cuDNN can run
            longest = _claim(option, cast("CudaDevice", device), autotune)
            if longest is not None:
                break
        if longest is None:
            continue
        claims.append(longest)
        bare = options[-1]
        if bare.spec.steps or longest.key == bare.spec:
            continue
        # A fused plan can be slower than the bare product's followed by a generated
        # epilogue (bias + relu, bf16 8192³ on the H200): the runtime races the two.
        product = _claim(bare, cast("CudaDevice", device), autotune)
        if product is not None:
            claims.append(product)
    return claims


def _claim(option: Candidate, device: CudaDevice, autotune: AutotuneSection) -> Claim | None:
    """The claim of ``option`` with its plan, or ``None`` where cuDNN refuses it (logged)."""
    from zyx_cudnn.graphs import Unsupported
    from zyx_cudnn.plans import plan_for

    try:
        plan = plan_for(option.spec, device, autotune.enabled, autotune.cache)
    except Unsupported as refusal:
        log.debug("%s", refusal)
        return None
    log.debug("claimed %s on %s", option.spec.describe(), device.name)
    return Claim(option.output, option.inputs, option.spec, plan.launches, plan.scratch)
