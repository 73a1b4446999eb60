"""The backend contract: ``MemoryPool``, ``Buffer``, ``Device``, ``Program``, ``DeviceInfo``.

Follows zyx 0.17: buffers are reference-counted, launches are fire-and-forget, events stay
inside the backend, and a read back to the host is the sync point where asynchronous
errors surface.

A backend subclasses ``MemoryPool`` and ``Device``. The public methods of ``MemoryPool``
check every size and offset and then call the underscored methods a backend implements,
so a bad argument is an error before any native call, in every backend alike.
"""

from __future__ import annotations

import itertools
import linecache
import logging
import numbers
import reprlib
import sys
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, TypeAlias, TypeVar, cast

from zyx.dtypes import DType, DTypeCapability
from zyx.errors import BackendError, ErrorStatus, IRError
from zyx.ir.ops import Dim, Kernel, ParamKind, SymDim
from zyx.ir.verify import check_limits

_asm_log = logging.getLogger("zyx.asm")

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
        # view refuses dtypes that hold objects.
        try:
            view = memoryview(data.view("uint8"))
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


class MemoryPool(ABC):
    """Memory of one device (or the host, or a file). Every copy is bounds-checked here."""

    name: str
    exact_free_bytes: ClassVar[bool] = False
    """Whether ``free_bytes()`` falls and rises by exactly the size of each allocation and
    final release (the pool counts them). ``False`` where it relays the device's own,
    approximate report; the conformance suite then does not check it."""

    @abstractmethod
    def free_bytes(self) -> int:
        """Bytes that can still be allocated."""

    def allocate(self, nbytes: int) -> Buffer:
        """A new buffer of ``nbytes`` with refcount 1. Out of memory raises MemoryAllocation."""
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION, f"{self.name}: cannot allocate {nbytes!r} bytes"
            )
        return self._allocate(nbytes)

    def retain(self, buf: Buffer) -> None:
        self._check_live(buf, ErrorStatus.MEMORY_DEALLOCATION)
        buf.refcount += 1

    def release(self, buf: Buffer) -> None:
        """Drop one reference; at zero the memory is freed once work using it is done."""
        self._check_live(buf, ErrorStatus.MEMORY_DEALLOCATION)
        buf.refcount -= 1
        if buf.refcount == 0:
            self._free(buf)

    def write(self, buf: Buffer, data: Any, offset: int = 0) -> None:
        """Copy host ``data`` into ``buf`` at byte ``offset``. Takes the data when called
        (copied or staged): the caller may change or drop it as soon as this returns. The
        copy into ``buf`` may still be in flight; later commands on the pool see it done."""
        view = byte_view(data)
        self._check_range(buf, offset, view.nbytes, ErrorStatus.MEMORY_COPY_H2P)
        self._write(buf, view, offset)

    def read(self, buf: Buffer, out: Any, offset: int = 0) -> None:
        """Copy ``len(out)`` bytes from ``buf`` at ``offset`` into host ``out``. Blocks; raises
        the first pending asynchronous error of this pool's device."""
        view = byte_view(out, writable=True)
        self._check_range(buf, offset, view.nbytes, ErrorStatus.MEMORY_COPY_P2H)
        self._read(buf, view, offset)

    def copy_from(self, src_pool: MemoryPool, src_buf: Buffer, dst_buf: Buffer) -> None:
        """Copy all of ``src_buf`` (in ``src_pool``) into ``dst_buf`` of this pool."""
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


