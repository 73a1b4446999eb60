/* zyx-cuda's native calls, built at run time by zyx.native (see native.py).
 *
 * launch: cuLaunchKernel with plain ints, no conversion objects: the driver's entry point
 * is bound once (bind), the kernel arguments are already packed in a void** block.
 * Launcher: a kernel's whole launch in C where it repeats an earlier one (below), under
 * the device's Lock (tracker.c's, which this module exports too); Replayer, a Launcher
 * whose launch is a replaying library call's CUDA graph.
 * upload, download: one staging lane's part of a host<->device copy (see staging.py),
 * without the GIL: per chunk it claims, wait for the slot, copy into or out of it, and the
 * DMA; in Python each chunk cost a GIL handoff per driver call.
 * read: a small device-to-host copy, whole, without the GIL: through cuda-python its two
 * driver calls cost more host time than the DMA of a few KiB.
 * Reader: a pool's small read whole in C, its stream's choice and bookkeeping too (below),
 * where the layers of Python around that copy cost more than it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

typedef int (*launch_kernel_fn)(void *function, unsigned gx, unsigned gy, unsigned gz,
                                unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                void *stream, void **params, void **extra);

static launch_kernel_fn launch_kernel = NULL;

typedef int (*htod_fn)(uint64_t dst, const void *src, size_t bytes, void *stream);
typedef int (*dtoh_fn)(void *dst, uint64_t src, size_t bytes, void *stream);
typedef int (*record_fn)(void *event, void *stream);
typedef int (*event_sync_fn)(void *event);
typedef int (*stream_sync_fn)(void *stream);

static htod_fn copy_htod = NULL;
static dtoh_fn copy_dtoh = NULL;
static record_fn event_record = NULL;
static event_sync_fn event_sync = NULL;
static stream_sync_fn stream_sync = NULL;

typedef int (*ctx_get_current_fn)(void **context);
typedef int (*graph_launch_fn)(void *graph_exec, void *stream);

static ctx_get_current_fn ctx_get_current = NULL;
static graph_launch_fn graph_launch = NULL;


/* bind(cuLaunchKernel, cuCtxGetCurrent, cuGraphLaunch): the driver's entry points for
 * launches */
static PyObject *bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *entries[3];
    if (zyx_entry_points("bind", args, nargs, 3, entries))
        return NULL;
    launch_kernel = (launch_kernel_fn)entries[0];
    ctx_get_current = (ctx_get_current_fn)entries[1];
    graph_launch = (graph_launch_fn)entries[2];
    Py_RETURN_NONE;
}

/* current() -> the calling thread's current CUcontext as an int; 0 where it has none (or
   the driver call failed). */
static PyObject *current(PyObject *self, PyObject *unused) {
    void *context = NULL;
    if (ctx_get_current == NULL || ctx_get_current(&context))
        context = NULL;
    return PyLong_FromVoidPtr(context);
}

/* launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) -> CUresult as int */
static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned dims[7];
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "launch takes 10 arguments, got %zd", nargs);
        return NULL;
    }
    void *function = PyLong_AsVoidPtr(args[0]);
    if (function == NULL && PyErr_Occurred())
        return NULL;
    for (int i = 0; i < 7; i++) {
        unsigned long value = PyLong_AsUnsignedLong(args[1 + i]);
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (value > UINT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "launch: dimension above 2**32 - 1");
            return NULL;
        }
        dims[i] = (unsigned)value;
    }
    void *stream = PyLong_AsVoidPtr(args[8]);
    if (stream == NULL && PyErr_Occurred())
        return NULL;
    void **params = (void **)PyLong_AsVoidPtr(args[9]);
    if (params == NULL && PyErr_Occurred())
        return NULL;
    if (launch_kernel == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "launch before bind");
        return NULL;
    }
    int result;
    Py_BEGIN_ALLOW_THREADS
    result = launch_kernel(function, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
                           dims[6], stream, params, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(result);
}

/* bind_copies(cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuEventRecord, cuEventSynchronize,
 * cuStreamSynchronize) */
static PyObject *bind_copies(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *entries[5];
    if (zyx_entry_points("bind_copies", args, nargs, 5, entries))
        return NULL;
    copy_htod = (htod_fn)entries[0];
    copy_dtoh = (dtoh_fn)entries[1];
    event_record = (record_fn)entries[2];
    event_sync = (event_sync_fn)entries[3];
    stream_sync = (stream_sync_fn)entries[4];
    Py_RETURN_NONE;
}

typedef struct {
    uint64_t device;
    char *host;
    size_t bytes, slot_bytes;
    size_t *next; /* the index of the copy's next unclaimed chunk, shared by its lanes */
    char *slots[2];
    void *events[2];
    void *stream;
} Lane;

