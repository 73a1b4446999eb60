"""What an OpenCL driver charges for a launch schedule itself, with no Python in the loop.

    python benchmarks/opencl_c_loop.py --platform 0     # PoCL here
    python benchmarks/opencl_c_loop.py --platform NVIDIA

``opencl_c_loop.c`` (built here with ``cc`` against the ICD loader pyopencl uses) enqueues
an empty kernel of one work-item ``--launches`` times in a C loop, in the schedules zyx's
scheduler and raw pyopencl use: one queue with no event and with an event made and
released (pyopencl's call); round 8 queues with a flush of each per 100 launches, with
zyx's gate (each window's first launch per queue waits for a user event set once the
window is enqueued) and in blocks of 13 launches per queue; and, as the floor of the
enqueue alone, one and 8 queues held behind one user event until the burst is enqueued.
Each schedule's µs per launch by host time and until every queue finished, median of
``--repeats`` bursts, schedules interleaved.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import statistics
import subprocess
import tempfile
from pathlib import Path

import pyopencl as cl

SCHEDULES = {
    # name: (queues, launches per queue in a row, event, gate)
    "1 queue, no event": (1, 1, 0, 0),
    "1 queue, an event made and released": (1, 1, 1, 0),
    "8 queues round, flush per 100": (8, 1, 0, 0),
    "8 queues round, the window's gate (zyx's schedule)": (8, 1, 0, 1),
    "8 queues, blocks of 13 per queue, the gate": (8, 13, 0, 1),
    "1 queue, held back until the burst is enqueued": (1, 1, 0, 2),
    "8 queues, held back until the burst is enqueued": (8, 1, 0, 2),
}


def build(out: Path) -> ctypes.CDLL:
    """``opencl_c_loop.c`` built and loaded, linked to pyopencl's ICD loader."""
    bundled = sorted((Path(cl.__file__).parent / ".libs").glob("libOpenCL*"))
    loader = str(bundled[0]) if bundled else ctypes.util.find_library("OpenCL")
    if loader is None:
        raise SystemExit("no OpenCL ICD loader beside pyopencl or on the library path")
    library = out / "opencl_c_loop.so"
    source = Path(__file__).with_suffix(".c")
    subprocess.run(
        ["cc", "-O2", "-shared", "-fPIC", str(source), "-o", str(library), loader,
         f"-Wl,-rpath,{Path(loader).parent}"],
        check=True,
    )  # fmt: skip
    lib = ctypes.CDLL(str(library))
    lib.burst.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)] + [
        ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
        ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double),
    ]  # fmt: skip
    return lib


def device(platform: str) -> cl.Device:
    for i, p in enumerate(cl.get_platforms()):
        if platform == str(i) or platform.lower() in p.name.lower():
            return p.get_devices()[0]
    raise SystemExit(f"no platform {platform!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", default="0", help="platform index or name substring")
    parser.add_argument("--launches", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=31)
    args = parser.parse_args()
    dev = device(args.platform)
    context = cl.Context([dev])
    queues = [cl.CommandQueue(context, dev) for _ in range(8)]
    source = "__kernel void empty(__global const float *a) {}"
    kernel = cl.Kernel(cl.Program(context, source).build(), "empty")
    buffer = cl.Buffer(context, cl.mem_flags.READ_ONLY, 64)
    kernel.set_args(buffer)
    handles = (ctypes.c_void_p * 8)(*(q.int_ptr for q in queues))
    with tempfile.TemporaryDirectory() as folder:
        lib = build(Path(folder))
        host, done = ctypes.c_double(), ctypes.c_double()
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in SCHEDULES}
        for round_ in range(args.repeats + 1):  # the first round warms up
            for name, (nq, block, event, gate) in SCHEDULES.items():
                status = lib.burst(
                    context.int_ptr, handles, nq, kernel.int_ptr, args.launches, block, event,
                    gate, ctypes.byref(host), ctypes.byref(done),
                )  # fmt: skip
                if status:
                    raise SystemExit(f"{name}: clEnqueueNDRangeKernel returned {status}")
                if round_:
                    times[name].append((host.value, done.value))
    print(f"{dev.platform.name.strip()}: {dev.name.strip()}; {args.launches} launches per burst,")
    print(f"median of {args.repeats}\n")
    print("| C loop, µs per launch | host time | until done |\n|---|---:|---:|")
    for name, runs in times.items():
        host_us = statistics.median(h for h, _ in runs)
        done_us = statistics.median(d for _, d in runs)
        print(f"| {name} | {host_us:.2f} | {done_us:.2f} |")


if __name__ == "__main__":
    main()