@dataclass(frozen=True)
class DeviceInfo:
    """What codegen and scheduling need to know about a device."""

    name: str
    compute: float
    """Estimated peak FLOP/s in float32 (an FMA counts two)."""
    max_global_work_dims: tuple[int, int, int]
    max_local_threads: int
    max_local_work_dims: tuple[int, int, int]
    local_mem_size: int
    max_register_bytes: int
    """Register bytes one work-item may hold before it spills: what register tiles and
    accumulators are sized by."""
    preferred_vector_size: int
    """Preferred vector width in bytes."""
    warp_size: int
    global_mem_size: int
    tensor_cores: bool = False
    compute_capability: tuple[int, int] | None = None
    dtypes: Mapping[DType, DTypeCapability] = field(default_factory=dict)
    finite_math: bool = False
    """Kernels are built assuming no NaN or infinity, and no signed zero (OpenCL's
    ``-cl-finite-math-only -cl-no-signed-zeros``): such values in or out of a float op are
    undefined. Elsewhere float ops follow IEEE 754, as C's Annex F does."""
    subnormals: bool = True
    """Float ops keep subnormal values, in and out, as IEEE 754 has them. ``False``: they may
    be flushed to zero (GPUs' flush-to-zero modes; OpenCL devices without ``CL_FP_DENORM``
    for float), and the suite skips its subnormal tests."""
    private_mem_size: int = sys.maxsize
    """Bytes of register arrays (``Define`` in ``Storage.REGISTER``, spilled to memory past
    ``max_register_bytes``) that the work-items of one group may hold together; a kernel
    past it is refused at compile. A CPU runs a group on one thread's stack, where its
    items' arrays lie side by side, and past the stack a launch kills the process
    (``zyx.host.limits``). Unbounded by default: a GPU's compiler refuses a kernel past its
    per-thread limit itself."""

    def supports(self, dtype: DType, capability: DTypeCapability = DTypeCapability.STORAGE) -> bool:
        return capability in self.dtypes.get(dtype, DTypeCapability.NONE)


Prepared: TypeAlias = tuple[tuple[Buffer, ...], tuple[Buffer, ...], tuple[int, int, int]]
"""What a program's ``inspect`` returns: the buffers a launch reads (``Global`` params), the
buffers it writes (``GlobalMut``), each in param order, and its work-groups per axis."""


