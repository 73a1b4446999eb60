"""``zyx.load`` and ``zyx.save``: safetensors files, read lazily through the disk pool, and
round trips both ways with the ``safetensors`` package itself."""

from __future__ import annotations

import gc
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zyx
from zyx import serialization
from zyx.disk import DiskPool

safetensors_numpy = pytest.importorskip("safetensors.numpy")

NUMPY_DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64",
                "int64", "float16", "float32", "float64"]  # fmt: skip
"""The dtypes both zyx and safetensors.numpy have (bf16: through torch, below)."""


def sample(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of every read from a disk buffer, as they happen."""
    seen: list[int] = []
    original = DiskPool._read

    def counting(self: DiskPool, buf: Any, view: memoryview, offset: int) -> None:
        seen.append(view.nbytes)
        original(self, buf, view, offset)

    monkeypatch.setattr(DiskPool, "_read", counting)
    return seen


def test_files_from_safetensors_load_on_every_device(array_device: Any, tmp_path: Path) -> None:
    arrays = {f"t_{d}": sample(d, (3, 5), i) for i, d in enumerate(NUMPY_DTYPES)}
    arrays["scalar"] = np.array(2.5, np.float32)
    arrays["empty"] = np.zeros((0, 4), np.int32)
    path = tmp_path / "package.safetensors"
    safetensors_numpy.save_file(arrays, str(path))
    loaded = zyx.load(path, device=array_device)
    assert set(loaded) == set(arrays)
    for name, expected in arrays.items():
        got = loaded[name]
        assert got.device is array_device and got.shape == expected.shape
        np.testing.assert_array_equal(got.numpy(), expected)
        assert got.numpy().dtype == expected.dtype


def test_files_from_zyx_load_in_safetensors(array_device: Any, tmp_path: Path) -> None:
    values = {d: sample(d, (4, 3), i) for i, d in enumerate(NUMPY_DTYPES)}
    arrays = {f"t_{d}": zyx.asarray(v, device=array_device) for d, v in values.items()}
    arrays["computed"] = arrays["t_float32"][::-1] * 2 + 1  # lazy: save realizes it
    path = tmp_path / "zyx.safetensors"
    zyx.save(path, arrays)
    back = safetensors_numpy.load_file(str(path))
    assert set(back) == set(arrays)
    for dtype, expected in values.items():
        np.testing.assert_array_equal(back[f"t_{dtype}"], expected)
        assert back[f"t_{dtype}"].dtype == expected.dtype
    np.testing.assert_array_equal(back["computed"], values["float32"][::-1] * 2 + 1)


def test_saved_data_is_aligned_and_the_header_padded(tmp_path: Path) -> None:
    arrays = {"a": zyx.asarray(np.ones(3, np.uint8)), "b": zyx.asarray(np.ones(3, np.float64))}
    path = tmp_path / "aligned.safetensors"
    zyx.save(path, arrays)
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    assert (8 + size) % 8 == 0
    header = json.loads(raw[8 : 8 + size])
    assert header["b"]["data_offsets"] == [0, 24] and header["a"]["data_offsets"] == [24, 27]


def test_load_reads_nothing_until_an_array_is_used(
    array_device: Any, tmp_path: Path, reads: list[int]
) -> None:
    big, small = np.arange(1 << 16, dtype=np.float32), np.arange(10, dtype=np.int64)
    path = tmp_path / "lazy.safetensors"
    safetensors_numpy.save_file({"big": big, "small": small}, str(path))
    loaded = zyx.load(path, device=array_device)
    doubled = loaded["small"] * 2
    assert reads == [], "load and lazy ops read no data"
    np.testing.assert_array_equal(doubled.numpy(), small * 2)
    assert reads == [small.nbytes], "only the used array's bytes are read"


def test_the_map_closes_when_the_arrays_die(tmp_path: Path) -> None:
    path = tmp_path / "closing.safetensors"
    safetensors_numpy.save_file({"a": np.ones(8, np.float32), "b": np.ones(2, np.int8)}, str(path))
    loaded = zyx.load(path, device="host")
    pool = serialization._pool()
    assert len(pool._maps) == 1, "one map per file, shared by its arrays"
    zyx.realize(*loaded.values())
    del loaded
    gc.collect()
    assert pool._maps == {}


def test_save_over_a_loaded_file_leaves_its_arrays_alone(tmp_path: Path) -> None:
    path = tmp_path / "again.safetensors"
    safetensors_numpy.save_file({"x": np.arange(4, dtype=np.float32)}, str(path))
    first = zyx.load(path, device="host")
    zyx.save(path, {"x": zyx.asarray(np.full(100, 7, np.float32))})
    np.testing.assert_array_equal(first["x"].numpy(), np.arange(4))
    np.testing.assert_array_equal(zyx.load(path)["x"].numpy(), np.full(100, 7))
    assert [p.name for p in tmp_path.iterdir()] == ["again.safetensors"], "no temporary left"


def test_bf16_round_trips_with_torch(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    source = torch.arange(-8, 8, dtype=torch.float32).to(torch.bfloat16) / 4
    path = tmp_path / "bf16.safetensors"
    safetensors_torch.save_file({"w": source}, str(path))
    loaded = zyx.load(path, device="host")["w"]
    assert loaded.dtype == zyx.bfloat16
    np.testing.assert_array_equal(loaded.astype(zyx.float32).numpy(), source.float().numpy())
    zyx.save(tmp_path / "back.safetensors", {"w": loaded * 2})
    back = safetensors_torch.load_file(str(tmp_path / "back.safetensors"))["w"]
    assert back.dtype == torch.bfloat16 and torch.equal(back, source * 2)


def test_default_device(tmp_path: Path) -> None:
    path = tmp_path / "default.safetensors"
    safetensors_numpy.save_file({"x": np.ones(2, np.float32)}, str(path))
    assert zyx.load(path)["x"].device is zyx.device()


def header_file(path: Path, header: bytes, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


@pytest.mark.parametrize(
    ("header", "data", "message"),
    [
        (b"not json", b"", "not JSON"),
        (b"[]", b"", "not a JSON object"),
        (b'{"x": {"dtype": "F32"}}', b"", "malformed entry"),
        (b'{"x": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}', b"\0", "lacks"),
        (b'{"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', b"\0" * 4, "8 bytes"),
        (b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', b"", "truncated"),
    ],
)
def test_malformed_files_are_clear_errors(
    tmp_path: Path, header: bytes, data: bytes, message: str
) -> None:
    path = header_file(tmp_path / "bad.safetensors", header, data)
    with pytest.raises(ValueError, match=message):
        zyx.load(path, device="host")


def test_not_a_safetensors_file(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_bytes(b"abc")
    with pytest.raises(ValueError, match="not a safetensors file"):
        zyx.load(short)
    huge = tmp_path / "huge"
    huge.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(ValueError, match="header would be"):
        zyx.load(huge)


def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        zyx.load(fifo)


def test_save_takes_names_to_zyx_arrays(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="zyx.asarray"):
        zyx.save(tmp_path / "x", {"a": np.ones(2)})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="__metadata__"):
        zyx.save(tmp_path / "x", {"__metadata__": zyx.asarray(np.ones(2))})