/* The lane's arguments: (device, host, bytes, next, slot_bytes, slot0, event0, slot1,
 * event1, stream), all ints; ``next`` is the address of the copy's shared size_t. */
static int parse_lane(PyObject *const *args, Py_ssize_t nargs, Lane *lane) {
    size_t v[10];
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "a lane takes 10 arguments, got %zd", nargs);
        return -1;
    }
    for (int i = 0; i < 10; i++) {
        v[i] = PyLong_AsSize_t(args[i]);
        if (v[i] == (size_t)-1 && PyErr_Occurred())
            return -1;
    }
    if (v[3] == 0 || v[4] == 0) {
        PyErr_SetString(PyExc_ValueError, "a lane needs a claim counter and a slot size");
        return -1;
    }
    if (copy_htod == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a lane before bind_copies");
        return -1;
    }
    lane->device = v[0];
    lane->host = (char *)v[1];
    lane->bytes = v[2], lane->next = (size_t *)v[3], lane->slot_bytes = v[4];
    lane->slots[0] = (char *)v[5], lane->events[0] = (void *)v[6];
    lane->slots[1] = (char *)v[7], lane->events[1] = (void *)v[8];
    lane->stream = (void *)v[9];
    return 0;
}

typedef struct {
    size_t at, size;
} Chunk;

/* Chunk ``i`` of the copy (a whole slot, or what is left); 0 where it lies past the end. */
static int chunk_at(const Lane *l, size_t i, Chunk *chunk) {
    if (i >= (l->bytes + l->slot_bytes - 1) / l->slot_bytes)
        return 0;
    chunk->at = i * l->slot_bytes;
    chunk->size = l->bytes - chunk->at < l->slot_bytes ? l->bytes - chunk->at : l->slot_bytes;
    return 1;
}

/* Claim the copy's next chunk from the counter its lanes share, so that a lane on a busy
 * core takes fewer instead of finishing last; 0 when none is left. */
static int claim(const Lane *l, Chunk *chunk) {
    return chunk_at(l, __atomic_fetch_add(l->next, 1, __ATOMIC_RELAXED), chunk);
}

/* Whether a chunk is left to claim (another lane may still take it first). */
static int remains(const Lane *l) {
    Chunk chunk;
    return chunk_at(l, __atomic_load_n(l->next, __ATOMIC_RELAXED), &chunk);
}

static PyObject *lane_result(int status, const char *call) {
    return Py_BuildValue("(is)", status, status ? call : "");
}

/* Raise ``error`` (what a ``failure`` callable returned, or NULL where it raised): NULL. */
static PyObject *raise_error(PyObject *error) {
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return NULL;
}

/* upload(...lane) -> (CUresult, call): host to device through the lane's two slots. A
 * chunk is claimed once a slot is free (none waits, claimed, behind a busy lane); the lane
 * stops without waiting for a slot once none is left. */
static PyObject *upload(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Lane l;
    if (parse_lane(args, nargs, &l))
        return NULL;
    int status = 0, slot = 0;
    const char *call = "";
    Chunk c;
    Py_BEGIN_ALLOW_THREADS
    for (; remains(&l); slot ^= 1) {
        /* An event never recorded counts as complete. */
        if ((status = event_sync(l.events[slot]))) {
            call = "cuEventSynchronize";
            break;
        }
        if (!claim(&l, &c))
            break;
        memcpy(l.slots[slot], l.host + c.at, c.size);
        if ((status = copy_htod(l.device + c.at, l.slots[slot], c.size, l.stream))) {
            call = "cuMemcpyHtoDAsync";
            break;
        }
        if ((status = event_record(l.events[slot], l.stream))) {
            call = "cuEventRecord";
            break;
        }
    }
    Py_END_ALLOW_THREADS
    return lane_result(status, call);
}

/* Start the DMA of ``chunk`` into ``slot``; the failed call's name, or NULL. */
static const char *fetch(const Lane *l, int slot, const Chunk *chunk, int *status) {
    if ((*status = copy_dtoh(l->slots[slot], l->device + chunk->at, chunk->size, l->stream)))
        return "cuMemcpyDtoHAsync";
    if ((*status = event_record(l->events[slot], l->stream)))
        return "cuEventRecord";
    return NULL;
}

/* download(...lane) -> (CUresult, call): device to host through the lane's two slots; the
 * lane's next chunk is claimed and its DMA started while the current one is copied out */
