"""Host<->device copies through zyx-cuda's pinned staging, swept over lanes and slot size.

    python benchmarks/staging_sweep.py            # on a CUDA machine; prints a table

``pool.write`` and ``pool.read`` of 1 GiB of pageable numpy memory for each (threads,
slot bytes), the median of 7 after a warm-up, interleaved across settings so that a slow
spell hits them all; torch's copy from pinned memory (the DMA alone) in the same run. Each
timed copy follows an untimed one through the same setting: a setting's slots are then as
warm in the host's caches as they are when one setting serves every copy (without that,
two settings taking turns gave 47 GB/s where one setting alone gave 50, on one machine,
2026-12-01).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

GIB = 1 << 30
THREADS = (8, 12, 14, 16)
SLOTS = (2 << 20, 4 << 20, 8 << 20)


def gbps(copy: Callable[[], None], sync: Callable[[], None]) -> float:
    sync()
    start = time.perf_counter()
    copy()
    sync()
    return GIB / (time.perf_counter() - start) / 1e9


def main() -> None:
    import torch

    from zyx_cuda.device import CudaDevice
    from zyx_cuda.staging import Staging

    device = CudaDevice(0)
    pool = device.pool
    host = np.random.default_rng(0).random(GIB // 8)
    back = np.empty_like(host)
    buf = pool.allocate(GIB)
    stagings = {
        (threads, slot): Staging(device.context, threads=threads, slot_bytes=slot)
        for threads in THREADS
        for slot in SLOTS
    }
    results: dict[tuple[int, int], tuple[list[float], list[float]]] = {
        key: ([], []) for key in stagings
    }
    for rounds in range(8):
        for key, staging in stagings.items():
            pool.staging = staging
            pool.write(buf, host)
            pool.read(buf, back)
            up = gbps(lambda: pool.write(buf, host), device.synchronize)
            down = gbps(lambda: pool.read(buf, back), device.synchronize)
            if rounds:  # the first round warms up (pins the slots, starts the threads)
                results[key][0].append(up)
                results[key][1].append(down)
    assert np.array_equal(back, host)
    gpu = torch.empty(GIB // 4, device="cuda")
    pinned = torch.from_numpy(host.view(np.float32)).pin_memory()
    dma = statistics.median(
        gbps(lambda: gpu.copy_(pinned, non_blocking=True), torch.cuda.synchronize) for _ in range(7)
    )
    print("| lanes | slot | host to device GB/s | device to host GB/s |")
    print("|---:|---:|---:|---:|")
    for (threads, slot), (ups, downs) in results.items():
        up, down = statistics.median(ups), statistics.median(downs)
        print(f"| {threads} | {slot >> 10} KiB | {up:.1f} | {down:.1f} |")
    print(f"\ntorch copy_ from pinned memory (the DMA alone): {dma:.1f} GB/s")


if __name__ == "__main__":
    main()
