"""The backend contract: ``MemoryPool``, ``Buffer``, ``Device``, ``Program``, ``DeviceInfo``.

Follows zyx 0.17: buffers are reference-counted, launches are fire-and-forget, events stay
inside the backend, and a read back to the host is the sync point where asynchronous
errors surface.

A backend subclasses ``MemoryPool`` and ``Device``. The public methods of ``MemoryPool``
check every size and offset and then call the underscored methods a backend implements,
so a bad argument is an error before any native call, in every backend alike.

Optional: sharing memory by DLPack. A device whose buffers other libraries can use in
place (the host's with numpy and torch, CUDA's with torch and cupy) says where they lie,
``Device.dlpack_device()``, and implements ``dlpack_export`` and ``dlpack_import``;
``zyx.array.interop`` (``__dlpack__``, ``from_dlpack``) calls them, under the front end's
lock. A device that does not (the default) exchanges arrays by a copy through the host.

Every public method of a pool, a device and a program may be called from any thread: a
pool and its device share one re-entrant lock (``MemoryPool.lock``), which the pool's
public methods here take and a device takes around its launches and syncs.
"""

from __future__ import annotations

import numbers
import reprlib
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence, Sized
from typing import Any, ClassVar, TypeAlias, TypeVar

__all__ = [
    "Arg", "Buffer", "Device", "DeviceInfo", "MemoryPool", "Prepared", "Program", "Recording",
    "Scalar", "byte_view", "check_compilable", "not_a_program",
]  # fmt: skip

from zyx.device_info import DeviceInfo
from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus, IRError
from zyx.ir.extent import Extents, extents
from zyx.ir.ops import Dim, Kernel, ParamKind, SymDim
from zyx.ir.verify import check_limits

Scalar: TypeAlias = int | float | bool
Arg: TypeAlias = "Buffer | Scalar"


class Buffer:
    """A region of a pool's memory. ``handle`` is the backend's own (pointer, cl.Buffer, ...).

    Owned through ``MemoryPool.retain``/``release``; freed when ``refcount`` reaches zero
    and the work that uses it has finished.
    """

    __slots__ = ("pool", "nbytes", "handle", "refcount", "tracking", "__weakref__")

    def __init__(self, pool: MemoryPool, nbytes: int, handle: Any) -> None:
        self.pool = pool
        self.nbytes = nbytes
        self.handle = handle
        self.refcount = 1
        self.tracking: Any = None
        """Backend-private scheduling state, owned by the device of ``pool`` (with several
        queues: its ``zyx.streams.DependencyTracker``'s record of the buffer's last writer
        and readers). ``None`` while untracked; nothing else reads or writes it."""

    def __repr__(self) -> str:
        return f"Buffer({self.pool.name}, {self.nbytes} B, refs={self.refcount})"


_PLAIN_FORMATS = frozenset("?bBhHiIlLqQnNefdgc") | {"Zf", "Zd", "Zg"}
"""The buffer-protocol formats of plain numbers (and bytes), less any byte-order prefix:
what a copy takes. Anything else is refused: an object array's elements are pointers, which
a read would forge (and crash on) and a write would copy raw; structs and strings are no
kernel's data."""


def byte_view(data: Any, *, writable: bool = False) -> memoryview:
    """A flat byte view of a contiguous buffer-protocol object of plain numbers (numpy
    arrays of a numeric dtype, bf16 too)."""
    try:
        view = memoryview(data)
    except (TypeError, ValueError):
        # numpy refuses to export extension dtypes (bf16) through the buffer protocol; its
        # view refuses dtypes that hold objects, and a 0-D array another itemsize (flat).
        try:
            view = memoryview(data.reshape(-1).view("uint8"))
        except (AttributeError, TypeError, ValueError):
            raise _not_plain(data) from None
    if view.format.lstrip("@=<>!") not in _PLAIN_FORMATS:
        raise _not_plain(data)
    if not view.c_contiguous:
        raise BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, "host data must be C-contiguous")
    if writable and view.readonly:
        raise BackendError(ErrorStatus.MEMORY_COPY_P2H, "the output of a read is read-only")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _not_plain(data: object) -> BackendError:
    dtype = getattr(data, "dtype", None)
    what = type(data).__name__ if dtype is None else f"an array of dtype {dtype}"
    return BackendError(
        ErrorStatus.INCORRECT_KERNEL_ARG,
        f"host data must support the buffer protocol and hold plain numbers (a numeric numpy "
        f"array), got {what}: {reprlib.repr(data)}",
    )


