"""zyx's matmuls through zyx-cudnn side by side with torch, torch.compile and the cuDNN
frontend called directly, in one run on one GPU.

    python benchmarks/cudnn_bench.py [--only bf16|f16|host]

prints a markdown table and writes cudnn_bench_<machine>.json to $OUT or here.

1. bf16 8192³ matmul: ``zyx.matmul`` (realized: the claim raced and taken, its plan the
   fastest of all cuDNN's candidates) vs ``torch.mm`` vs the frontend's graph with the
   heuristics' first plan (``pygraph.build`` + ``execute``) and with the fastest of its
   candidates on this data (each timed with CUDA events: what zyx's choice should match).
2. bf16 8192³ matmul + bias + relu: zyx (the race's winner: one fused cuDNN graph, or the
   bare matmul's claim and a generated epilogue), zyx with the matmul realized first (the
   race's unfused candidate, as a workload runs it), vs torch unfused
   (``relu(a @ b + bias)``), ``torch.compile`` of the same, and the frontend's fused graph
   with the heuristics' first plan and with its fastest.
3. f16 8192³ matmul: zyx vs torch.
4. Host time of one 256³ bf16 matmul with its plan cached: ``zyx.realize(x @ y)`` (the
   front end's whole path: structure key, plan reuse, output allocation, launch; the
   ``headline`` row the report shows), zyx's launch of the claim's program alone
   (``Device.launch``: the lower layer's share), ``torch.mm(a, b)`` (which makes its
   output, as zyx does), ``torch.mm(out=)``, the frontend's ``execute``.
   Per call over a burst of ``BURST``, synchronized before and after.

Every operand is random (torch's normal), shared by all implementations through DLPack;
zyx's results are checked against torch's. Throughput: wall time of ``REPEATS`` calls
between synchronizations. Each number is the median of ``ROUNDS`` rounds, each of which
times every implementation of the case once, in turn (``timing.interleaved``). Math
mode: bf16/f16 inputs, f32 accumulation everywhere (torch:
``allow_bf16_reduced_precision_reduction`` and the f16 one off).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import results
from timing import interleaved, per_launch

import zyx

N = 8192
SMALL = 256
REPEATS = 10
ROUNDS = 5
BURST = 2000

Row = dict[str, Any]


def seconds_per_call(run: Callable[[], Any], sync: Callable[[], None]) -> float:
    """The wall time of ``REPEATS`` calls of ``run``, synchronized before and after, per call."""
    sync()
    start = time.perf_counter()
    for _ in range(REPEATS):
        run()
    sync()
    return (time.perf_counter() - start) / REPEATS


def tflops(seconds: float, n: int = N) -> float:
    return 2 * n**3 / seconds / 1e12


class Frontend:
    """The cuDNN frontend called directly: a graph over torch tensors run on torch's
    stream, with the heuristics' first plan (``build``, ``execute``), or with ``fastest``
    every candidate plan of heuristics A and the fallback list built, each timed with CUDA
    events on this data, and the fastest kept (``execute_plan_at_index``)."""

    def __init__(self, torch: Any, a: Any, b: Any, bias: Any | None, fastest: bool = False) -> None:
        import cudnn

        self.torch, self.cudnn = torch, cudnn
        self.handle = cudnn.create_handle()
        cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
        dtype = {torch.bfloat16: cudnn.data_type.BFLOAT16, torch.float16: cudnn.data_type.HALF}
        g = cudnn.pygraph(
            io_data_type=dtype[a.dtype], intermediate_data_type=cudnn.data_type.FLOAT,
            compute_data_type=cudnn.data_type.FLOAT, handle=self.handle,
        )  # fmt: skip
        ta, tb = g.tensor_like(a[None]), g.tensor_like(b[None])
        out = g.matmul(ta, tb, compute_data_type=cudnn.data_type.FLOAT)
        self.pack = {ta: a[None], tb: b[None]}
        if bias is not None:
            tbias = g.tensor_like(bias.reshape(1, 1, -1))
            out = g.relu(g.add(out, tbias, compute_data_type=cudnn.data_type.FLOAT),
                         compute_data_type=cudnn.data_type.FLOAT)  # fmt: skip
            self.pack[tbias] = bias.reshape(1, 1, -1)
        out.set_output(True).set_data_type(dtype[a.dtype])
        self.result = torch.empty((1, a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        self.pack[out] = self.result
        self.graph = g
        self.index: int | None = None
        if fastest:
            self.index, self.workspace = self._fastest()
        else:
            g.build([cudnn.heur_mode.A])
            self.workspace = self._workspace(g.get_workspace_size())

    def _workspace(self, nbytes: int) -> Any:
        return self.torch.empty(max(nbytes, 1), dtype=self.torch.uint8, device="cuda")

    def _fastest(self) -> tuple[int, Any]:
        g, cudnn = self.graph, self.cudnn
        g.validate()
        g.build_operation_graph()
        g.deselect_numeric_notes([cudnn.numerical_note.REDUCED_PRECISION_REDUCTION])
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        best: tuple[float, int, Any] | None = None
        for index in range(g.get_execution_plan_count()):
            try:
                g.build_plan_at_index(index)
            except Exception:  # noqa: BLE001 - a plan this GPU cannot build is no candidate
                continue
            workspace = self._workspace(g.get_workspace_size_plan_at_index(index))
            run = partial(g.execute_plan_at_index, self.pack, workspace, index, handle=self.handle)
            ms = self._event_ms(run)
            if best is None or ms < best[0]:
                best = (ms, index, workspace)
        assert best is not None, "cuDNN built no plan"
        return best[1], best[2]

    def _event_ms(self, run: Callable[[], Any], warm: int = 2, reps: int = 5) -> float:
        cuda = self.torch.cuda
        for _ in range(warm):
            run()
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            run()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / reps

    def __call__(self) -> None:
        if self.index is None:
            self.graph.execute(self.pack, self.workspace, handle=self.handle)
        else:
            self.graph.execute_plan_at_index(self.pack, self.workspace, self.index,
                                             handle=self.handle)  # fmt: skip


def relative(got: Any, want: Any) -> float:
    got, want = got.float(), want.float()
    return float((got - want).norm() / want.norm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="the cases whose names hold these words")
    only = parser.parse_args().only
    import torch

    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    device = zyx.device("cuda")
    rows: list[Row] = []

    def row(case: str, who: str, value: float, unit: str, note: str = "", **flags: Any) -> None:
        rows.append(results.row(case, who, value, unit, note, **flags))
        print(f"{case:40} {who:44} {value:10.2f} {unit} {note}", file=sys.stderr, flush=True)

    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        if only in name:
            throughput(torch, device, dtype, name, row)
            torch.cuda.empty_cache()
            zyx.empty_cache()
    if only in "host time":
        host_time(torch, device, row)
    print(results.table(rows))
    hardware, driver = results.describe(device)
    versions = {
        "torch": torch.__version__,
        "cudnn-frontend": results.version("nvidia-cudnn-frontend"),
        "cudnn": results.version("nvidia-cudnn-cu13"),
    }
    math = ("bf16/f16 inputs, f32 accumulation everywhere (torch: "
            "allow_bf16_reduced_precision_reduction and the f16 one off)")  # fmt: skip
    env = results.environment(hardware, driver, versions, math)
    results.write("cudnn_bench", results.machine(), rows, env)


def throughput(torch: Any, device: Any, dtype: Any, name: str, row: Callable[..., None]) -> None:
    """Cases 1 to 3 for ``dtype``: the matmul, and for bf16 with bias and relu."""
    a = torch.randn(N, N, dtype=dtype, device="cuda")
    b = torch.randn(N, N, dtype=dtype, device="cuda")
    bias = torch.randn(N, dtype=dtype, device="cuda")
    x, y, c = (zyx.from_dlpack(t) for t in (a, b, bias))

    def sync() -> None:
        device.synchronize()
        torch.cuda.synchronize()

    for fused in (False, True) if name == "bf16" else (False,):
        case = f"matmul{' + bias + relu' if fused else ''} {name} {N}³"

        def ours(fused: bool = fused) -> Any:
            return (zyx.maximum(x @ y + c, 0.0) if fused else x @ y).realize()

        def theirs(fused: bool = fused) -> Any:
            return torch.relu(a @ b + bias) if fused else torch.mm(a, b)

        before = zyx.stats()
        started = time.perf_counter()
        got = torch.from_dlpack(ours())
        first = time.perf_counter() - started
        taken = (zyx.stats() - before).claims_taken
        notes = {"zyx.matmul (zyx-cudnn)": (
            f"claims taken {taken}, first call {first:.1f} s (tuning included), "
            f"error vs torch {relative(got, theirs()):.1e}")}  # fmt: skip
        runs: dict[str, Callable[[], Any]] = {"zyx.matmul (zyx-cudnn)": ours}
        runs["torch unfused" if fused else "torch.mm"] = theirs
        if fused:
            # the race's other candidate, run as a workload runs it: the bare matmul's
            # claim, then a generated kernel for the bias and relu
            runs["zyx, matmul and epilogue realized apart"] = lambda: zyx.maximum(
                (x @ y).realize() + c, 0.0
            ).realize()
            compiled = torch.compile(lambda p, q, r: torch.relu(p @ q + r))
            runs["torch.compile"] = partial(compiled, a, b, bias)
        for fastest in (False, True):
            frontend = Frontend(torch, a, b, bias if fused else None, fastest)
            frontend()
            plan = "fastest plan (each timed)" if fastest else "heuristics' first plan"
            who = f"cuDNN frontend, {plan}"
            notes[who] = f"error vs torch {relative(frontend.result[0], theirs()):.1e}"
            runs[who] = frontend
        timed = interleaved(runs, partial(seconds_per_call, sync=sync), ROUNDS)
        for who, seconds in timed.items():
            headline = who == "zyx.matmul (zyx-cudnn)"  # what users call
            row(case, who, tflops(seconds), "TFLOP/s", notes.get(who, ""), headline=headline)


def host_time(torch: Any, device: Any, row: Callable[..., None]) -> None:
    """Per call host time of a 256³ bf16 matmul whose plan is cached."""
    case = f"host time, matmul bf16 {SMALL}³, plan cached"
    a = torch.randn(SMALL, SMALL, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(SMALL, SMALL, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)
    x, y = zyx.from_dlpack(a), zyx.from_dlpack(b)
    before = zyx.stats()
    got = torch.from_dlpack((x @ y).realize())
    taken = (zyx.stats() - before).claims_taken
    note = f"claims taken {taken}, error vs torch {relative(got, a @ b):.1e}"

    def sync() -> None:
        device.synchronize()
        torch.cuda.synchronize()

    runs: dict[str, Callable[[], Any]] = {}
    runs["zyx.realize(x @ y)"] = lambda: zyx.realize(x @ y)  # what users call
    program, args = claimed_program(device, x, y)
    if program is not None:
        runs["zyx Device.launch of the claim"] = lambda: device.launch(program, args)
    # torch.mm(a, b) makes its output, as zyx.realize(x @ y) does; out= reuses one
    runs["torch.mm(a, b)"] = lambda: torch.mm(a, b)
    runs["torch.mm(out=)"] = lambda: torch.mm(a, b, out=c)
    runs["cuDNN frontend execute"] = Frontend(torch, a, b, None)
    timed = interleaved(runs, partial(per_launch, drain=sync, launches=BURST), ROUNDS)
    for who, micros in timed.items():
        headline = who == "zyx.realize(x @ y)"
        row(case, who, micros, "µs", note if headline else "", headline=headline)


def claimed_program(device: Any, x: Any, y: Any) -> tuple[Any, list[Any]]:
    """The program of zyx-cudnn's claim of ``x @ y`` and arguments for it, or ``None``."""
    from zyx.graph.schedule import Graph
    from zyx_cudnn.match import candidates
    from zyx_cudnn.plans import plan_for

    found = candidates(Graph([(x @ y).node]), device)
    if not found:
        return None, []
    option = found[0][0]
    plan = plan_for(option.spec, device)
    out = device.pool.allocate(SMALL * SMALL * 2)
    scratch = [device.pool.allocate(n) for n in plan.scratch]
    return plan.program, [x.node.buffer, y.node.buffer, out, *scratch]


if __name__ == "__main__":
    main()