static PyObject *download(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Lane l;
    if (parse_lane(args, nargs, &l))
        return NULL;
    int status = 0, slot = 0, more = 0;
    const char *call = NULL;
    Chunk c, next;
    Py_BEGIN_ALLOW_THREADS
    /* An upload returns while its last DMAs, on another stream, may still read the slots:
     * wait for each slot's last use before the first DMA into it. Later DMAs into a slot
     * follow the lane's own wait for it (before its chunk is copied out). */
    for (int s = 0; s < 2 && call == NULL; s++)
        if ((status = event_sync(l.events[s])))
            call = "cuEventSynchronize";
    if (call == NULL)
        more = claim(&l, &c);
    if (more)
        call = fetch(&l, slot, &c, &status);
    while (call == NULL && more) {
        more = claim(&l, &next);
        if (more && (call = fetch(&l, slot ^ 1, &next, &status)))
            break;
        if ((status = event_sync(l.events[slot]))) {
            call = "cuEventSynchronize";
            break;
        }
        memcpy(l.host + c.at, l.slots[slot], c.size);
        c = next, slot ^= 1;
    }
    Py_END_ALLOW_THREADS
    return lane_result(status, call ? call : "");
}

/* The DMA of ``bytes`` at ``src`` into ``host`` (through ``bounce`` where not NULL) on
 * ``stream``, and its wait; the CUresult, and ``*call`` names the call that failed. Runs
 * without the GIL. */
static int dma_read(char *host, uint64_t src, size_t bytes, char *bounce, void *stream,
                    const char **call) {
    int status;
    if ((status = copy_dtoh(bounce ? bounce : host, src, bytes, stream)))
        *call = "cuMemcpyDtoHAsync";
    else if ((status = stream_sync(stream)))
        *call = "cuStreamSynchronize";
    else if (bounce)
        memcpy(host, bounce, bytes);
    return status;
}

/* read(host, device, bounce, stream) -> (CUresult, call): device to host on the stream,
 * all of ``host`` (a writable contiguous buffer: its address is taken here, where through
 * ctypes it cost more than this call), returning when done. The DMA goes into page-locked
 * ``bounce`` (of ``host``'s size at least), then a memcpy into ``host``, as the driver
 * would stage a pageable destination itself; ``bounce`` 0: the DMA's destination is
 * ``host`` (page-locked, or staged by the driver). ``host`` stays exported until the copy
 * is done, so it cannot be resized under it. */
static PyObject *read_whole(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    size_t v[3];
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "read takes 4 arguments, got %zd", nargs);
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        v[i] = PyLong_AsSize_t(args[1 + i]);
        if (v[i] == (size_t)-1 && PyErr_Occurred())
            return NULL;
    }
    if (stream_sync == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "read before bind_copies");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS))
        return NULL;
    char *host = (char *)view.buf, *bounce = (char *)v[1];
    size_t bytes = (size_t)view.len;
    const char *call = "";
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = dma_read(host, (uint64_t)v[0], bytes, bounce, (void *)v[2], &call);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return lane_result(status, call);
}

/* ---- Launcher: a kernel's launch, for the steady state -------------------------------
 *
 * ``KernelProgram.schedule`` (program.py) is the launch in Python, and the specification
 * of this one: it checks the arguments, packs the argument block, chooses a stream
 * through the tracker (zyx.streams), makes the waits, launches and records. Most launches
 * repeat what an earlier one did: the same argument objects, already checked and packed,
 * or only other buffers, on a stream with no cross-stream hazard. ``Launcher.submit`` does
 * those here, with zyx's tracker.c (compiled ahead of this file); anything else (new
 * scalars, a hazard, another context current, no work-group: nothing to launch) goes to
 * ``schedule``, which decides everything afresh. Nothing is changed before that choice is
 * made, so the Python path sees the state the C path saw.
 *
 * A Launcher is made from two objects, read by field name: the program's
 * ``zyx.native.LaunchLayout`` and its ``zyx_cuda.program.NativeKernel``.
 */

typedef struct {
    PyObject_HEAD
    ZyxTracking tracking;
    PyObject *schedule; /* the program's schedule: the Python path */
    PyObject *packed;   /* list: the argument objects the block holds (or a sentinel); a
                           Replayer's: those its graph was captured with */
    PyObject *grid;     /* list: work-groups per axis of the packed arguments */
    PyObject *graph;    /* a Replayer's (NULL in a Launcher's): list, the CUgraphExec it
                           replays as an int, 0 where none */
    PyObject *failure;  /* failure(CUresult) -> the exception to raise */
    void *context, *function, **kernel_params;
    unsigned block[3], shared;
    Py_ssize_t launched; /* launches run here, not in schedule */
} Launcher;