class Program:
    """A compiled kernel on one device. Backends subclass it to hold their handles.

    ``inspect(args)`` is generated once per program (``specialize``): the hot path's
    argument check, straight-line code for this program's params, no loop.
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
        self._static_groups = (0, 0, 0) if self.symbolic else kernel.global_size
        self.released = False
        """Whether its device released it (``retire``): every launch of it is refused."""
        self.inspect: Callable[[Sequence[Arg]], Prepared] = self.specialize()
        """Check ``args`` as ``check_args`` does; return ``(reads, writes, groups)``."""

    def groups(self, args: Sequence[Arg]) -> tuple[int, int, int]:
        """Work-groups per axis for these arguments (Variable-dependent sizes evaluated)."""
        if not self.symbolic:
            return self._static_groups  # type: ignore[return-value]
        g = [d.evaluate(args) if isinstance(d, SymDim) else d for d in self.global_size]
        return (g[0], g[1], g[2])

    def check_args(self, args: Sequence[Arg]) -> None:
        """Raise IncorrectKernelArg unless ``args`` match the params in count, kind and pool:
        a live buffer of this device's pool for a buffer param, an ``int`` within its dtype's
        range (or, for a float dtype, a ``float``, or an ``int`` within float64's range) for a
        ``Variable``."""
        self.inspect(args)

    def retire(self) -> None:
        """Refuse every later launch of this program with IncorrectKernelArg, before its
        device frees what a launch would use. A backend whose launches bypass ``inspect``
        (a generated launch path) extends this to refuse there too."""
        self.released = True
        self.inspect = self.refused

    def refused(self, args: Sequence[Arg]) -> Any:
        """A released program's launch paths: every call raises IncorrectKernelArg."""
        raise BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, f"{self!r} was released")

    def arg_names(self, kind: ParamKind) -> list[str]:
        """The variables that hold the ``kind`` params' arguments in ``specialize``'s body,
        in param order."""
        return [f"a{i}" for i, k in enumerate(self.param_kinds) if k is kind]

    def specialize(
        self,
        body: Sequence[str] = (),
        names: Mapping[str, object] | None = None,
        *,
        returns: bool = True,
    ) -> Callable[[Sequence[Arg]], Prepared]:
        """A function of a launch's ``args``, generated for this program's params: it
        checks them exactly as ``check_args`` does (same errors, first bad argument first),
        runs ``body``, and returns ``(reads, writes, groups)`` (see ``Prepared``), or
        nothing where not ``returns``.

        ``body`` is a backend's own lines (packing the arguments into its native block, a
        whole launch), run once every argument passed its check. They see ``a0``, ``a1``,
        ... (the arguments; ``arg_names`` says which are buffers), ``g0``, ``g1``, ``g2``
        (the work-groups per axis), and ``names``.
        """
        kinds, count = self.param_kinds, len(self.param_kinds)
        limits = self.device.info.max_global_work_dims
        args = [f"a{i}" for i in range(count)]
        lines = ["def inspect(args):"]
        if count:  # unpacking checks the count: no len() call on the hot path
            lines += [
                "    try:",
                f"        {', '.join(args)}, = args",
                "    except (TypeError, ValueError):",
                "        raise count(args) from None",
            ]
        else:
            lines += ["    if len(args):", "        raise count(args)"]
        for i, (kind, dtype) in enumerate(zip(kinds, self.param_dtypes)):
            a = args[i]
            if kind is not ParamKind.VARIABLE:
                ok = f"isinstance({a}, Buffer) and {a}.pool is pool and {a}.refcount > 0"
                lines += [f"    if not ({ok}):", f"        raise bad({i}, {a})"]
                continue
            # Anything else (a numpy scalar, say) goes to scalar(), which converts or refuses.
            lines += [f"    if not ({_plain_scalar(a, dtype)}):", f"        {a} = scalar({i}, {a})"]
        dims = [
            f"-(-a{d.param} // {d.div})" if isinstance(d, SymDim) else str(d)
            for d in self.global_size
        ]
        lines += [f"    g{axis} = {dim}" for axis, dim in enumerate(dims)]
        if self.symbolic:  # static counts were checked at compile (check_limits)
            fits = " and ".join(f"0 <= g{axis} <= {m}" for axis, m in enumerate(limits))
            lines += [f"    if not ({fits}):", "        raise too_many((g0, g1, g2))"]
        lines += [f"    {line}" for line in body]
        if returns:
            reads, writes = (
                "".join(f"{a}, " for a in self.arg_names(kind))
                for kind in (ParamKind.GLOBAL, ParamKind.GLOBAL_MUT)
            )
            lines.append(f"    return ({reads}), ({writes}), (g0, g1, g2)")
        namespace: dict[str, Any] = {
            "Buffer": Buffer,
            "fmax": _FMAX,
            "pool": self.device.pool,
            "count": partial(_count_error, self.name, count),
            "scalar": partial(_scalar_arg, self.name, kinds, self.param_dtypes),
            "too_many": partial(_groups_error, self.name, self.device.name, limits),
            "bad": partial(_bad_arg, self.name, kinds, self.param_dtypes, self.device.pool.name),
            **(names or {}),
        }
        inspect = generate(lines, namespace, f"inspect {self.name}")
        return cast("Callable[[Sequence[Arg]], Prepared]", inspect)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} on {self.device.name}>"


def generate(lines: Sequence[str], names: Mapping[str, object], label: str) -> Callable[..., Any]:
    """The function that ``lines`` define (``def name(...):`` first), with ``names`` as its
    globals: how the launch paths get straight-line code for one program.

    ``label`` names it in tracebacks (``<zyx: label #n>``), which show its source lines as
    they show a file's, for as long as the function lives; ``ZYX_DEBUG=16`` logs it
    (``zyx.asm``)."""
    source = "\n".join(lines) + "\n"
    filename = f"<zyx: {label} #{next(_generated)}>"
    if _asm_log.isEnabledFor(logging.DEBUG):
        _asm_log.debug("%s:\n%s", filename, source)
    namespace = dict(names)
    before = set(namespace)
    exec(compile(source, filename, "exec"), namespace)
    (defined,) = set(namespace) - before - {"__builtins__"}
    function = cast("Callable[..., Any]", namespace[defined])
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    weakref.finalize(function, linecache.cache.pop, filename, None)
    return function


_generated = itertools.count()
"""Numbers the generated functions' file names, which name one source each."""


