"""A CUDA pool's read on the stand-in driver (``stub_driver``, in a process of its own),
with zyx-cuda's native module and without it (``ZYX_NATIVE=0``): a read that does not fit
its buffer or whose output is read-only is refused before any copy starts, and native.c's
``Reader`` leaves the streams' books (sequence numbers, loads, marks, deferred frees, each
buffer's record) as the Python path does, step by step, taking that path where a stream
holds marks. No GPU, so no value is compared (``test_staging.py`` compares the copies'
values on a fake driver). Needs a C compiler."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from stub_driver import run_stubbed

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH"),
]

HERE = Path(__file__).parent


@pytest.mark.parametrize("native", ["1", "0"])
def test_reads_are_checked_before_any_copy(native: str) -> None:
    out = run_stubbed(Path(__file__), "checked", native)
    assert out == "ok\n", out


def test_the_native_reader_keeps_the_python_paths_books() -> None:
    native = run_stubbed(Path(__file__), "books", "native").splitlines()
    python = run_stubbed(Path(__file__), "books", "python").splitlines()
    assert native[:-1] == python[:-1]
    assert python[-1] == "0 read in C" and native[-1] == "4 read in C", native[-1]


def test_the_native_reader_reads_what_the_python_path_does() -> None:
    out = run_stubbed(Path(__file__), "values", "native")
    assert out == "ok\n", out


def _device(native: str) -> tuple[Any, Any]:
    os.environ["ZYX_NATIVE"] = native
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    install()
    import zyx

    return zyx, zyx.device("cuda")


def checked(native: str) -> str:
    zyx, device = _device(native)
    import numpy as np

    from zyx.errors import BackendError, ErrorStatus

    a = zyx.asarray(np.ones(1024, np.float32), device=device)
    pool = a.node.buffer.pool
    downloads = []
    download = pool.staging.download
    pool.staging.download = lambda *args: (downloads.append(args), download(*args))[0]

    def copies() -> int:
        return len(downloads) + (pool._reader.reads if pool._reader else 0)

    read = (a + a).numpy()
    assert read.shape == (1024,) and read.dtype == np.float32 and copies() == 1
    assert bool(pool._reader) == (native == "1")
    buf = pool.allocate(4096)
    refused = {"do not fit": np.empty(1025, np.float32), "read-only": np.empty(1024, np.float32)}
    refused["read-only"].flags.writeable = False
    for message, out in refused.items():
        try:
            pool.read(buf, out)
        except BackendError as error:
            assert error.status is ErrorStatus.MEMORY_COPY_P2H and message in str(error)
        else:
            return f"a read into {message} output was not refused"
    pool.release(buf)
    return "ok" if copies() == 1 else f"{copies()} copies"


def books(path: str) -> str:
    """Per step, the books a read leaves; last, how many reads ran in C."""
    zyx, device = _device("1")
    import numpy as np

    host = np.ones(1024, np.float32)
    x, y = zyx.asarray(host, device=device), zyx.asarray(host, device=device)
    pool = x.node.buffer.pool
    if path == "python":
        pool._reader = False
    streams, lines = pool.streams, []

    def step(name: str) -> None:
        records = []
        for held in (x, y, z):
            access = held.node.buffer.tracking
            if access is not None:
                access = (access.writer_queue, access.writer, sorted(access.readers.items()))
            records.append(access)
        marks = [len(queue) for queue in streams._marks]
        lines.append(
            f"{name}: {streams.issued} {streams.reached} {streams.tracker.load} {marks} "
            f"{len(streams._deferred)} {pool._held} {records}"
        )

    z = x + y  # on x's stream, after a wait for y's upload on another: a mark there
    zyx.realize(z)
    step("realized")
    for name, held in (("z", z), ("y", y), ("y again", y), ("x", x)):
        held.numpy()
        step(f"read {name}")
    spare = pool.allocate(4096)
    pool.write(spare, host)  # on stream 0, not waited for
    pool.release(spare)  # freed once the upload is seen done: at the next read's collect
    step("released")
    y.numpy()  # on stream 1, which holds no marks: in C, and the free in collect
    step("read y after")
    reads = pool._reader.reads if pool._reader else 0
    return "\n".join([*lines, f"{reads} read in C"])


def values(path: str) -> str:
    """Reads in C and in Python of the same device bytes at a few sizes and offsets (the
    bounce buffer's, above it, up to ``DIRECT_BYTES``), through a DMA stand-in that writes
    a pattern of the device address; a failed DMA is raised as the Python path raises it."""
    _, device = _device("1")
    import ctypes

    import numpy as np

    from zyx.errors import BackendError, ErrorStatus
    from zyx_cuda.native import copier
    from zyx_cuda.staging import BOUNCE_BYTES, DIRECT_BYTES

    failures: list[int] = []

    def dtoh(dst: int, src: int, size: int, stream: int) -> int:
        if failures:
            return failures.pop()
        pattern = (np.arange(src, src + size, dtype=np.uint64) % 251).astype(np.uint8)
        ctypes.memmove(dst, pattern.ctypes.data, size)
        return 0

    from stub_driver import stand_ins

    call = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t,
                            ctypes.c_void_p)(dtoh)  # fmt: skip
    success = stand_ins().address(b"cuStreamSynchronize")
    module = copier()
    assert module is not None
    module.bind_copies(success, ctypes.cast(call, ctypes.c_void_p).value, success, success, success)
    pool = device.pool
    buf = pool.allocate(DIRECT_BYTES + 64)
    pool.read(buf, np.empty(4, np.uint8))  # makes the reader
    reader = pool._reader
    for nbytes, offset in ((100, 0), (4096, 12), (BOUNCE_BYTES, 0), (BOUNCE_BYTES + 1, 3),
                           (DIRECT_BYTES, 64)):  # fmt: skip
        outs = []
        for made in (reader, False):
            pool._reader = made
            outs.append(np.zeros(nbytes, np.uint8))
            pool.read(buf, outs[-1], offset)
        start = buf.handle + offset
        want = (np.arange(start, start + nbytes, dtype=np.uint64) % 251).astype(np.uint8)
        np.testing.assert_array_equal(outs[0], want)
        np.testing.assert_array_equal(outs[1], want)
    pool._reader = reader
    assert reader.reads == 6, reader.reads
    failures.append(1)  # CUDA_ERROR_INVALID_VALUE
    try:
        pool.read(buf, np.zeros(64, np.uint8))
    except BackendError as error:
        assert error.status is ErrorStatus.MEMORY_COPY_P2H and "cuMemcpyDtoHAsync" in str(error)
    else:
        return "a failed DMA was not raised"
    out = np.zeros(64, np.uint8)
    pool.read(buf, out)
    assert out.any() and reader.reads == 7, reader.reads
    return "ok"


if __name__ == "__main__":
    print({"checked": checked, "books": books, "values": values}[sys.argv[1]](sys.argv[2]))