static int launcher_traverse(Launcher *self, visitproc visit, void *arg) {
    Py_VISIT(self->schedule);
    Py_VISIT(self->packed);
    Py_VISIT(self->grid);
    Py_VISIT(self->graph);
    Py_VISIT(self->failure);
    return zyx_tracking_traverse(&self->tracking, visit, arg);
}

static int launcher_clear(Launcher *self) {
    Py_CLEAR(self->schedule);
    Py_CLEAR(self->packed);
    Py_CLEAR(self->grid);
    Py_CLEAR(self->graph);
    Py_CLEAR(self->failure);
    zyx_tracking_clear(&self->tracking);
    return 0;
}

static void launcher_dealloc(Launcher *self) {
    PyObject_GC_UnTrack(self);
    launcher_clear(self);
    zyx_tracking_free(&self->tracking);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Set ``*field`` to ``native.name``, holding it, where it is a list of ``size`` entries;
 * -1 with an exception. */
static int hold_list(PyObject **field, PyObject *native, const char *name, Py_ssize_t size) {
    if (zyx_hold_field(field, native, name))
        return -1;
    if (PyList_CheckExact(*field) && PyList_GET_SIZE(*field) == size)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s.%s: not a list of %zd", Py_TYPE(native)->tp_name, name,
                 size);
    return -1;
}

/* The fields a Launcher and a Replayer share, from what either is made of: ``(layout,
 * native)``, a zyx.native.LaunchLayout and a NativeKernel or NativeReplay (``*native``,
 * borrowed). 0, or -1 with an exception. */
static int launcher_fields(Launcher *self, PyObject *args, PyObject **native) {
    PyObject *layout;
    if (!PyArg_ParseTuple(args, "OO", &layout, native))
        return -1;
    if (ctx_get_current == NULL) { /* bind sets every launch entry point at once */
        PyErr_Format(PyExc_RuntimeError, "%s before bind", Py_TYPE(self)->tp_name);
        return -1;
    }
    return zyx_tracking_init(&self->tracking, layout) ||
                   zyx_hold_field(&self->schedule, *native, "schedule") ||
                   hold_list(&self->packed, *native, "packed", self->tracking.params) ||
                   zyx_hold_field(&self->failure, *native, "failure") ||
                   zyx_address_field(*native, "context", &self->context)
               ? -1
               : 0;
}

/* The NativeKernel's ``block`` (three ints) and ``shared`` (bytes). */
static int launch_shape(Launcher *self, PyObject *kernel) {
    PyObject *block = zyx_field(kernel, "block");
    Py_ssize_t shared;
    int ok = block != NULL && PyArg_ParseTuple(block, "III", &self->block[0], &self->block[1],
                                               &self->block[2]);
    Py_XDECREF(block);
    if (!ok || zyx_size_field(kernel, "shared", &shared))
        return -1;
    if (shared < 0 || shared > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "NativeKernel.shared: not a byte count");
        return -1;
    }
    self->shared = (unsigned)shared;
    return 0;
}

/* Launcher(layout, kernel): a zyx.native.LaunchLayout and a NativeKernel */
static int launcher_init(Launcher *self, PyObject *args, PyObject *kwargs) {
    PyObject *kernel;
    if (launcher_fields(self, args, &kernel) || hold_list(&self->grid, kernel, "grid", 3) ||
        zyx_address_field(kernel, "function", &self->function) ||
        zyx_address_field(kernel, "params", (void **)&self->kernel_params))
        return -1;
    return launch_shape(self, kernel);
}

static PyObject *launcher_fallback(Launcher *self, PyObject *args) {
    return PyObject_CallOneArg(self->schedule, args);
}

/* ``args`` as one item per param (``*items``), where they are a list or a tuple of that
 * many and ``packed`` still has one per param: 1; else 0, for the Python path. */
static int launch_items(Launcher *self, PyObject *args, PyObject *const **items) {
    Py_ssize_t params = self->tracking.params;
    if (!PyList_CheckExact(args) && !PyTuple_CheckExact(args))
        return 0;
    if (PySequence_Fast_GET_SIZE(args) != params || PyList_GET_SIZE(self->packed) != params)
        return 0;
    *items = PySequence_Fast_ITEMS(args);
    return 1;
}

/* Whether the program's context is the calling thread's current one (the Python path
 * makes it current). */
static int in_context(Launcher *self) {
    void *current = NULL;
    return !ctx_get_current(&current) && current == self->context;
}

/* The queue a launch of ``items`` runs on here, its buffers and their records held in
 * ``bufs`` and ``records`` (zyx_tracking_release them after): the tracker's choice, where
 * it needs no wait on another queue; -1, nothing held, where it is the Python path's. */