class _PoolLock:
    """``MemoryPool.lock``: one re-entrant lock per pool, made on first use, so that a
    backend's pool need not call an ``__init__`` of the contract's."""

    _making = threading.Lock()

    def __get__(self, pool: MemoryPool | None, owner: type | None = None) -> Any:
        if pool is None:
            return self
        with self._making:  # two threads' first uses get one lock
            lock = pool.__dict__.setdefault("lock", threading.RLock())
        return lock


class MemoryPool(ABC):
    """Memory of one device (or the host, or a file). Every copy is bounds-checked here.

    Every public method may be called from any thread: each takes ``lock`` around the
    underscored methods a backend implements, which therefore run one at a time. A backend
    whose pool relays ``free_bytes`` or ``synchronize`` to state it shares with its device
    takes ``lock`` there too, and its device takes it around its own use of that state
    (``Device.lock``)."""

    name: str
    exact_free_bytes: ClassVar[bool] = False
    """Whether ``free_bytes()`` falls and rises by exactly the size of each allocation and
    final release (the pool counts them). ``False`` where it relays the device's own,
    approximate report; the conformance suite then does not check it."""
    lock: threading.RLock = _PoolLock()  # type: ignore[assignment]
    """The lock of this pool and its device (re-entrant). What a backend runs while it
    holds it takes no other pool's lock, except through ``copy_from``, which holds both
    pools' locks, taken in one order for every pair, so that two copies in opposite
    directions cannot deadlock."""

    @abstractmethod
    def free_bytes(self) -> int:
        """Bytes that can still be allocated."""

    def allocate(self, nbytes: int) -> Buffer:
        """A new buffer of ``nbytes`` with refcount 1. Out of memory raises MemoryAllocation."""
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION, f"{self.name}: cannot allocate {nbytes!r} bytes"
            )
        with self.lock:
            return self._allocate(nbytes)

    def retain(self, buf: Buffer) -> None:
        with self.lock:
            self._check_live(buf, ErrorStatus.MEMORY_DEALLOCATION)
            buf.refcount += 1

    def release(self, buf: Buffer) -> None:
        """Drop one reference; at zero the memory is freed once work using it is done."""
        with self.lock:
            self._check_live(buf, ErrorStatus.MEMORY_DEALLOCATION)
            buf.refcount -= 1
            if buf.refcount == 0:
                self._free(buf)

    def write(self, buf: Buffer, data: Any, offset: int = 0) -> None:
        """Copy host ``data`` into ``buf`` at byte ``offset``. Takes the data when called
        (copied or staged): the caller may change or drop it as soon as this returns. The
        copy into ``buf`` may still be in flight; later commands on the pool see it done."""
        view = byte_view(data)
        with self.lock:
            self._check_range(buf, offset, view.nbytes, ErrorStatus.MEMORY_COPY_H2P)
            self._write(buf, view, offset)

    def read(self, buf: Buffer, out: Any, offset: int = 0) -> None:
        """Copy ``len(out)`` bytes from ``buf`` at ``offset`` into host ``out``. Blocks; raises
        the first pending asynchronous error of this pool's device."""
        view = byte_view(out, writable=True)
        with self.lock:
            self._check_range(buf, offset, view.nbytes, ErrorStatus.MEMORY_COPY_P2H)
            self._read(buf, view, offset)

    def copy_from(self, src_pool: MemoryPool, src_buf: Buffer, dst_buf: Buffer) -> None:
        """Copy all of ``src_buf`` (in ``src_pool``) into ``dst_buf`` of this pool."""
        if not isinstance(src_pool, MemoryPool):
            raise BackendError(
                ErrorStatus.MEMORY_COPY_P2P, f"copy from {reprlib.repr(src_pool)}, not a pool"
            )
        first, second = sorted((self.lock, src_pool.lock), key=id)
        with first, second:
            src_pool._check_live(src_buf, ErrorStatus.MEMORY_COPY_P2P)
            self._check_range(dst_buf, 0, src_buf.nbytes, ErrorStatus.MEMORY_COPY_P2P)
            if src_buf.nbytes != dst_buf.nbytes:
                raise BackendError(
                    ErrorStatus.MEMORY_COPY_P2P,
                    f"copy of {src_buf.nbytes} bytes into a buffer of {dst_buf.nbytes} bytes",
                )
            self._copy_from(src_pool, src_buf, dst_buf)

    def synchronize(self) -> None:
        """Wait for every copy this pool started."""

    @abstractmethod
    def _allocate(self, nbytes: int) -> Buffer: ...

    @abstractmethod
    def _free(self, buf: Buffer) -> None: ...

    @abstractmethod
    def _write(self, buf: Buffer, view: memoryview, offset: int) -> None: ...

    @abstractmethod
    def _read(self, buf: Buffer, view: memoryview, offset: int) -> None: ...

    def _copy_from(self, src_pool: MemoryPool, src_buf: Buffer, dst_buf: Buffer) -> None:
        """Staged through host memory; backends override for the pools they copy natively."""
        staging = bytearray(src_buf.nbytes)
        src_pool.read(src_buf, staging)
        self.write(dst_buf, staging)

    def _check_live(self, buf: Buffer, status: ErrorStatus) -> None:
        if not isinstance(buf, Buffer) or buf.pool is not self:
            raise BackendError(status, f"{reprlib.repr(buf)} is not a buffer of pool {self.name}")
        if buf.refcount <= 0:
            raise BackendError(status, f"{buf!r} was already released")

    def _check_range(self, buf: Buffer, offset: int, nbytes: int, status: ErrorStatus) -> None:
        self._check_live(buf, status)
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise BackendError(status, f"{self.name}: the offset must be an int, got {offset!r}")
        if offset < 0 or offset + nbytes > buf.nbytes:
            raise BackendError(
                status,
                f"{self.name}: {nbytes} bytes at offset {offset!r} do not fit in a buffer "
                f"of {buf.nbytes} bytes",
            )


