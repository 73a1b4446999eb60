"""How a kernel's warps touch memory, measured by running it in the IR interpreter.

``analyze(kernel, args)`` interprets ``kernel`` (on small but representative arguments: a
few work-groups) and records, for each memory op and each time a warp runs it, the
addresses of its work-items (warps as ``zyx.ir.Mma`` counts them: 32 consecutive flat local
ids of a work-group), then counts what an NVIDIA GPU makes of them:

- **local memory**: 32 banks of 4-byte words. A request is served in as many *wavefronts*
  as the most distinct words any one bank holds among its addresses (one word read by many
  lanes is a broadcast, not a conflict). Accesses of 8 bytes a lane are served a half-warp
  at a time, of 16 bytes a quarter-warp (a *phase* each), so 2 and 4 wavefronts are the
  least there; an ``LdMatrix`` is a phase per 8 x 8 matrix (its 8 rows of 16 bytes), a
  ``CopyAsync``'s write a 16-byte (8-, 4-byte) store. ``Access.conflicts`` is the
  wavefronts over the least that the distinct words need (1: conflict-free), ``ways`` the
  most wavefronts of one phase (32: every lane's word in one bank).
- **global memory**: 32-byte sectors. ``Access.excess`` is the sectors the requests touch
  over the least that their distinct bytes fill (1: coalesced).

Register ``Define``s are not memory here. Addresses are element indices times the
element's size: buffers start 256-byte aligned (``cuMemAlloc``) and local ``Define``s at
bank 0, as the analysis assumes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import numpy.typing as npt

from zyx.ir.interpreter import Mask, interpret
from zyx.ir.ops import CopyAsync, Define, Kernel, LdMatrix, Load, Param, Ref, Storage, Store

WARP = 32
BANKS = 32
WORD = 4
SECTOR = 32

Addresses = npt.NDArray[np.int64]


@dataclass
class Access:
    """What one memory op's requests (a warp's each time it runs) cost, summed."""

    ref: Ref
    kind: str
    """``load``, ``store``, ``ldmatrix`` or ``copy`` (a ``CopyAsync``: two, its read of
    global memory and its write of local memory)."""
    space: str
    """``local`` or ``global``."""
    width: int
    """Bytes a work-item reads or writes."""
    requests: int = 0
    wavefronts: int = 0
    least: int = 0
    """Local memory: the wavefronts the requests' distinct words need at the least;
    global memory: the sectors their distinct bytes fill at the least."""
    ways: int = 0
    """Local memory: the most wavefronts of one phase of a request."""
    sectors: int = 0

    @property
    def conflicts(self) -> float:
        """Local memory: wavefronts over the least (1.0 is conflict-free)."""
        return self.wavefronts / self.least if self.least else 1.0

    @property
    def excess(self) -> float:
        """Global memory: sectors over the least (1.0 is coalesced)."""
        return self.sectors / self.least if self.least else 1.0

    @property
    def per_request(self) -> float:
        """Global memory: sectors a request."""
        return self.sectors / self.requests if self.requests else 0.0


def analyze(kernel: Kernel, args: Sequence[Any]) -> list[Access]:
    """Interpret ``kernel`` on ``args`` (as ``interpret`` takes them; written as it writes
    them) and return each memory access's costs, in op order."""
    recorder = Recorder(kernel)
    interpret(kernel, args, observe=recorder)
    return sorted(recorder.accesses.values(), key=lambda a: (a.ref, a.space))


