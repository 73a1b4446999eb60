"""The disk pool: file regions mapped without reading them, copied out straight from the map,
and refused as a destination."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from zyx.backend import Buffer, MemoryPool
from zyx.disk import DiskPool
from zyx.errors import BackendError, ErrorStatus
from zyx.host.pool import HostPool


@pytest.fixture
def data_file(tmp_path: Path) -> tuple[Path, bytes]:
    content = np.random.default_rng(0).integers(0, 256, 10_000, dtype=np.uint8).tobytes()
    path = tmp_path / "weights.bin"
    path.write_bytes(content)
    return path, content


def read_all(pool: MemoryPool, buf: Buffer, offset: int = 0, size: int | None = None) -> bytes:
    out = bytearray(buf.nbytes - offset if size is None else size)
    pool.read(buf, out, offset)
    return bytes(out)


def test_a_region_reads_as_the_files_bytes(data_file: tuple[Path, bytes]) -> None:
    path, content = data_file
    pool = DiskPool()
    buf = pool.open(path, 1234, 5000)
    assert buf.nbytes == 5000
    assert read_all(pool, buf) == content[1234:6234]
    assert read_all(pool, buf, offset=100, size=7) == content[1334:1341]
    rest = pool.open(str(path), 9000)  # to the end of the file
    assert read_all(pool, rest) == content[9000:]


def test_opening_reads_nothing(tmp_path: Path) -> None:
    """A 64 GiB sparse file maps instantly; only the touched page is ever read."""
    path = tmp_path / "huge.bin"
    with open(path, "wb") as file:
        file.truncate(64 << 30)
        file.seek((64 << 30) - 4)
        file.write(b"tail")
    pool = DiskPool()
    whole = pool.open(path)
    assert whole.nbytes == 64 << 30
    end = pool.open(path, (64 << 30) - 8, 8)
    assert read_all(pool, end) == b"\0\0\0\0tail"


def test_copy_into_the_host_pool_reads_straight_from_the_map(
    data_file: tuple[Path, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, content = data_file
    disk, host = DiskPool(), HostPool()
    src = disk.open(path, 10, 4000)
    dst = host.allocate(4000)
    targets: list[object] = []
    real_read = DiskPool._read

    def spy(self: DiskPool, buf: Buffer, view: memoryview, offset: int) -> None:
        targets.append(view.obj)
        real_read(self, buf, view, offset)

    monkeypatch.setattr(DiskPool, "_read", spy)
    host.copy_from(disk, src, dst)
    assert bytes(HostPool.array(dst)) == content[10:4010]
    assert len(targets) == 1 and targets[0] is HostPool.array(dst)  # no staging copy


class ByteArrayPool(MemoryPool):
    """A device-like pool over bytearrays, with the contract's default (staged) copy."""

    name = "bytes"

    def __init__(self) -> None:
        self.writes: list[int] = []

    def free_bytes(self) -> int:
        return 1 << 30

    def _allocate(self, nbytes: int) -> Buffer:
        return Buffer(self, nbytes, bytearray(nbytes))

    def _free(self, buf: Buffer) -> None:
        buf.handle = None

    def _write(self, buf: Buffer, view: memoryview, offset: int) -> None:
        self.writes.append(view.nbytes)
        buf.handle[offset : offset + view.nbytes] = view

    def _read(self, buf: Buffer, view: memoryview, offset: int) -> None:
        view[:] = buf.handle[offset : offset + view.nbytes]


def test_other_pools_stage_one_region_sized_buffer(data_file: tuple[Path, bytes]) -> None:
    path, content = data_file
    disk, device = DiskPool(), ByteArrayPool()
    src = disk.open(path, 500, 3000)
    dst = device.allocate(3000)
    device.copy_from(disk, src, dst)
    assert bytes(dst.handle) == content[500:3500]
    assert device.writes == [3000]  # the region, not the file


