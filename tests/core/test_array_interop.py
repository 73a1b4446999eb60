"""numpy and DLPack: ``x.numpy()``, ``np.asarray(x)``, ``__dlpack__`` and ``from_dlpack``,
zero-copy where the memory allows (the host with numpy and torch; CUDA with torch and
cupy, on the GPU machine), a copy elsewhere, and ``BufferError`` where ``copy=False``
cannot be met."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

import zyx
from zyx.array.interop import IS_COPIED, READ_ONLY, _VersionedHead

CPU = (1, 0)


def host() -> Any:
    return zyx.device("host")


def data_pointer(x: zyx.Tensor) -> int:
    """The address of a realized host array's memory."""
    x.realize()
    assert x.node.buffer is not None
    return int(x.node.buffer.handle.ctypes.data)


def capsule_flags(capsule: Any) -> int:
    from zyx.array.interop import _capsule_pointer

    return int(_VersionedHead.from_address(_capsule_pointer(capsule, b"dltensor_versioned")).flags)


# ---- to numpy, on every device ------------------------------------------------------------


def test_numpy_and_asarray_on_every_device(array_device: Any) -> None:
    values = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    x = zyx.asarray(values, device=array_device)
    y = x * 2 + 1
    np.testing.assert_array_equal(y.numpy(), values * 2 + 1)
    np.testing.assert_array_equal(np.asarray(y), values * 2 + 1)
    assert np.asarray(y, dtype=np.float64).dtype == np.float64
    assert x.numpy().flags.writeable  # a copy: the caller's own


def test_dlpack_to_numpy_on_every_device(array_device: Any) -> None:
    values = np.arange(12, dtype=np.int32).reshape(3, 4)
    x = zyx.asarray(values, device=array_device)
    back = np.from_dlpack(x[:, ::-1], device="cpu")  # a CUDA array's capsule is on CUDA
    np.testing.assert_array_equal(back, values[:, ::-1])
    shares = array_device.dlpack_device() is not None
    assert x.__dlpack_device__() == (array_device.dlpack_device() if shares else CPU)


# ---- export --------------------------------------------------------------------------------


def test_host_export_shares_memory_read_only() -> None:
    x = zyx.asarray(np.arange(8, dtype=np.float64), device=host()) + 1
    view = np.from_dlpack(x)
    assert view.ctypes.data == data_pointer(x)
    assert not view.flags.writeable, "zyx never changes a realized array; nor may numpy"
    np.testing.assert_array_equal(view, np.arange(1, 9))


def test_export_outlives_the_array_and_is_not_reused() -> None:
    x = zyx.asarray(np.arange(1024, dtype=np.float32), device=host()) * 3
    view = np.from_dlpack(x)
    del x
    gc.collect()
    # The allocator's cache must not hand the exported buffer to a new array.
    others = [zyx.asarray(np.zeros(1024, np.float32), device=host()) + 7 for _ in range(4)]
    zyx.realize(*others)
    np.testing.assert_array_equal(view, np.arange(1024, dtype=np.float32) * 3)


def test_export_releases_the_buffer_when_the_consumer_is_done() -> None:
    pool = host().pool
    zyx.empty_cache()
    before = pool.free_bytes()
    x = zyx.asarray(np.ones(1 << 16, np.float32), device=host()) + 1
    view = np.from_dlpack(x)
    del x
    gc.collect()
    assert pool.free_bytes() < before
    del view
    gc.collect()
    zyx.empty_cache()
    assert pool.free_bytes() == before


