"""zyx-opencl's native Enqueuer on and off: 10,000 small kernels per second, interleaved.

    python benchmarks/enqueuer_ab.py [--platform NVIDIA]

``opencl_bench.py``'s throughput case (``c = a + b`` over 16,384 f32 into 64 rotating
outputs, launched and synchronized), with 8 queues and with 1, for a device whose programs
submit and enqueue through the native ``Enqueuer`` and for one whose programs use only the
Python ``schedule`` and ``issue``; three rounds, alternating, so a slow spell of
a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).parent))
from opencl_bench import small_kernels  # noqa: E402

from zyx_opencl.config import OpenCLSection  # noqa: E402
from zyx_opencl.device import open_devices  # noqa: E402
from zyx_opencl.native import enqueuer_type  # noqa: E402


def main() -> None:
    import pyopencl as cl

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", default="", help="a part of the platform's name")
    platform = parser.parse_args().platform
    index = next(i for i, p in enumerate(cl.get_platforms()) if platform in p.name)
    print("| round | launch path | queues | kernels/s |\n|---:|---|---:|---:|")
    paths = (("native Enqueuer", enqueuer_type), ("Python schedule/issue", lambda: None))
    for round_ in range(3):
        for label, enqueuer in paths:
            for queues in (8, 1):
                with mock.patch("zyx_opencl.scheduler.enqueuer_type", enqueuer):
                    section = OpenCLSection(platform_ids=[index], queues=queues)
                    device = open_devices(section)[0]
                    seconds = small_kernels(device, 10_000, 16_384, 5)
                print(f"| {round_} | {label} | {queues} | {10_000 / seconds:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