def _count_error(name: str, count: int, args: object) -> BackendError:
    got = len(args) if isinstance(args, Sized) else f"{type(args).__name__}, not a sequence"
    return BackendError(
        ErrorStatus.INCORRECT_KERNEL_ARG, f"{name} takes {count} arguments, got {got}"
    )


def _groups_error(
    name: str, device: str, limits: tuple[int, int, int], groups: tuple[int, int, int]
) -> BackendError:
    return BackendError(
        ErrorStatus.KERNEL_LAUNCH,
        f"{name}: {groups} work-groups, outside {device}'s limits of 0..{limits} per axis",
    )


_FMAX = int(sys.float_info.max)
"""The largest int a float ``Variable`` takes: float64's largest value."""


def _plain_scalar(a: str, dtype: DType) -> str:
    """The check, in generated code, that the argument ``a`` is a Python number that a
    ``Variable`` of ``dtype`` takes as it is."""
    if dtype.is_float:  # an int past float64's range could not be converted for the kernel
        return f"isinstance({a}, float) or isinstance({a}, int) and -fmax <= {a} <= fmax"
    low, high = dtype.int_range  # a value out of range would wrap in the C type
    return f"isinstance({a}, int) and {low} <= {a} <= {high}"


def _scalar_arg(
    name: str, kinds: Sequence[ParamKind], dtypes: Sequence[DType], i: int, arg: object
) -> int | float:
    """``arg``, which is not a plain Python number, as the ``Variable`` ``i`` takes it: a
    numpy scalar as the Python number it holds; anything else is IncorrectKernelArg."""
    dtype = dtypes[i]
    value = _python_number(arg, dtype.is_float)
    # The very check of the generated code, so that both take the same values.
    if not eval(_plain_scalar("a", dtype), {"fmax": _FMAX, "a": value}):  # noqa: S307
        raise _bad_arg(name, kinds, dtypes, "", i, arg)
    return cast("int | float", value)


def _python_number(arg: object, real: bool) -> object:
    """The Python int (or, where ``real``, float) a numpy scalar holds; else ``arg``."""
    numpy = sys.modules.get("numpy")  # no numpy scalar exists before numpy is imported
    if isinstance(arg, numbers.Integral) or (numpy is not None and isinstance(arg, numpy.bool_)):
        return int(arg)
    if real and isinstance(arg, numbers.Real) and not isinstance(arg, float):
        return float(arg)
    return arg


def _bad_arg(
    name: str,
    kinds: Sequence[ParamKind],
    dtypes: Sequence[DType],
    pool: str,
    i: int,
    arg: object,
) -> BackendError:
    kind, dtype = kinds[i], dtypes[i]
    if kind is not ParamKind.VARIABLE:
        want = f"a live buffer of {pool}"
    elif dtype.is_float:
        want = f"a {dtype} scalar (a float, or an int within float64's range)"
    else:
        low, high = dtype.int_range
        want = f"a {dtype} scalar: an int in [{low}, {high}]"
    return BackendError(
        ErrorStatus.INCORRECT_KERNEL_ARG,
        f"{name}: argument {i} ({kind.value} {dtype}) must be {want}, got {reprlib.repr(arg)}",
    )


class Recording:
    """A sequence of launches on one device, recorded once and replayed as a batch.

    The default replays launch by launch; a backend may replay as one native batch (a CUDA
    graph). Arguments can be rebound between replays with ``set_arg``.
    """

    def __init__(self, device: Device) -> None:
        self.device = device
        self.launches: list[tuple[Program, list[Arg]]] = []

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        program.check_args(args)
        self.launches.append((program, list(args)))

    def set_arg(self, launch: int, position: int, value: Arg) -> None:
        program, args = self.launches[launch]
        new_args = list(args)
        new_args[position] = value
        program.check_args(new_args)
        args[position] = value

    def replay(self) -> None:
        launch = self.device.launch
        for program, args in self.launches:
            launch(program, args)


ProgramT = TypeVar("ProgramT", bound=Program)


class Device(ABC):
    """A compute device: compiles IR kernels and launches them on its pool's buffers."""

    backend: str
    index: int
    info: DeviceInfo
    pool: MemoryPool

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
