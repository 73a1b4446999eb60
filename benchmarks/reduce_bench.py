"""Reductions of one big f32 matrix: zyx side by side with torch, torch.compile, cupy and
numpy (each where installed, for the device's kind), in one run.

    python benchmarks/reduce_bench.py [--device cuda] [--size-mib 1024] [--repeats 20]
        # writes reduce_bench_<machine>_<backend>.json to $OUT or . (benchmarks/results.py)

On a square f32 matrix of ``--size-mib`` (16384 x 16384 for 1024):

1. row softmax ``exp(x - max(x)) / sum(exp(x - max(x)))`` along axis 1 (torch and
   torch.compile: ``torch.softmax``): bandwidth of one read and one write of the matrix
   (what a kernel that keeps the row on chip moves);
2. ``sum`` over axis 0 (columns), over axis 1 (rows) and over everything: bandwidth of
   one read of the matrix.

Each result is checked against numpy in float64 before it is timed. Times are wall clock
around the work and a synchronize, median of ``--repeats`` runs after warm-up; every
implementation is timed the same way in the same run. GPU peers (torch, torch.compile,
cupy) run on a CUDA device; on the host and on OpenCL devices the peers are numpy and
torch on the CPU (beside an OpenCL device, rows of another device: results.py's
``device``). Goal (issue 20): 3500 GB/s or more on the H200 for each sum, and on the host
at least numpy's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
import results
from frontend_bench import Row, _none, _try_import, environment, median_time, row, table

import zyx

Array = np.ndarray[Any, Any]


class Workload:
    """One reduction: its name, bytes moved, the program in a namespace, and numpy's."""

    def __init__(
        self, name: str, moved: int, program: Callable[[Any, Any], Any],
        reference: Callable[[Array], Array], tolerance: Callable[[Array], Array],
    ) -> None:  # fmt: skip
        self.name, self.moved, self.program = name, moved, program
        self.reference, self.tolerance = reference, tolerance


def _softmax(xp: Any, x: Any) -> Any:
    """The row softmax as the array API spells it; torch's own (one fused kernel, what
    its users call) for torch and torch.compile."""
    if isinstance(xp, _TorchNamespace):
        return xp.torch.softmax(x, dim=1)
    e = xp.exp(x - xp.max(x, axis=1, keepdims=True))
    return e / xp.sum(e, axis=1, keepdims=True)


def _np_softmax(x: Array) -> Array:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def workloads(nbytes: int) -> list[Workload]:
    """The four reductions; tolerances: a few f32 roundings per element of the softmax,
    and for a sum ``1e-5`` of the sum of magnitudes (a sum in f32, blocked or in a tree)."""

    def sum_bound(axis: int | None) -> Callable[[Array], Array]:
        return lambda x: 1e-5 * np.abs(x).sum(axis) + 1e-30

    def summed(axis: int | None) -> Callable[[Any, Any], Any]:
        return lambda xp, x: xp.sum(x, axis=axis)

    return [
        Workload("row softmax", 2 * nbytes, _softmax, _np_softmax, lambda x: 1e-5 * _np_softmax(x)),
        Workload("sum over axis 0", nbytes, summed(0), lambda x: x.sum(0), sum_bound(0)),
        Workload("sum over axis 1", nbytes, summed(1), lambda x: x.sum(1), sum_bound(1)),
        Workload(
            "sum over all", nbytes, summed(None), lambda x: np.asarray(x.sum()), sum_bound(None)
        ),
    ]


class Peers:
    """The implementations to time on this device: (label, namespace, to-device, to-numpy,
    sync), zyx first."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.impls: list[tuple[str, Any, Callable[[Array], Any], Callable[[Any], Array],
                               Callable[[], None]]] = []  # fmt: skip
        self.impls.append(
            (
                "zyx",
                zyx,
                lambda h: zyx.asarray(h, device=device),
                lambda a: a.numpy(),
                device.synchronize,
            )  # fmt: skip
        )
        torch = _try_import("torch")
        gpu = device.backend == "cuda"
        if torch is not None and (not gpu or torch.cuda.is_available()):
            where = "cuda" if gpu else "cpu"
            sync = torch.cuda.synchronize if gpu else _none
            up = lambda h: torch.from_numpy(h).to(where)  # noqa: E731
            down = lambda t: t.cpu().numpy()  # noqa: E731
            self.impls.append((f"torch ({where})", _TorchNamespace(torch), up, down, sync))
            if gpu:
                self.impls.append(("torch.compile", _Compiled(torch), up, down, sync))
        cupy = _try_import("cupy") if gpu else None
        if cupy is not None:
            self.impls.append(
                ("cupy", cupy, cupy.asarray, cupy.asnumpy, cupy.cuda.Device().synchronize)
            )
        if not gpu:
            self.impls.append(("numpy", np, lambda h: h, lambda a: np.asarray(a), _none))

    def device_of(self, label: str) -> str:
        """A row's ``device`` (results.py): off CUDA the peers run on the host."""
        gpu = self.device.backend == "cuda"
        return "" if label == "zyx" or gpu else results.on_host(self.device)


class _TorchNamespace:
    """torch under the array API names the programs use (``sum`` with ``axis``)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def sum(self, x: Any, axis: int | None = None) -> Any:
        return self.torch.sum(x) if axis is None else self.torch.sum(x, dim=axis)


class _Compiled(_TorchNamespace):
    """Marks torch for ``torch.compile`` of the whole program (see ``time_program``)."""


def time_program(
    impl: tuple[Any, ...], work: Workload, host: Array, want: tuple[Array, Array], repeats: int
) -> float:
    """GB/s of ``work`` with implementation ``impl``, after checking its result against
    ``want`` (numpy's in float64, and the bound on the error)."""
    label, xp, up, down, sync = impl
    x = up(host)
    program: Callable[[Any], Any] = lambda a: work.program(xp, a)  # noqa: E731
    if isinstance(xp, _Compiled):
        program = xp.torch.compile(program)
    error = np.abs(down(program(x)).astype(np.float64) - want[0])
    if not np.all(error <= want[1]):
        raise AssertionError(f"{label}: {work.name} is wrong (worst error {error.max():.3g})")
    del error
    if label == "zyx":
        run: Callable[[], object] = lambda: program(x).realize()  # noqa: E731
    else:
        run = lambda: program(x)  # noqa: E731
    return work.moved / 1e9 / median_time(run, sync, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="zyx device name (default: zyx's default)")
    parser.add_argument("--size-mib", type=int, default=1024, help="size of the matrix")
    parser.add_argument("--repeats", type=int, default=20, help="timed runs per measurement")
    args = parser.parse_args()
    device = zyx.device(args.device)
    side = int((args.size_mib * (1 << 20) // 4) ** 0.5)
    host = np.random.default_rng(20).standard_normal((side, side), dtype=np.float32)
    peers = Peers(device)
    rows: list[Row] = []
    for work in workloads(host.nbytes):
        bench = f"{work.name}, {side}x{side} f32 (GB/s, {work.moved // host.nbytes} x the matrix)"
        wide = host.astype(np.float64)
        want = (work.reference(wide), work.tolerance(wide))
        del wide
        new = [row(bench, impl[0], time_program(impl, work, host, want, args.repeats), "GB/s",
                   device=peers.device_of(impl[0]))
               for impl in peers.impls]  # fmt: skip
        rows += new
        print(table(new), flush=True)
    machine = f"{results.machine()}_{device.backend}"
    print(results.write("reduce_bench", machine, rows, environment(device)))


if __name__ == "__main__":
    main()