def test_the_pool_is_read_only(data_file: tuple[Path, bytes]) -> None:
    path, _ = data_file
    disk, host = DiskPool(), HostPool()
    buf = disk.open(path, 0, 16)
    with pytest.raises(BackendError, match="read-only") as caught:
        disk.allocate(16)
    assert caught.value.status is ErrorStatus.MEMORY_ALLOCATION
    with pytest.raises(BackendError, match="read-only") as caught:
        disk.write(buf, b"0123456789abcdef")
    assert caught.value.status is ErrorStatus.MEMORY_COPY_H2P
    src = host.allocate(16)
    with pytest.raises(BackendError, match="read-only") as caught:
        disk.copy_from(host, src, buf)
    assert caught.value.status is ErrorStatus.MEMORY_COPY_P2P
    assert disk.free_bytes() == 0
    assert path.read_bytes()[:16] == read_all(disk, buf)  # the file is untouched


@pytest.mark.parametrize(
    ("offset", "nbytes"),
    [(0, 10_001), (9_999, 2), (-1, 4), (10_000, None), (5, 0), (0, 2.5), (0, True), (True, 8)],
)
def test_regions_outside_the_file_are_refused(
    data_file: tuple[Path, bytes], offset: int, nbytes: int | None
) -> None:
    with pytest.raises(BackendError, match="not a non-empty region") as caught:
        DiskPool().open(data_file[0], offset, nbytes)
    assert caught.value.status is ErrorStatus.MEMORY_ALLOCATION


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "weights.fifo"
    os.mkfifo(fifo)
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            DiskPool().open(fifo, 0, 8)
        except BaseException as error:  # noqa: BLE001 - the test looks at whatever it was
            errors.append(error)

    # In a thread: the open waited for a writer forever, and would hang the test run.
    opener = threading.Thread(target=open_it, daemon=True)
    opener.start()
    opener.join(10)
    assert not opener.is_alive(), "DiskPool.open waits for a writer of the FIFO"
    (error,) = errors
    assert isinstance(error, BackendError) and "is not a regular file" in str(error)
    assert error.status is ErrorStatus.MEMORY_ALLOCATION


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "."])
def test_devices_and_folders_are_refused(special: str) -> None:
    with pytest.raises(BackendError, match="not a regular file|cannot map") as caught:
        DiskPool().open(special, 0, 8)
    assert caught.value.status is ErrorStatus.MEMORY_ALLOCATION


@pytest.mark.parametrize("path", [None, 3, b"weights.bin", "weights\0.bin"], ids=repr)
def test_what_is_no_path_is_an_allocation_error(path: object) -> None:
    with pytest.raises(BackendError, match="a file path") as caught:
        DiskPool().open(path, 0, 8)  # type: ignore[arg-type]
    assert caught.value.status is ErrorStatus.MEMORY_ALLOCATION


def test_a_missing_file_is_an_allocation_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="cannot map") as caught:
        DiskPool().open(tmp_path / "absent.safetensors", 0, 8)
    assert caught.value.status is ErrorStatus.MEMORY_ALLOCATION
    assert isinstance(caught.value.__cause__, FileNotFoundError)


def test_reads_are_bounds_checked(data_file: tuple[Path, bytes]) -> None:
    pool = DiskPool()
    buf = pool.open(data_file[0], 0, 100)
    with pytest.raises(BackendError) as caught:
        pool.read(buf, bytearray(10), offset=95)
    assert caught.value.status is ErrorStatus.MEMORY_COPY_P2H


def test_buffers_share_a_map_that_closes_with_the_last(data_file: tuple[Path, bytes]) -> None:
    path, content = data_file
    pool = DiskPool()
    first, second = pool.open(path, 0, 10), pool.open(path, 10, 10)
    assert first.handle.mapping is second.handle.mapping
    pool.release(first)
    assert read_all(pool, second) == content[10:20]  # still mapped
    mapping = second.handle.mapping
    pool.release(second)
    assert mapping.map.closed
    with pytest.raises(BackendError, match="already released"):
        pool.read(second, bytearray(10))


def test_a_rewritten_file_gets_a_new_map(data_file: tuple[Path, bytes]) -> None:
    path, content = data_file
    pool = DiskPool()
    old = pool.open(path, 0, 4)
    replacement = path.with_suffix(".new")
    replacement.write_bytes(b"NEW!" + content[4:])
    os.replace(replacement, path)
    new = pool.open(path, 0, 4)
    assert read_all(pool, old) == content[:4]
    assert read_all(pool, new) == b"NEW!"
