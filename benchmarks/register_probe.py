"""Two alternatives to zyx-cuda's staging for host→device copies, measured beside it.

    python benchmarks/register_probe.py    # on a CUDA machine; prints one line per case

1 GiB of pageable numpy memory to the device, median of repeated runs after a warm-up:

- register: page-lock the source itself (``cuMemHostRegister``) and DMA straight from it,
  no copy on the host; once for the whole GiB, then in chunks spread over threads (each
  registers a chunk, copies it, waits, unregisters) so registration overlaps the DMA;
- huge-page slots: zyx's staging lanes with their pinned slots on transparent huge pages
  (``mmap`` + ``MADV_HUGEPAGE``, then ``cuMemHostRegister``) instead of ``cuMemHostAlloc``;
- zyx's ``pool.write`` as shipped, and torch's copy from pinned memory (the DMA alone).

Both lost to ``pool.write`` on the H200: registration costs more than the copy it saves.
"""

from __future__ import annotations

import mmap
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from cuda.bindings import driver

GIB = 1 << 30
PAGE = mmap.PAGESIZE


def ok(result: Any) -> Any:
    """The value of a driver call's ``(CUresult, value)`` result, which must be success."""
    error, *values = result if isinstance(result, tuple) else (result,)
    assert int(error) == 0, result
    return values[0] if values else None


def gbps(copy: Callable[[], None], runs: int = 7) -> float:
    copy()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        copy()
        times.append(time.perf_counter() - start)
    return GIB / statistics.median(times) / 1e9


def registered(
    base: int, dst: int, chunk: int, threads: int, activate: Callable[[], None]
) -> Callable[[], object]:
    """A copy of ``GIB`` bytes at ``base`` to ``dst`` that page-locks ``chunk`` bytes at a
    time on each of ``threads`` threads. Chunk edges fall on page boundaries: a page is
    never registered twice."""
    edges = [0, *(((base + o) // PAGE * PAGE) - base for o in range(chunk, GIB, chunk)), GIB]
    streams = [ok(driver.cuStreamCreate(1)) for _ in range(threads)]
    workers = ThreadPoolExecutor(threads)

    def lane(i: int) -> None:
        activate()
        for k in range(i, len(edges) - 1, threads):
            offset, size = edges[k], edges[k + 1] - edges[k]
            ok(driver.cuMemHostRegister(base + offset, size, 0))
            ok(driver.cuMemcpyHtoDAsync(dst + offset, base + offset, size, streams[i]))
            ok(driver.cuStreamSynchronize(streams[i]))
            ok(driver.cuMemHostUnregister(base + offset))

    return lambda: list(workers.map(lane, range(threads)))


def huge_page_staging(context: Any, threads: int, slot_bytes: int) -> Any:
    """zyx's staging with its slots on transparent huge pages."""
    from zyx_cuda import staging

    class HugeSlot(staging._Slot):
        def __init__(self, nbytes: int) -> None:
            self.memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            self.memory.madvise(mmap.MADV_HUGEPAGE)
            view = np.frombuffer(self.memory, dtype=np.uint8)
            view[:] = 1  # fault the pages in before pinning them
            self.ptr = view.ctypes.data
            ok(driver.cuMemHostRegister(self.ptr, nbytes, 0))
            self.event = ok(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING))
            self.used = False

    lanes = staging.Staging(context, threads=threads, slot_bytes=slot_bytes)
    lanes._lanes = [(HugeSlot(slot_bytes), HugeSlot(slot_bytes)) for _ in range(threads)]
    lanes._workers = ThreadPoolExecutor(threads)
    return lanes


def main() -> None:
    import torch

    from zyx_cuda.device import CudaDevice

    device = CudaDevice(0)
    pool, context = device.pool, device.context
    buf = pool.allocate(GIB)
    host = np.random.default_rng(0).random(GIB // 8)
    base, dst = host.ctypes.data, int(buf.handle)
    context.activate()

    def whole() -> None:
        ok(driver.cuMemHostRegister(base, GIB, 0))
        ok(driver.cuMemcpyHtoD(dst, base, GIB))
        ok(driver.cuMemHostUnregister(base))

    print(f"register all 1 GiB, copy, unregister: {gbps(whole, 5):.1f} GB/s")
    for chunk in (8 << 20, 32 << 20, 128 << 20):
        for threads in (2, 4, 8):
            copy = registered(base, dst, chunk, threads, context.activate)
            print(
                f"register {chunk >> 20} MiB chunks on {threads} threads: {gbps(copy, 5):.1f} GB/s"
            )

    def write() -> None:
        pool.write(buf, host)
        device.synchronize()

    print(f"zyx pool.write: {gbps(write, 9):.1f} GB/s")
    shipped = pool.staging
    pool.staging = huge_page_staging(context, shipped.threads, shipped.slot_bytes)
    print(f"zyx pool.write, huge-page slots: {gbps(write, 9):.1f} GB/s")
    back = np.empty_like(host)
    pool.read(buf, back)
    assert np.array_equal(back, host)
    gpu = torch.empty(GIB // 4, device="cuda")
    pinned = torch.from_numpy(host.view(np.float32)).pin_memory()

    def torch_pinned() -> None:
        gpu.copy_(pinned, non_blocking=True)
        torch.cuda.synchronize()

    print(f"torch copy_ from pinned: {gbps(torch_pinned):.1f} GB/s")


if __name__ == "__main__":
    main()