static long launch_queue(Launcher *self, PyObject *const *items, PyObject **bufs,
                         PyObject **records) {
    ZyxTracking *t = &self->tracking;
    if (zyx_tracking_hold(t, items, bufs, records))
        return -1;
    long queue = zyx_tracking_choose(t, records);
    if (!zyx_tracking_hazard(t, records, queue))
        return queue;
    zyx_tracking_release(t, bufs, records);
    return -1;
}

/* After the driver returned ``result`` for a launch on ``queue``: the launch recorded and
 * counted, or the failure raised. */
static PyObject *launch_done(Launcher *self, int result, PyObject **bufs, PyObject **records,
                             long queue) {
    if (result)
        return raise_error(PyObject_CallFunction(self->failure, "i", result));
    if (zyx_tracking_commit(&self->tracking, bufs, records, queue))
        return NULL;
    self->launched++;
    Py_RETURN_NONE;
}

/* Whether the arguments can be launched here: each the packed object, or a buffer of the
 * pool (its handle into ``handles``, ``*changed`` set); every buffer alive and as large as
 * the kernel reaches in it (tracker.c's ``zyx_fits``). */
static int launchable(Launcher *self, PyObject *const *items, unsigned long long *handles,
                      int *changed) {
    const ZyxTracking *t = &self->tracking;
    for (Py_ssize_t i = 0; i < t->params; i++) {
        PyObject *arg = items[i];
        if (arg == PyList_GET_ITEM(self->packed, i))
            continue;
        if (!t->is_buffer[i] || !zyx_of_pool(t, arg))
            return 0;
        PyObject *handle = ZYX_SLOT(arg, t->handle_at);
        if (handle == NULL || !PyLong_CheckExact(handle))
            return 0;
        handles[i] = PyLong_AsUnsignedLongLong(handle);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        *changed = 1;
    }
    return zyx_alive(t, items) && zyx_fits(&self->tracking, items);
}

/* The packed arguments' work-groups per axis into ``groups``: 1; 0 where an axis has none
 * (nothing to launch) or more than the driver takes. */
static int packed_groups(Launcher *self, long *groups) {
    for (int i = 0; i < 3; i++) {
        groups[i] = zyx_small_int(PyList_GET_ITEM(self->grid, i));
        if (groups[i] <= 0 || groups[i] > (long)UINT32_MAX)
            return 0;
    }
    return 1;
}

/* Pack the buffers that changed, launch on ``queue`` and record it: where a kernel is
 * launched in C (program.py's docstring names the one place in Python). */
static PyObject *launch_and_commit(Launcher *self, PyObject *const *items,
                                   const unsigned long long *handles, int changed,
                                   PyObject **bufs, PyObject **records, long queue,
                                   const long *groups) {
    if (changed)
        for (Py_ssize_t i = 0; i < self->tracking.params; i++)
            if (items[i] != PyList_GET_ITEM(self->packed, i)) {
                *(uint64_t *)self->kernel_params[i] = handles[i];
                PyList_SetItem(self->packed, i, Py_NewRef(items[i]));
            }
    int result;
    Py_BEGIN_ALLOW_THREADS
    result = launch_kernel(self->function, (unsigned)groups[0], (unsigned)groups[1],
                           (unsigned)groups[2], self->block[0], self->block[1], self->block[2],
                           self->shared, self->tracking.handles[queue], self->kernel_params,
                           NULL);
    Py_END_ALLOW_THREADS
    return launch_done(self, result, bufs, records, queue);
}

/* A launch, the device's lock held. */
static PyObject *launcher_submit_held(Launcher *self, PyObject *args) {
    PyObject *const *items;
    unsigned long long handles[ZYX_MAX_PARAMS];
    int changed = 0;
    long groups[3];
    if (!launch_items(self, args, &items) || !launchable(self, items, handles, &changed) ||
        !in_context(self) || !packed_groups(self, groups))
        return launcher_fallback(self, args);
    PyObject *bufs[ZYX_MAX_BUFFERS], *records[ZYX_MAX_BUFFERS];
    long queue = launch_queue(self, items, bufs, records);
    if (queue < 0)
        return launcher_fallback(self, args);
    PyObject *done = launch_and_commit(self, items, handles, changed, bufs, records, queue,
                                       groups);
    zyx_tracking_release(&self->tracking, bufs, records);
    return done;
}

static PyObject *replayer_submit_held(Launcher *self, PyObject *args); /* a Replayer's: below */

/* submit(args): Device.launch of the program, which takes the device's lock */
static PyObject *launcher_submit(Launcher *self, PyObject *args) {
    zyx_lock_acquire(self->tracking.lock);
    PyObject *done = self->graph ? replayer_submit_held(self, args)
                                 : launcher_submit_held(self, args);
    zyx_lock_release(self->tracking.lock); /* held: it cannot fail */
    return done;
}