Prepared: TypeAlias = tuple[tuple["Arg", ...], list["Buffer"], list["Buffer"], tuple[int, int, int]]
"""What ``Program.inspect`` returns: the arguments (each numpy scalar as the Python number
it holds), the buffers the launch reads (``Global`` params) and writes (``GlobalMut``),
each in param order, and its work-groups per axis."""


class Program:
    """A compiled kernel on one device. Backends subclass it to hold their handles.

    What it knows of its kernel never changes, and ``released`` changes once, under its
    device's lock: every method may be called from any thread.
    """

    def __init__(self, device: Device, kernel: Kernel) -> None:
        self.device = device
        self.name = kernel.name
        self.param_kinds: tuple[ParamKind, ...] = tuple(p.kind for p in kernel.params)
        self.param_dtypes: tuple[DType, ...] = tuple(p.dtype for p in kernel.params)
        kinds = self.param_kinds
        self.buffer_positions = tuple(i for i, k in enumerate(kinds) if k is not ParamKind.VARIABLE)
        """The positions of the buffer params (``Global``, ``GlobalMut``) among all."""
        self.scalar_positions = tuple(i for i, k in enumerate(kinds) if k is ParamKind.VARIABLE)
        """The positions of the ``Variable`` params among all."""
        self.local_size: tuple[int, int, int] = kernel.local_size
        self.global_size: tuple[Dim, Dim, Dim] = kernel.global_size
        self.symbolic = any(isinstance(d, SymDim) for d in self.global_size)
        """Whether a work-group count depends on a ``Variable`` argument."""
        self._static_groups: tuple[int, int, int] = tuple(  # type: ignore[assignment]
            d if isinstance(d, int) else 0 for d in kernel.global_size
        )
        """The work-groups per axis that no ``Variable`` decides (0 where one does)."""
        limits = device.info.max_global_work_dims
        self._symbolic_axes = tuple(
            (axis, d.param, d.div, limits[axis])
            for axis, d in enumerate(self.global_size)
            if isinstance(d, SymDim)
        )
        """Per axis whose work-groups depend on a ``Variable``: the axis, the param, its
        divisor and the device's limit."""
        self.scalar_ranges: tuple[ScalarRange | None, ...] = tuple(
            None if kind is not ParamKind.VARIABLE else scalar_range(dtype)
            for kind, dtype in zip(kinds, self.param_dtypes)
        )
        """Per param, the plain Python numbers a ``Variable`` takes as they are; ``None`` for
        a buffer param."""
        self._checks: tuple[Any, ...] = tuple(
            _READ if kind is ParamKind.GLOBAL else _WRITE if kind is ParamKind.GLOBAL_MUT else r
            for kind, r in zip(kinds, self.scalar_ranges)
        )
        """Per param, what ``inspect`` checks: ``_READ`` or ``_WRITE`` for a buffer param,
        its ``scalar_range`` for a ``Variable`` (no enum members: looking one up costs
        more than the rest of a param's check)."""
        self.extents: Extents = extents(kernel)
        """What the kernel's loads and stores reach in each buffer (``zyx.ir.extent``): a
        launch whose buffer holds less than a known extent is refused by ``inspect``."""
        self._sized = self.extents.sized
        self._static_needs = self.extents.static
        self._pool = device.pool
        self.released = False
        """Whether its device released it (``retire``): every launch of it is refused."""

    def groups(self, args: Sequence[Arg]) -> tuple[int, int, int]:
        """Work-groups per axis for these arguments (Variable-dependent sizes evaluated)."""
        if not self.symbolic:
            return self._static_groups
        g = [d.evaluate(args) if isinstance(d, SymDim) else d for d in self.global_size]
        return (g[0], g[1], g[2])

    def check_args(self, args: Sequence[Arg]) -> None:
        """Raise IncorrectKernelArg unless ``args`` match the params in count, kind and pool:
        a live buffer of this device's pool for a buffer param, an ``int`` within its dtype's
        range (or, for a float dtype, a ``float``, or an ``int`` within float64's range) for a
        ``Variable``."""
        self.inspect(args)

    def inspect(self, args: Sequence[Arg]) -> Prepared:
        """Check ``args`` as ``check_args`` says, the first bad one first, and return what a
        launch of them needs (``Prepared``). A released program refuses every launch. A
        buffer smaller than what the kernel is known to reach in it for these arguments
        (``extents``) is IncorrectKernelArg, after every argument passed on its own.

        Plain arguments (live buffers of the pool, Python numbers in range) pass in one
        loop; any other goes to ``_inspect_each``, which converts numpy scalars and raises
        for the first bad argument."""
        if self.released:
            raise self.refusal()
        try:
            values = tuple(args)
        except TypeError:
            raise _count_error(self.name, len(self.param_kinds), args) from None
        if len(values) != len(self.param_kinds):
            raise _count_error(self.name, len(self.param_kinds), args)
        pool = self._pool
        reads: list[Buffer] = []
        writes: list[Buffer] = []
        for value, check in zip(values, self._checks):
            if check is _READ or check is _WRITE:
                if not (isinstance(value, Buffer) and value.pool is pool and value.refcount > 0):
                    return self._inspect_each(values)
                (reads if check is _READ else writes).append(value)
            else:
                low, high, real = check
                if not (isinstance(value, int) and low <= value <= high):
                    if not (real and isinstance(value, float)):
                        return self._inspect_each(values)
        groups = self._groups(values) if self.symbolic else self._static_groups
        if self._sized:
            needs = self._static_needs or self.extents.needs_of(values)
            for i in self._sized:
                if values[i].nbytes < needs[i]:  # type: ignore[union-attr]  # a Buffer
                    raise self._too_small(values, i)
        return values, reads, writes, groups

    def _too_small(self, values: Sequence[Arg], i: int) -> BackendError:
        """The error of a launch of checked ``values`` whose buffer ``i`` is too small."""
        nbytes: int = values[i].nbytes  # type: ignore[union-attr]  # a Buffer
        message = self.extents.refusal(values, i, nbytes)
        return BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, message)

    def _inspect_each(self, values: tuple[Arg, ...]) -> Prepared:
        """``inspect`` of arguments not all plain: each checked in param order, numpy
        scalars converted to the Python numbers they hold; the first bad one raises."""
        reads: list[Buffer] = []
        writes: list[Buffer] = []
        checked = list(values)
        for i, check in enumerate(self._checks):
            value = values[i]
            if check is not _READ and check is not _WRITE:
                checked[i] = self._scalar(i, value)
            elif isinstance(value, Buffer) and value.pool is self._pool and value.refcount > 0:
                (reads if check is _READ else writes).append(value)
            else:
                raise self._bad(i, value)
        plain = tuple(checked)
        groups = self._groups(plain) if self.symbolic else self._static_groups
        if self._sized:
            needs = self._static_needs or self.extents.needs_of(plain)
            for i in self._sized:
                if plain[i].nbytes < needs[i]:  # type: ignore[union-attr]  # a Buffer
                    raise self._too_small(plain, i)
        return plain, reads, writes, groups

    def retire(self) -> None:
        """Refuse every later launch of this program with IncorrectKernelArg, before its
        device frees what a launch would use. A backend whose launches bypass ``inspect``
        (a native launch path) extends this to refuse there too."""
        self.released = True

    def refusal(self) -> BackendError:
        """The error of a launch of a released program."""
        return BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, f"{self!r} was released")

    def _groups(self, values: Sequence[Arg]) -> tuple[int, int, int]:
        """The work-groups of a launch of checked ``values``, where they depend on them;
        outside the device's limits, KernelLaunch (static counts were checked at compile,
        by ``check_limits``)."""
        groups: list[Any] = list(self._static_groups)
        fits = True
        for axis, param, div, limit in self._symbolic_axes:
            count = -(-values[param] // div)  # type: ignore[operator]  # an int Variable
            groups[axis] = count
            fits = fits and 0 <= count <= limit
        if not fits:
            raise BackendError(
                ErrorStatus.KERNEL_LAUNCH,
                f"{self.name}: {tuple(groups)} work-groups, outside {self.device.name}'s "
                f"limits of 0..{self.device.info.max_global_work_dims} per axis",
            )
        return (groups[0], groups[1], groups[2])

    def _scalar(self, i: int, arg: object) -> int | float:
        """``arg``, which is not a plain Python number, as the ``Variable`` ``i`` takes it: a
        numpy scalar as the Python number it holds; anything else is IncorrectKernelArg."""
        low, high, real = self.scalar_ranges[i]  # type: ignore[misc]
        value = _python_number(arg, real)
        if real and isinstance(value, float) or plain_int(value, low, high):
            return value  # type: ignore[return-value]
        raise self._bad(i, arg)

    def _bad(self, i: int, arg: object) -> BackendError:
        kind, dtype = self.param_kinds[i], self.param_dtypes[i]
        if kind is not ParamKind.VARIABLE:
            want = f"a live buffer of {self.device.pool.name}"
        elif dtype.is_float:
            want = f"a {dtype} scalar (a float, or an int within float64's range)"
        else:
            low, high = dtype.int_range
            want = f"a {dtype} scalar: an int in [{low}, {high}]"
        return BackendError(
            ErrorStatus.INCORRECT_KERNEL_ARG,
            f"{self.name}: argument {i} ({kind.value} {dtype}) must be {want}, "
            f"got {reprlib.repr(arg)}",
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} on {self.device.name}>"


_READ, _WRITE = object(), object()
"""What ``Program.inspect`` checks at a ``Global`` and a ``GlobalMut`` param."""

ScalarRange: TypeAlias = tuple[int, int, bool]
"""The ints a ``Variable`` takes, from the first to the last, and whether it takes any
``float`` too."""

_FMAX = int(sys.float_info.max)
"""The largest int a float ``Variable`` takes: float64's largest value."""


def scalar_range(dtype: DType) -> ScalarRange:
    """What a ``Variable`` of ``dtype`` takes: a float one any float and the ints float64
    holds (a larger one could not be converted for the kernel), an int one the ints of its
    range (a value past it would wrap in the C type)."""
    if dtype.is_float:
        return -_FMAX, _FMAX, True
    low, high = dtype.int_range
    return low, high, False


def plain_int(value: object, low: int, high: int) -> bool:
    """Whether ``value`` is an ``int`` (a bool too: Python's bools are ints) in ``low..high``."""
    return isinstance(value, int) and low <= value <= high


def _count_error(name: str, count: int, args: object) -> BackendError:
    got = len(args) if isinstance(args, Sized) else f"{type(args).__name__}, not a sequence"
    return BackendError(
        ErrorStatus.INCORRECT_KERNEL_ARG, f"{name} takes {count} arguments, got {got}"
    )


def _python_number(arg: object, real: bool) -> object:
    """The Python int (or, where ``real``, float) a numpy scalar holds; else ``arg``."""
    numpy = sys.modules.get("numpy")  # no numpy scalar exists before numpy is imported
    if isinstance(arg, numbers.Integral) or (numpy is not None and isinstance(arg, numpy.bool_)):
        return int(arg)
    if real and isinstance(arg, numbers.Real) and not isinstance(arg, float):
        return float(arg)
    return arg


class Recording:
    """A sequence of launches on one device, recorded once and replayed as a batch.

    The default replays launch by launch; a backend may replay as one native batch (a CUDA
    graph). Arguments can be rebound between replays with ``set_arg``.
    """

    def __init__(self, device: Device) -> None:
        self.device = device
        self.launches: list[tuple[Program, list[Arg]]] = []

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        with self.device.lock:
            program.check_args(args)
            self.launches.append((program, list(args)))

    def set_arg(self, launch: int, position: int, value: Arg) -> None:
        with self.device.lock:
            program, args = self.launches[launch]
            new_args = list(args)
            new_args[position] = value
            program.check_args(new_args)
            args[position] = value

    def replay(self) -> None:
        launch = self.device.launch
        with self.device.lock:  # the launches of one replay stay together
            for program, args in self.launches:
                launch(program, args)


ProgramT = TypeVar("ProgramT", bound=Program)


class Device(ABC):
    """A compute device: compiles IR kernels and launches them on its pool's buffers.

    Every public method may be called from any thread. A backend's device takes ``lock``
    (its pool's) around everything that touches what it shares with its pool: its queues,
    dependency records, deferred frees, and programs' argument blocks. ``compile`` need not
    hold it while the compiler runs.
    """

    backend: str
    index: int
    info: DeviceInfo
    pool: MemoryPool

    @property
    def lock(self) -> threading.RLock:
        """The lock this device shares with its pool: ``MemoryPool.lock``."""
        return self.pool.lock

    @property
    def name(self) -> str:
        """The device string: ``cuda:0``, ``opencl:1``, ``host``."""
        return f"{self.backend}:{self.index}"

    @property
    def interpreted(self) -> bool:
        """Whether kernels run in zyx's IR interpreter instead of being compiled: the very
        reference that the suite and ``zyx check`` compare with, so a run on it certifies
        nothing (the host without a C compiler). ``False`` for every real device."""
        return False

    @property
    def versions(self) -> tuple[str, ...]:
        """What builds and runs this device's kernels, with versions (driver, compiler, the
        options that change the code, bounds checking): a kernel's measured time depends on
        them, so the tuning cache's key holds them (``zyx.tuning``). ``()`` where unknown."""
        return ()

    @abstractmethod
    def compile(self, kernel: Kernel) -> Program:
        """Compile ``kernel``; a failure raises KernelCompilation with the compiler's log."""

    @abstractmethod
    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        """Enqueue ``program`` with ``args`` in param order. Returns before it finishes."""

    @abstractmethod
    def launch_timed(self, program: Program, args: Sequence[Arg]) -> int:
        """Drain pending work, run ``program`` alone, and return its time in nanoseconds."""

    def release(self, program: Program) -> None:
        """Free the program's native resources. Every later launch of it is refused
        (``Program.retire``): an override calls ``self.own(program).retire()`` first.
        Releasing a released program does nothing."""
        self.own(program).retire()

    def own(self, program: object, kind: type[ProgramT] = Program) -> ProgramT:  # type: ignore[assignment]
        """``program``, if it is a ``kind`` compiled on this device; else IncorrectKernelArg
        (:func:`not_a_program`): what a launch or release checks first."""
        if not isinstance(program, kind) or program.device is not self:
            raise not_a_program(self, program)
        return program

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for all work on this device; raises the first asynchronous error."""

    def record(self) -> Recording:
        """A new, empty recording of launches on this device."""
        return Recording(self)

    # ---- optional: DLPack (module docstring) -----------------------------------------------

    def dlpack_device(self) -> tuple[int, int] | None:
        """Where this device's buffers lie in DLPack's terms, ``(device_type, device_id)``
        (``(1, 0)`` the CPU, ``(2, n)`` CUDA device ``n``), if ``dlpack_export`` and
        ``dlpack_import`` share them without a copy; ``None`` (the default) if not."""
        return None

    def dlpack_export(
        self,
        buf: Buffer,
        dtype: DType,
        shape: tuple[int, ...],
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
    ) -> Any:
        """A DLPack capsule over ``buf`` as a C-contiguous ``dtype`` array of ``shape``, no
        copy. It holds a reference to ``buf`` until its consumer is done with it; ``stream``
        and ``max_version`` are the consumer's (``__dlpack__``'s). Read-only where the
        capsule can say so (DLPack 1.0): the value of a realized buffer never changes."""
        raise BufferError(f"{self.name} shares no memory by DLPack: copy the array out")

    def dlpack_import(self, producer: Any) -> tuple[Buffer, DType, tuple[int, ...]]:
        """A buffer over the memory of the DLPack ``producer`` (on ``dlpack_device()``), no
        copy, with the dtype and shape it holds. The buffer keeps that memory alive until it
        is freed and the work reading it has finished; the front end only reads it.
        ``BufferError`` where the memory cannot be used in place (not C-contiguous, a dtype
        zyx lacks)."""
        raise BufferError(f"{self.name} shares no memory by DLPack: copy the data in")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {self.info.name}>"


def check_compilable(kernel: Kernel, info: DeviceInfo) -> None:
    """``zyx.ir.check_limits`` as ``Device.compile`` reports it: a kernel past the device's
    limits is KernelCompilation (chained to the IRError that names the limit), so that one
    ``except BackendError`` catches every kernel a device cannot build."""
    if not isinstance(kernel, Kernel):
        raise BackendError(
            ErrorStatus.KERNEL_COMPILATION,
            f"compile takes a zyx.ir.Kernel (KernelBuilder.build()), got {reprlib.repr(kernel)}",
        )
    try:
        check_limits(kernel, info)
    except IRError as error:
        raise BackendError(ErrorStatus.KERNEL_COMPILATION, str(error)) from error


def not_a_program(device: Device, program: object) -> BackendError:
    """The error of a launch or release on ``device`` of what is not one of its programs: a
    program of another device, or no program at all (a ``Kernel`` not compiled yet, say)."""
    if isinstance(program, Program):
        what = f"{program!r} was compiled for {program.device.name}, not {device.name}"
    else:
        what = f"a Program (Device.compile(kernel)) is needed, got {reprlib.repr(program)}"
    return BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, what)