class Recorder:
    """An ``Observer`` of the interpreter that sums ``Access``es by op (``analyze``)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.group_size = prod(kernel.local_size)
        self.accesses: dict[tuple[Ref, str], Access] = {}

    def __call__(self, ref: Ref, values: Sequence[Any], mask: Mask, n: int) -> None:
        op = self.kernel.ops[ref]
        active = np.ones(n, bool) if mask is None else mask
        if isinstance(op, (Load, Store)):
            memory = op.src if isinstance(op, Load) else op.dst
            kind = "load" if isinstance(op, Load) else "store"
            self.record(ref, kind, memory, values[op.index], active, 1)
        elif isinstance(op, LdMatrix):
            lanes = np.arange(n) % self.group_size % WARP < 8 * op.count
            self.record(ref, "ldmatrix", op.src, values[op.index], active & lanes, 8)
        elif isinstance(op, CopyAsync):
            self.record(ref, "copy", op.dst, values[op.index], active, op.count)
            read = active & np.broadcast_to(values[op.cond], (n,))
            self.record(ref, "copy", op.src, values[op.src_index], read, op.count)

    def record(
        self, ref: Ref, kind: str, memory: Ref, index: Any, active: npt.NDArray[np.bool_],
        count: int,
    ) -> None:  # fmt: skip
        """The requests of op ``ref`` of ``count`` consecutive elements a work-item of
        ``memory`` from ``index``, by the ``active`` work-items."""
        held = self.kernel.ops[memory]
        if isinstance(held, Define) and held.storage is Storage.REGISTER:
            return
        assert isinstance(held, (Define, Param))
        space = "global" if isinstance(held, Param) else "local"
        width = count * held.dtype.itemsize
        access = self.accesses.setdefault((ref, space), Access(ref, kind, space, width))
        index = np.broadcast_to(np.asarray(index, np.int64), active.shape)
        addresses, lanes = self.warps(index * held.dtype.itemsize, active)
        access.requests += int(lanes.any(axis=1).sum())
        if space == "global":
            sectors, least = sector_counts(addresses, lanes, width)
            access.sectors += int(sectors.sum())
            access.least += int(least.sum())
            return
        wavefronts, least = bank_wavefronts(addresses, lanes, width)
        access.wavefronts += int(wavefronts.sum())
        access.least += int(least.sum())
        access.ways = max(access.ways, int(wavefronts.max(initial=0)))

    def warps(
        self, addresses: Addresses, active: npt.NDArray[np.bool_]
    ) -> tuple[Addresses, npt.NDArray[np.bool_]]:
        """``addresses`` and ``active`` of a chunk's work-items as ``[warp, lane]``; a
        work-group's last warp may be partial (its missing lanes inactive)."""
        per_group = -(-self.group_size // WARP)
        item = np.arange(active.size)
        group, local = np.divmod(item, self.group_size)
        warp = group * per_group + local // WARP
        shape = (int(warp.max(initial=-1)) + 1, WARP)
        by_warp, lanes = np.zeros(shape, np.int64), np.zeros(shape, bool)
        by_warp[warp, local % WARP] = addresses
        lanes[warp, local % WARP] = active
        return by_warp, lanes


def bank_wavefronts(
    addresses: Addresses, active: npt.NDArray[np.bool_], width: int
) -> tuple[Addresses, Addresses]:
    """The wavefronts of each phase of each request ``[warp, lane]`` of ``width`` bytes a
    lane at byte ``addresses`` of local memory, and the least its distinct words need:
    both ``[warp * phases]`` (0 where no lane of the phase is active)."""
    words = max(width // WORD, 1)
    per_phase = WARP // words  # 8 bytes a lane: half-warps; 16: quarter-warps
    phases = addresses.reshape(-1, per_phase)
    mask = np.repeat(active.reshape(-1, per_phase), words, axis=1)
    word = (phases[:, :, None] // WORD + np.arange(words)).reshape(phases.shape[0], -1)
    rows = np.broadcast_to(np.arange(phases.shape[0])[:, None], word.shape)
    pairs = np.unique(np.stack([rows[mask], word[mask]]), axis=1)  # distinct (phase, word)
    per_bank = np.bincount(
        pairs[0] * BANKS + pairs[1] % BANKS, minlength=phases.shape[0] * BANKS
    ).reshape(-1, BANKS)
    distinct = per_bank.sum(axis=1)
    return per_bank.max(axis=1), -(-distinct // BANKS)


def sector_counts(
    addresses: Addresses, active: npt.NDArray[np.bool_], width: int
) -> tuple[Addresses, Addresses]:
    """The 32-byte sectors that each request ``[warp, lane]`` of ``width`` bytes a lane at
    byte ``addresses`` of global memory touches, and the least its distinct bytes fill."""
    rows = np.broadcast_to(np.arange(addresses.shape[0])[:, None], addresses.shape)
    starts = np.unique(np.stack([rows[active], addresses[active]]), axis=1)
    ends = starts[1] + width - 1
    touched = np.concatenate([starts[[0, 1]], np.stack([starts[0], ends])], axis=1)
    touched[1] //= SECTOR
    sectors = np.unique(touched, axis=1)
    count = np.bincount(sectors[0], minlength=addresses.shape[0])
    least = -(-np.bincount(starts[0], minlength=addresses.shape[0]) * width // SECTOR)
    return count, least