static PyMethodDef launcher_methods[] = {
    {"submit", (PyCFunction)launcher_submit, METH_O,
     "submit(args): launch with ``args``, in C where it repeats an earlier launch (a "
     "Replayer's: the last, a graph's)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef launcher_members[] = {
    {"launched", T_PYSSIZET, offsetof(Launcher, launched), READONLY,
     "launches run in C (the rest went to the program's schedule)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_zyx_cuda_native.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A kernel's launch: its steady state in C, the rest in KernelProgram.schedule.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)launcher_init,
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_traverse = (traverseproc)launcher_traverse,
    .tp_clear = (inquiry)launcher_clear,
    .tp_methods = launcher_methods,
    .tp_members = launcher_members,
};

/* ---- Replayer: a replaying library call's launch, for the steady state ---------------
 *
 * A ``LibraryProgram`` with ``replay`` (library.py) captures its call into a CUDA graph for
 * arguments it repeats, and its ``schedule`` (``CudaProgram.schedule``, the specification
 * of this) replays the graph with one ``cuGraphLaunch``. ``Replayer.submit`` does that
 * launch here where it repeats the last launch of the Python path, a graph's: the very
 * argument objects (a graph holds the pointers and scalars it was captured with), its
 * buffers alive, its context current, on a stream with no cross-stream hazard. The
 * Python path sets ``graph`` to that graph after it launched it and to 0 before anything
 * else it does (a capture, a call, an eviction, a release), so a replay here is one the
 * Python path would make, and changes nothing there but what its tracker records.
 * Anything else goes to ``schedule``, as in a Launcher.
 *
 * A Replayer is a Launcher (its fields, their collection, ``submit``, ``launched``) made
 * from the program's ``zyx.native.LaunchLayout`` and its ``zyx_cuda.library.NativeReplay``:
 * its ``graph`` (NULL in a kernel's Launcher) is what makes ``submit`` a replay.
 */

/* Replayer(layout, replay): a zyx.native.LaunchLayout and a NativeReplay */
static int replayer_init(Launcher *self, PyObject *args, PyObject *kwargs) {
    PyObject *replay;
    return launcher_fields(self, args, &replay) || hold_list(&self->graph, replay, "graph", 1)
               ? -1
               : 0;
}

/* The CUgraphExec a launch of ``items`` replays: the graph held, where each argument is
 * the packed object and every buffer alive; NULL where none is (the Python path's). */
static void *replayed_graph(Launcher *self, PyObject *const *items) {
    PyObject *held = PyList_GET_ITEM(self->graph, 0);
    void *graph_exec = PyLong_CheckExact(held) ? PyLong_AsVoidPtr(held) : NULL;
    if (graph_exec == NULL) { /* and ``packed`` may hold anything, checked or not */
        PyErr_Clear();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->tracking.params; i++)
        if (items[i] != PyList_GET_ITEM(self->packed, i))
            return NULL;
    return zyx_alive(&self->tracking, items) ? graph_exec : NULL;
}

/* A replay, the device's lock held. */
static PyObject *replayer_submit_held(Launcher *self, PyObject *args) {
    PyObject *const *items;
    void *graph_exec;
    if (!launch_items(self, args, &items) || !(graph_exec = replayed_graph(self, items)) ||
        !in_context(self))
        return launcher_fallback(self, args);
    PyObject *bufs[ZYX_MAX_BUFFERS], *records[ZYX_MAX_BUFFERS];
    long queue = launch_queue(self, items, bufs, records);
    if (queue < 0)
        return launcher_fallback(self, args);
    int result;
    Py_BEGIN_ALLOW_THREADS
    result = graph_launch(graph_exec, self->tracking.handles[queue]);
    Py_END_ALLOW_THREADS
    PyObject *done = launch_done(self, result, bufs, records, queue);
    zyx_tracking_release(&self->tracking, bufs, records);
    return done;
}

static PyTypeObject ReplayerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_zyx_cuda_native.Replayer",
    .tp_base = &LauncherType, /* and from it the GC flag, with its traverse and clear */
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A replaying library call's launch: a replay of its last graph in C, the rest "
              "in LibraryProgram.schedule.",
    .tp_init = (initproc)replayer_init,
};

/* ---- Reader: a small read of a buffer, for the steady state ------------------------
 *
 * ``CudaPool._read_python`` (pool.py) is the read in Python, and the specification of this
 * one: the stream the tracker chooses for a command reading the buffer, the read recorded
 * there, the DMA (through the page-locked bounce buffer up to its size, as ``read`` above)
 * and the stream's wait, then the stream done and the deferred frees that completed run.
 * ``Reader.read`` does it here where nothing is unusual: its context current, a buffer of
 * the pool, a destination of at most ``direct`` bytes that it can write in place, the
 * buffer's record an ``Access``, no cross-stream wait, no marks left on the stream (the
 * stream's done then needs no driver call). Else it returns -1 having changed nothing, and
 * the pool takes the Python path. Where a deferred free is waiting it calls
 * ``Streams.collect`` itself. The pool's lock is held by the caller (``MemoryPool.read``).
 */

typedef struct {
    PyObject_HEAD
    ZyxTracking tracking; /* of a "program" reading one buffer: param 0 */
    PyObject *streams;    /* zyx_cuda.streams.Streams: its _marks, _deferred, collect() */
    PyObject *marks;      /* Streams._marks: per stream, a deque of marks not seen done */
    PyObject *failure;    /* failure(CUresult, call) -> the exception to raise */
    void *context;
    char *bounce;
    Py_ssize_t bounce_bytes, direct_bytes;
    Py_ssize_t reads; /* reads run here, not in _read_python */
} Reader;

static int reader_traverse(Reader *self, visitproc visit, void *arg) {
    Py_VISIT(self->streams);
    Py_VISIT(self->marks);
    Py_VISIT(self->failure);
    return zyx_tracking_traverse(&self->tracking, visit, arg);
}

static int reader_clear(Reader *self) {
    Py_CLEAR(self->streams);
    Py_CLEAR(self->marks);
    Py_CLEAR(self->failure);
    zyx_tracking_clear(&self->tracking);
    return 0;
}

static void reader_dealloc(Reader *self) {
    PyObject_GC_UnTrack(self);
    reader_clear(self);
    zyx_tracking_free(&self->tracking);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Reader(layout, streams, failure, context, bounce, bounce_bytes, direct_bytes): a
 * zyx.native.LaunchLayout of one read param on ``streams``; the rest plain ints but
 * ``failure``. */
static int reader_init(Reader *self, PyObject *args, PyObject *kwargs) {
    PyObject *layout, *streams, *failure, *context, *bounce;
    if (!PyArg_ParseTuple(args, "OOOOOnn", &layout, &streams, &failure, &context, &bounce,
                          &self->bounce_bytes, &self->direct_bytes))
        return -1;
    if (ctx_get_current == NULL || stream_sync == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Reader before bind and bind_copies");
        return -1;
    }
    self->context = PyLong_AsVoidPtr(context);
    self->bounce = (char *)PyLong_AsVoidPtr(bounce);
    if (PyErr_Occurred() || zyx_tracking_init(&self->tracking, layout) ||
        zyx_hold_field(&self->marks, streams, "_marks"))
        return -1;
    ZyxTracking *t = &self->tracking;
    if (t->params != 1 || t->reads != 1 || t->buffers != 1 || !PyList_CheckExact(self->marks) ||
        PyList_GET_SIZE(self->marks) != t->queues || self->bounce == NULL ||
        self->bounce_bytes > self->direct_bytes) {
        PyErr_SetString(PyExc_ValueError, "Reader: a layout of one read param, a mark queue "
                                          "per stream, a bounce buffer within direct");
        return -1;
    }
    Py_XSETREF(self->streams, Py_NewRef(streams));
    Py_XSETREF(self->failure, Py_NewRef(failure));
    return 0;
}

/* The DMA of ``bytes`` at device address ``src`` into ``host`` on ``stream`` and its wait;
 * NULL with the exception ``failure`` makes where one failed. */
static PyObject *reader_copy(Reader *self, char *host, uint64_t src, size_t bytes,
                             void *stream) {
    char *bounce = (Py_ssize_t)bytes <= self->bounce_bytes ? self->bounce : NULL;
    const char *call = "";
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = dma_read(host, src, bytes, bounce, stream, &call);
    Py_END_ALLOW_THREADS
    if (status == 0)
        Py_RETURN_NONE;
    return raise_error(PyObject_CallFunction(self->failure, "is", status, call));
}

/* Sequencer.done(queue) where the stream holds no marks, then Sequencer.collect (in
 * Python, where a deferred action waits): 0, or -1 with an exception. */
static int reader_done(Reader *self, long queue) {
    ZyxTracking *t = &self->tracking;
    PyList_SetItem(t->reached, queue, Py_NewRef(PyList_GET_ITEM(t->issued, queue)));
    PyObject *zero = PyLong_FromLong(0); /* DependencyTracker.idle: it caught up */
    if (zero == NULL)
        return -1;
    PyList_SetItem(t->load, queue, zero);
    PyObject *deferred = PyObject_GetAttrString(self->streams, "_deferred");
    if (deferred == NULL)
        return -1;
    Py_ssize_t waiting = PyObject_Length(deferred);
    Py_DECREF(deferred);
    if (waiting <= 0)
        return (int)waiting;
    PyObject *done = PyObject_CallMethod(self->streams, "collect", NULL);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* Whether the read may run here: ``queue`` a stream of no marks, needing no wait. */
static int reader_quiet(Reader *self, PyObject **records, long queue) {
    if (queue < 0 || zyx_tracking_hazard(&self->tracking, records, queue))
        return 0;
    Py_ssize_t marks = PyObject_Length(PyList_GET_ITEM(self->marks, queue));
    if (marks < 0)
        PyErr_Clear();
    return marks == 0;
}

/* read(buf, view, offset) -> the stream it ran on, or -1: the Python path's */
static PyObject *reader_read(Reader *self, PyObject *const *args, Py_ssize_t nargs) {
    ZyxTracking *t = &self->tracking;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "read takes 3 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *buf = args[0];
    void *current = NULL;
    if (ctx_get_current(&current) || current != self->context || !zyx_of_pool(t, buf) ||
        !zyx_alive(t, args))
        return PyLong_FromLong(-1);
    long offset = zyx_small_int(args[2]);
    PyObject *handle = ZYX_SLOT(buf, t->handle_at);
    if (offset < 0 || handle == NULL || !PyLong_CheckExact(handle))
        return PyLong_FromLong(-1);
    uint64_t src = PyLong_AsUnsignedLongLong(handle);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)) {
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    PyObject *bufs[1], *records[1], *done = NULL;
    if (view.len > self->direct_bytes || zyx_tracking_hold(t, args, bufs, records)) {
        PyBuffer_Release(&view);
        return PyLong_FromLong(-1);
    }
    long queue = zyx_tracking_choose(t, records);
    if (!reader_quiet(self, records, queue))
        done = PyLong_FromLong(-1);
    else if (!zyx_tracking_commit(t, bufs, records, queue)) {
        done = reader_copy(self, view.buf, src + (uint64_t)offset, (size_t)view.len,
                           t->handles[queue]);
        if (done != NULL) {
            Py_DECREF(done);
            done = reader_done(self, queue) ? NULL : PyLong_FromLong(queue);
            self->reads += done != NULL;
        }
    }
    zyx_tracking_release(t, bufs, records);
    PyBuffer_Release(&view);
    return done;
}

static PyMethodDef reader_methods[] = {
    {"read", (PyCFunction)(void (*)(void))reader_read, METH_FASTCALL,
     "read(buf, view, offset) -> the stream it ran on, or -1 (the Python path's)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef reader_members[] = {
    {"reads", T_PYSSIZET, offsetof(Reader, reads), READONLY,
     "reads run in C (the rest went to CudaPool._read_python)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_zyx_cuda_native.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A pool's small read: its steady state in C, the rest in CudaPool._read_python.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)reader_init,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_methods = reader_methods,
    .tp_members = reader_members,
};

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(launch, get_current, graph_launch): the driver's cuLaunchKernel, "
     "cuCtxGetCurrent and cuGraphLaunch"},
    {"current", current, METH_NOARGS, "current() -> the calling thread's current CUcontext"},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) -> CUresult"},
    {"bind_copies", (PyCFunction)(void (*)(void))bind_copies, METH_FASTCALL,
     "bind_copies(htod, dtoh, record, event_sync, stream_sync): the driver's entry points"},
    {"read", (PyCFunction)(void (*)(void))read_whole, METH_FASTCALL,
     "read(host, device, bounce, stream) -> (CUresult, call): host a writable buffer"},
    {"upload", (PyCFunction)(void (*)(void))upload, METH_FASTCALL,
     "upload(device, host, bytes, next, slot_bytes, slot0, event0, slot1, event1, stream) "
     "-> (CUresult, call)"},
    {"download", (PyCFunction)(void (*)(void))download, METH_FASTCALL,
     "download(device, host, bytes, next, slot_bytes, slot0, event0, slot1, event1, stream) "
     "-> (CUresult, call)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_zyx_cuda_native", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__zyx_cuda_native(void) {
    if (PyType_Ready(&LauncherType) < 0 || PyType_Ready(&ReplayerType) < 0 ||
        PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Launcher", (PyObject *)&LauncherType) < 0 ||
        PyModule_AddObjectRef(m, "Replayer", (PyObject *)&ReplayerType) < 0 ||
        PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0 ||
        zyx_add_lock_type(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