@pytest.mark.parametrize("way", ["export", "import"])
def test_an_array_dying_during_dlpack_is_freed_on_the_way_out(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An array whose last reference goes while ``__dlpack__`` or ``from_dlpack`` holds
    the front end's lock (the garbage collector runs anywhere) is queued there, and freed
    to the cache as the call lets the lock go, not at some later realize."""
    from zyx.allocator import allocator

    device = host()
    doomed = [(zyx.asarray(np.ones(4096, np.float32), device=device) + 1).realize()]
    call = "dlpack_export" if way == "export" else "dlpack_import"
    real = getattr(device, call)

    def dropping(*args: Any, **kwargs: Any) -> Any:
        doomed.clear()
        return real(*args, **kwargs)

    x = zyx.asarray(np.arange(8, dtype=np.float64), device=device) + 1
    x.realize()
    zyx.empty_cache()
    monkeypatch.setattr(device, call, dropping)
    if way == "export":
        made: Any = np.from_dlpack(x)
    else:
        made = zyx.from_dlpack(np.arange(8.0), device=device)
    assert not doomed and allocator.cached_bytes() == 4096 * 4
    del made  # only here: a result dying frees what is queued too


def test_unversioned_export_shares_memory() -> None:
    # A DLPack 0.x capsule cannot say read-only (numpy refuses to export a read-only array
    # that way), so it is made from a writable view: its consumer is trusted not to write.
    x = zyx.asarray(np.arange(4, dtype=np.int64), device=host())

    class Legacy:  # a consumer that asks for no version: an unversioned capsule
        def __dlpack__(self, **_: Any) -> Any:
            return x.__dlpack__()

        def __dlpack_device__(self) -> tuple[int, int]:
            return x.__dlpack_device__()

    assert "versioned" not in repr(x.__dlpack__())
    view = np.from_dlpack(Legacy())
    assert view.ctypes.data == data_pointer(x)


def test_versioned_export_flags() -> None:
    x = zyx.asarray(np.arange(4, dtype=np.int64), device=host())
    shared = x.__dlpack__(max_version=(1, 0))
    assert capsule_flags(shared) & READ_ONLY and not capsule_flags(shared) & IS_COPIED
    copied = x.__dlpack__(max_version=(1, 0), copy=True)
    assert capsule_flags(copied) & IS_COPIED and not capsule_flags(copied) & READ_ONLY


def test_copy_true_export_is_a_writable_copy() -> None:
    x = zyx.asarray(np.arange(6, dtype=np.float32), device=host())
    out = np.from_dlpack(x, copy=True)
    assert out.ctypes.data != data_pointer(x) and out.flags.writeable
    out[:] = -1
    np.testing.assert_array_equal(x.numpy(), np.arange(6))


def test_device_without_shared_memory_exports_by_copy(array_device: Any) -> None:
    if array_device.dlpack_device() is not None:
        pytest.skip(f"{array_device.name} shares its memory by DLPack")
    x = zyx.asarray(np.arange(5, dtype=np.float32), device=array_device)
    with pytest.raises(BufferError, match="only by a copy, and copy=False"):
        x.__dlpack__(copy=False)
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(5))
    assert capsule_flags(x.__dlpack__(max_version=(1, 0))) & IS_COPIED


def test_export_to_a_named_device(array_device: Any) -> None:
    x = zyx.asarray(np.arange(5, dtype=np.int16), device=array_device)
    np.testing.assert_array_equal(np.from_dlpack(x, device="cpu"), np.arange(5))
    with pytest.raises(BufferError, match="no device of DLPack device"):
        x.__dlpack__(dl_device=(9, 0))  # kDLVPI: zyx has none
    with pytest.raises(ValueError, match="pair"):
        x.__dlpack__(dl_device=(1,))


@pytest.mark.parametrize("version", ["1.0", (1,), (1.5, 0), 3])
def test_a_max_version_that_is_no_pair_of_ints_is_an_error_naming_it(
    array_device: Any, version: Any
) -> None:
    x = zyx.asarray(np.arange(3, dtype=np.float32), device=array_device)
    with pytest.raises(ValueError, match="max_version is a .major, minor. pair of ints"):
        x.__dlpack__(max_version=version)


def test_a_stream_on_the_host_is_an_error_naming_it() -> None:
    """The CPU has no streams: DLPack's stream is None there (numpy's own error named
    numpy)."""
    x = zyx.asarray(np.arange(3, dtype=np.float32), device="host")
    with pytest.raises(ValueError, match="stream is None on the CPU.*got 1"):
        x.__dlpack__(stream=1)
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(3))


def test_bf16_host_export_shares_memory_or_says_why_it_cannot() -> None:
    """The host exports through numpy: numpy 2.5 exports ml_dtypes' bfloat16 by DLPack, in
    place; numpy 2.4 refuses, and the error names the dtype."""
    values = np.array([1.5, -2.25, 3.0, 0.0078125], np.float32)  # each exact in bf16
    x = zyx.asarray(values, device=host()).astype(zyx.bfloat16)
    try:
        view = np.from_dlpack(x)
    except BufferError as error:
        assert "bf16" in str(error), error
        return
    assert str(view.dtype) == "bfloat16" and view.ctypes.data == data_pointer(x)
    np.testing.assert_array_equal(view.astype(np.float32), values)


# ---- import --------------------------------------------------------------------------------


def test_host_import_is_zero_copy_and_keeps_the_producer_alive() -> None:
    source = np.arange(10, dtype=np.float32)
    alive = weakref.ref(source)
    x = zyx.from_dlpack(source)
    assert x.device is host() and data_pointer(x) == source.ctypes.data
    del source
    gc.collect()
    assert alive() is not None, "the import must keep its producer alive"
    np.testing.assert_array_equal((x + 1).numpy(), np.arange(1, 11))
    del x
    gc.collect()
    assert alive() is None, "a freed import must let its producer go"


def test_host_import_counts_no_pool_memory() -> None:
    pool = host().pool
    before = pool.free_bytes()
    x = zyx.from_dlpack(np.ones(1 << 16, np.float64))
    assert pool.free_bytes() == before
    del x
    gc.collect()
    assert pool.free_bytes() == before


def test_import_shares_memory_as_dlpack_says_and_zyx_never_writes_it() -> None:
    source = np.arange(6, dtype=np.int64)
    x = zyx.from_dlpack(source)
    later = x * 10  # lazy: it reads the memory when it runs
    source[0] = 100  # a producer's write, before the computation runs: seen
    np.testing.assert_array_equal(later.numpy(), [1000, 10, 20, 30, 40, 50])
    x += 1  # rebinds x to a new value
    x[2] = -5
    np.testing.assert_array_equal(x.numpy(), [101, 2, -5, 4, 5, 6])
    np.testing.assert_array_equal(source, [100, 1, 2, 3, 4, 5])


def test_copy_true_import_holds_the_values_of_the_moment() -> None:
    source = np.arange(4, dtype=np.float32)
    x = zyx.from_dlpack(source, copy=True)
    assert data_pointer(x) != source.ctypes.data
    source[:] = 9
    np.testing.assert_array_equal(x.numpy(), np.arange(4))


def test_read_only_producer_imports_without_copy() -> None:
    source = np.arange(5, dtype=np.uint8)
    source.flags.writeable = False
    x = zyx.from_dlpack(source)
    assert data_pointer(x) == source.ctypes.data
    np.testing.assert_array_equal((x + 1).numpy(), np.arange(1, 6))


def test_strided_producer_is_copied_unless_copy_false() -> None:
    source = np.arange(20, dtype=np.int32)[::3]
    np.testing.assert_array_equal(zyx.from_dlpack(source).numpy(), source)
    with pytest.raises(BufferError, match="C-contiguous"):
        zyx.from_dlpack(source, copy=False)


def test_import_onto_every_device(array_device: Any) -> None:
    source = np.random.default_rng(2).integers(-50, 50, (4, 3)).astype(np.int32)
    x = zyx.from_dlpack(source, device=array_device)
    assert x.device is array_device and x.shape == (4, 3) and x.dtype == zyx.int32
    np.testing.assert_array_equal((x - 1).numpy(), source - 1)
    if array_device is not host():
        with pytest.raises(BufferError, match="only by a copy"):
            zyx.from_dlpack(source, device=array_device, copy=False)


def test_from_dlpack_of_a_zyx_array(array_device: Any) -> None:
    x = zyx.asarray(np.arange(3, dtype=np.float32), device=array_device)
    same = zyx.from_dlpack(x)
    assert same is not x and same.node is x.node
    same += 1  # a new array object: x keeps its value
    np.testing.assert_array_equal(x.numpy(), np.arange(3))
    moved = zyx.from_dlpack(x, device=host())
    np.testing.assert_array_equal(moved.numpy(), np.arange(3))
    if array_device is not host():
        with pytest.raises(BufferError, match="only by a copy"):
            zyx.from_dlpack(x, device=host(), copy=False)


def test_empty_and_scalar_imports() -> None:
    empty = zyx.from_dlpack(np.zeros((0, 3), np.float32))
    assert empty.shape == (0, 3) and empty.numpy().shape == (0, 3)
    scalar = zyx.from_dlpack(np.array(7, dtype=np.int64))
    assert scalar.shape == () and int(scalar) == 7


def test_unknown_device_is_a_clear_error() -> None:
    class OnRocm:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (10, 0)

    with pytest.raises(BufferError, match="no zyx device holds DLPack device"):
        zyx.from_dlpack(OnRocm())


# ---- torch on the CPU (skipped where torch is not installed) --------------------------------


def test_torch_cpu_both_ways_without_copies() -> None:
    torch = pytest.importorskip("torch")
    x = zyx.asarray(np.arange(6, dtype=np.float32).reshape(2, 3), device=host()) * 2
    t = torch.from_dlpack(x)
    assert t.data_ptr() == data_pointer(x) and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), np.arange(6).reshape(2, 3) * 2)
    source = torch.arange(8, dtype=torch.int64)
    alive = weakref.ref(source)
    y = zyx.from_dlpack(source)
    assert y.device is host() and data_pointer(y) == source.data_ptr()
    del source
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal((y + 1).numpy(), np.arange(1, 9))
    del y
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "int32", "float16", "float64"])
def test_torch_cpu_dtypes(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    values = np.arange(-3, 5).astype(dtype)
    x = zyx.from_dlpack(torch.from_numpy(values.copy()))
    assert x.dtype == getattr(zyx, dtype)
    np.testing.assert_array_equal(x.numpy(), values)
    np.testing.assert_array_equal(torch.from_dlpack(x).numpy(), values)


# ---- CUDA with torch and cupy (on the GPU machine; skipped elsewhere) ----------------------


@pytest.fixture
def cuda() -> Any:
    try:
        return zyx.device("cuda")
    except zyx.ZyxError as error:
        pytest.skip(f"no zyx CUDA device: {error}")


def cuda_pointer(x: zyx.Tensor) -> int:
    x.realize()
    assert x.node.buffer is not None
    return int(x.node.buffer.handle)


@pytest.mark.cuda
@pytest.mark.gpu
@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_cuda_export_without_copy(cuda: Any, library: str) -> None:
    lib = pytest.importorskip(library)
    values = np.random.default_rng(3).standard_normal((64, 33)).astype(np.float32)
    x = zyx.asarray(values, device=cuda) * 2  # realized by the export: the consumer waits
    assert x.__dlpack_device__() == (2, cuda.index)
    out = lib.from_dlpack(x)
    pointer = out.data_ptr() if library == "torch" else out.data.ptr
    assert pointer == cuda_pointer(x)
    expected = values * 2
    del x
    gc.collect()
    others = [zyx.asarray(np.zeros_like(values), device=cuda) + 1 for _ in range(4)]
    zyx.realize(*others)  # the allocator's cache must not reuse the exported buffer
    host_copy = out.cpu().numpy() if library == "torch" else lib.asnumpy(out)
    np.testing.assert_array_equal(host_copy, expected)


@pytest.mark.cuda
@pytest.mark.gpu
@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_cuda_import_without_copy(cuda: Any, library: str) -> None:
    lib = pytest.importorskip(library)
    if library == "torch":
        source = lib.arange(1 << 20, dtype=lib.float32, device="cuda") * 3
        pointer, used = source.data_ptr(), lib.cuda.memory_allocated
    else:
        source = lib.arange(1 << 20, dtype=lib.float32) * 3
        pointer, used = source.data.ptr, lib.get_default_memory_pool().used_bytes
    x = zyx.from_dlpack(source)
    assert x.device is cuda and cuda_pointer(x) == pointer
    held = used()
    del source
    gc.collect()
    assert used() == held, "the import must keep its producer's memory"
    expected = np.arange(1 << 20, dtype=np.float32) * 3 + 1
    np.testing.assert_array_equal((x + 1).numpy(), expected)
    del x
    gc.collect()
    cuda.synchronize()
    gc.collect()
    assert used() < held, "a freed import must give its producer's memory back"


@pytest.mark.cuda
@pytest.mark.gpu
def test_cuda_to_other_devices_by_copy(cuda: Any) -> None:
    torch = pytest.importorskip("torch")
    source = torch.arange(12, dtype=torch.int32, device="cuda").reshape(3, 4)
    on_host = zyx.from_dlpack(source, device=host())
    np.testing.assert_array_equal(on_host.numpy(), np.arange(12).reshape(3, 4))
    with pytest.raises(BufferError, match="only by a copy"):
        zyx.from_dlpack(source, device=host(), copy=False)
    x = zyx.asarray(np.arange(5, dtype=np.float64), device=cuda)
    np.testing.assert_array_equal(np.from_dlpack(x, device="cpu"), np.arange(5))
    with pytest.raises(BufferError, match="only by a copy"):
        x.__dlpack__(dl_device=(1, 0), copy=False)


@pytest.mark.cuda
@pytest.mark.gpu
def test_cuda_strided_torch_tensor_is_copied(cuda: Any) -> None:
    torch = pytest.importorskip("torch")
    source = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4).t()
    x = zyx.from_dlpack(source)
    np.testing.assert_array_equal(x.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4).T)
    with pytest.raises(BufferError, match="contiguous"):
        zyx.from_dlpack(source, copy=False)


@pytest.mark.cuda
@pytest.mark.gpu
def test_cuda_misaligned_torch_view_is_copied(cuda: Any) -> None:
    """A view 4 bytes into its storage: zyx's kernels copy 16 bytes at a time (cp.async)
    with plans made for aligned buffers, so it is copied into an aligned buffer, and
    refused with ``copy=False``."""
    torch = pytest.importorskip("torch")
    values = np.random.default_rng(11).standard_normal(4097).astype(np.float32)
    view = torch.from_numpy(values).cuda()[1:]
    assert view.data_ptr() % 16
    with pytest.raises(BufferError, match="aligned"):
        zyx.from_dlpack(view, copy=False)
    x = zyx.from_dlpack(view)
    assert cuda_pointer(x) % 16 == 0
    np.testing.assert_array_equal((x * 2).numpy(), values[1:] * 2)
