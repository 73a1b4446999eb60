/* zyx-cuda's native calls, built at run time by zyx.native (see native.py).
 *
 * launch: cuLaunchKernel with plain ints, no conversion objects: the driver's entry point
 * is bound once (bind), the kernel arguments are already packed in a void** block.
 * Launcher: a program's whole launch in C where it repeats an earlier one (below).
 * upload, download: one staging lane's whole share of a host<->device copy (see
 * staging.py), without the GIL: per chunk, wait for the slot, copy into or out of it,
 * and the DMA; in Python each chunk cost a GIL handoff per driver call.
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

static htod_fn copy_htod = NULL;
static dtoh_fn copy_dtoh = NULL;
static record_fn event_record = NULL;
static event_sync_fn event_sync = NULL;

typedef int (*ctx_get_current_fn)(void **context);

static ctx_get_current_fn ctx_get_current = NULL;

/* ``count`` entry points from ``args`` into ``entries``: -1 with an exception where they
 * are not ``count`` non-null addresses. */
static int entry_points(const char *name, PyObject *const *args, Py_ssize_t nargs, int count,
                        void **entries) {
    if (nargs != count) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments, got %zd", name, count, nargs);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        entries[i] = PyLong_AsVoidPtr(args[i]);
        if (entries[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: null address", name);
            return -1;
        }
    }
    return 0;
}

/* bind(cuLaunchKernel, cuCtxGetCurrent): the driver's entry points for launches */
static PyObject *bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *entries[2];
    if (entry_points("bind", args, nargs, 2, entries))
        return NULL;
    launch_kernel = (launch_kernel_fn)entries[0];
    ctx_get_current = (ctx_get_current_fn)entries[1];
    Py_RETURN_NONE;
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

/* bind_copies(cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuEventRecord, cuEventSynchronize) */
static PyObject *bind_copies(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *entries[4];
    if (entry_points("bind_copies", args, nargs, 4, entries))
        return NULL;
    copy_htod = (htod_fn)entries[0];
    copy_dtoh = (dtoh_fn)entries[1];
    event_record = (record_fn)entries[2];
    event_sync = (event_sync_fn)entries[3];
    Py_RETURN_NONE;
}

typedef struct {
    uint64_t device;
    char *host;
    size_t bytes, first, step, slot_bytes;
    char *slots[2];
    void *events[2];
    void *stream;
} Lane;

/* The lane's arguments: (device, host, bytes, first, step, slot_bytes, slot0, event0,
 * slot1, event1, stream), all ints. */
static int parse_lane(PyObject *const *args, Py_ssize_t nargs, Lane *lane) {
    size_t v[11];
    if (nargs != 11) {
        PyErr_Format(PyExc_TypeError, "a lane takes 11 arguments, got %zd", nargs);
        return -1;
    }
    for (int i = 0; i < 11; i++) {
        v[i] = PyLong_AsSize_t(args[i]);
        if (v[i] == (size_t)-1 && PyErr_Occurred())
            return -1;
    }
    if (v[4] == 0 || v[5] == 0) {
        PyErr_SetString(PyExc_ValueError, "a lane needs a step and a slot size");
        return -1;
    }
    if (copy_htod == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a lane before bind_copies");
        return -1;
    }
    lane->device = v[0];
    lane->host = (char *)v[1];
    lane->bytes = v[2], lane->first = v[3], lane->step = v[4], lane->slot_bytes = v[5];
    lane->slots[0] = (char *)v[6], lane->events[0] = (void *)v[7];
    lane->slots[1] = (char *)v[8], lane->events[1] = (void *)v[9];
    lane->stream = (void *)v[10];
    return 0;
}

/* The bytes of the chunk at ``at``: a whole slot, or what is left. */
static size_t chunk_bytes(const Lane *l, size_t at) {
    return l->bytes - at < l->slot_bytes ? l->bytes - at : l->slot_bytes;
}

static PyObject *lane_result(int status, const char *call) {
    return Py_BuildValue("(is)", status, status ? call : "");
}

/* upload(...lane) -> (CUresult, call): host to device through the lane's two slots */
static PyObject *upload(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Lane l;
    if (parse_lane(args, nargs, &l))
        return NULL;
    int status = 0, slot = 0;
    const char *call = "";
    Py_BEGIN_ALLOW_THREADS
    for (size_t at = l.first; at < l.bytes; at += l.step, slot ^= 1) {
        size_t size = chunk_bytes(&l, at);
        /* An event never recorded counts as complete. */
        if ((status = event_sync(l.events[slot]))) {
            call = "cuEventSynchronize";
            break;
        }
        memcpy(l.slots[slot], l.host + at, size);
        if ((status = copy_htod(l.device + at, l.slots[slot], size, l.stream))) {
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

/* Start the DMA of the chunk at ``at`` into ``slot``; the failed call's name, or NULL. */
static const char *fetch(const Lane *l, int slot, size_t at, int *status) {
    size_t size = chunk_bytes(l, at);
    if ((*status = copy_dtoh(l->slots[slot], l->device + at, size, l->stream)))
        return "cuMemcpyDtoHAsync";
    if ((*status = event_record(l->events[slot], l->stream)))
        return "cuEventRecord";
    return NULL;
}

/* download(...lane) -> (CUresult, call): device to host through the lane's two slots; the
 * next chunk's DMA runs while the current one is copied out */
static PyObject *download(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Lane l;
    if (parse_lane(args, nargs, &l))
        return NULL;
    int status = 0, slot = 0;
    const char *call = NULL;
    Py_BEGIN_ALLOW_THREADS
    for (size_t at = l.first; at < l.bytes; at += l.step, slot ^= 1) {
        size_t size = chunk_bytes(&l, at);
        if (at == l.first && (call = fetch(&l, slot, at, &status)))
            break;
        if (at + l.step < l.bytes && (call = fetch(&l, slot ^ 1, at + l.step, &status)))
            break;
        if ((status = event_sync(l.events[slot]))) {
            call = "cuEventSynchronize";
            break;
        }
        memcpy(l.host + at, l.slots[slot], size);
    }
    Py_END_ALLOW_THREADS
    return lane_result(status, call ? call : "");
}

/* ---- Launcher: a program's whole launch, for the steady state ------------------------
 *
 * A program's generated Python ``submit`` (program.py) checks the arguments, packs the
 * argument block, chooses a stream through the tracker (zyx.streams), makes the waits,
 * launches and records. Most launches repeat what an earlier one did: the same argument
 * objects, already checked and packed, on a stream with no cross-stream hazard. For those,
 * ``Launcher.submit`` does it here, reading the tracker's records through their __slots__;
 * anything else (new arguments, a hazard, an untracked layout, another context current)
 * goes to the Python ``submit``, which decides everything afresh. Nothing is changed
 * before that choice is made, so the Python path sees the state the C path saw.
 */

#define MAX_BUFFERS 32
#define MAX_PARAMS 64

typedef struct {
    PyObject_HEAD
    PyObject *fallback;  /* the generated Python submit */
    PyObject *packed;    /* list: the argument objects the block holds */
    PyObject *grid;      /* list: work-groups per axis of the packed arguments */
    PyObject *load;      /* list: the tracker's commands per stream since it was idle */
    PyObject *issued;    /* list: the streams' sequence numbers */
    PyObject *track;     /* the tracker's _track(buffer) -> record */
    PyObject *failure;   /* failure(CUresult) -> the exception to raise */
    PyObject *pool;      /* the device's pool: a buffer argument must be of it */
    PyTypeObject *buffer_type, *record_type;
    Py_ssize_t pool_at, handle_at, refcount_at, tracking_at;
    Py_ssize_t writer_queue_at, writer_at, readers_at;
    Py_ssize_t params, reads, buffers; /* buffer positions: reads first, then writes */
    Py_ssize_t positions[MAX_BUFFERS];
    char is_buffer[MAX_PARAMS];
    Py_ssize_t streams;
    void **handles;
    void *context, *function, **kernel_params;
    unsigned block[3], shared;
    Py_ssize_t launched; /* launches run here, not in the fallback */
} Launcher;

#define SLOT(object, at) (*(PyObject **)((char *)(object) + (at)))

static void set_slot(PyObject *object, Py_ssize_t at, PyObject *value) {
    PyObject *old = SLOT(object, at);
    Py_INCREF(value);
    SLOT(object, at) = value;
    Py_XDECREF(old);
}

/* The offset of ``type``'s __slots__ attribute ``name`` in its instances. */
static int slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset) {
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (descr == NULL)
        return -1;
    int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
             ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
    if (ok)
        *offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    if (!ok)
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ attribute", type->tp_name, name);
    return ok ? 0 : -1;
}

static int launcher_traverse(Launcher *self, visitproc visit, void *arg) {
    Py_VISIT(self->fallback);
    Py_VISIT(self->packed);
    Py_VISIT(self->grid);
    Py_VISIT(self->load);
    Py_VISIT(self->issued);
    Py_VISIT(self->track);
    Py_VISIT(self->failure);
    Py_VISIT(self->pool);
    Py_VISIT(self->buffer_type);
    Py_VISIT(self->record_type);
    return 0;
}

static int launcher_clear(Launcher *self) {
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->packed);
    Py_CLEAR(self->grid);
    Py_CLEAR(self->load);
    Py_CLEAR(self->issued);
    Py_CLEAR(self->track);
    Py_CLEAR(self->failure);
    Py_CLEAR(self->pool);
    Py_CLEAR(self->buffer_type);
    Py_CLEAR(self->record_type);
    return 0;
}

static void launcher_dealloc(Launcher *self) {
    PyObject_GC_UnTrack(self);
    launcher_clear(self);
    PyMem_Free(self->handles);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The C values of a tuple of ints: ``count`` of them, each at most ``limit``. */
static int ints(PyObject *tuple, Py_ssize_t count, unsigned long long limit,
                unsigned long long *out, const char *what) {
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != count) {
        PyErr_Format(PyExc_TypeError, "Launcher: %s must be a tuple of %zd ints", what, count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        out[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(tuple, i));
        if (PyErr_Occurred())
            return -1;
        if (out[i] > limit) {
            PyErr_Format(PyExc_OverflowError, "Launcher: %s out of range", what);
            return -1;
        }
    }
    return 0;
}

/* Launcher(fallback, packed, grid, reads, writes, load, issued, track, failure, pool,
 *          buffer_type, record_type, streams, context, function, block, shared, params) */
static int launcher_init(Launcher *self, PyObject *args, PyObject *kwargs) {
    PyObject *fallback, *packed, *grid, *reads, *writes, *load, *issued, *track, *failure;
    PyObject *pool;
    PyObject *streams, *block;
    PyTypeObject *buffer_type, *record_type;
    unsigned long long context, function, kernel_params, values[MAX_BUFFERS];
    unsigned int shared;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!O!OOOO!O!O!KKO!IK", &fallback, &PyList_Type,
                          &packed, &PyList_Type, &grid, &PyTuple_Type, &reads, &PyTuple_Type,
                          &writes, &PyList_Type, &load, &PyList_Type, &issued, &track, &failure,
                          &pool, &PyType_Type, &buffer_type, &PyType_Type, &record_type, &PyTuple_Type,
                          &streams, &context, &function, &PyTuple_Type, &block, &shared,
                          &kernel_params))
        return -1;
    Py_ssize_t nreads = PyTuple_GET_SIZE(reads), nwrites = PyTuple_GET_SIZE(writes);
    Py_ssize_t count = PyTuple_GET_SIZE(streams);
    if (nreads + nwrites > MAX_BUFFERS || PyList_GET_SIZE(packed) > MAX_PARAMS || PyList_GET_SIZE(grid) != 3 || count < 1 ||
        PyList_GET_SIZE(load) != count || PyList_GET_SIZE(issued) != count) {
        PyErr_SetString(PyExc_ValueError, "Launcher: a layout this launcher does not take");
        return -1;
    }
    if (slot_offset(buffer_type, "pool", &self->pool_at) ||
        slot_offset(buffer_type, "handle", &self->handle_at) ||
        slot_offset(buffer_type, "refcount", &self->refcount_at) ||
        slot_offset(buffer_type, "tracking", &self->tracking_at) ||
        slot_offset(record_type, "writer_queue", &self->writer_queue_at) ||
        slot_offset(record_type, "writer", &self->writer_at) ||
        slot_offset(record_type, "readers", &self->readers_at))
        return -1;
    if (launch_kernel == NULL || ctx_get_current == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Launcher before bind");
        return -1;
    }
    self->params = PyList_GET_SIZE(packed);
    unsigned long long last = self->params ? (unsigned long long)self->params - 1 : 0;
    if (ints(reads, nreads, last, values, "reads") ||
        ints(writes, nwrites, last, values + nreads, "writes"))
        return -1;
    memset(self->is_buffer, 0, sizeof(self->is_buffer));
    for (Py_ssize_t i = 0; i < nreads + nwrites; i++) {
        self->positions[i] = (Py_ssize_t)values[i];
        self->is_buffer[values[i]] = 1;
    }
    self->reads = nreads, self->buffers = nreads + nwrites;
    unsigned long long dims[3];
    if (ints(block, 3, UINT32_MAX, dims, "block"))
        return -1;
    for (int i = 0; i < 3; i++)
        self->block[i] = (unsigned)dims[i];
    PyMem_Free(self->handles);
    self->handles = PyMem_New(void *, count);
    if (self->handles == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        self->handles[i] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(streams, i));
        if (PyErr_Occurred())
            return -1;
    }
    self->streams = count;
    self->context = (void *)(uintptr_t)context;
    self->function = (void *)(uintptr_t)function;
    self->kernel_params = (void **)(uintptr_t)kernel_params;
    self->shared = shared;
    PyObject *held[] = {fallback, packed, grid,     load, issued, track, failure, pool,
                        (PyObject *)buffer_type, (PyObject *)record_type};
    PyObject **fields[] = {&self->fallback, &self->packed, &self->grid, &self->load,
                           &self->issued, &self->track, &self->failure, &self->pool,
                           (PyObject **)&self->buffer_type, (PyObject **)&self->record_type};
    for (int i = 0; i < 10; i++) {
        Py_INCREF(held[i]);
        Py_XSETREF(*fields[i], held[i]);
    }
    return 0;
}

/* An int slot's value, or -2 where it is not a small int. */
static long small_int(PyObject *value) {
    if (value == NULL || !PyLong_CheckExact(value))
        return -2;
    int overflow;
    long v = PyLong_AsLongAndOverflow(value, &overflow);
    return overflow ? -2 : v;
}

/* The stream the last write of a buffer went to: -1 where none, -2 where unsure. */
static long writer(Launcher *self, PyObject *record) {
    if (record == NULL)
        return -1;
    long queue = small_int(SLOT(record, self->writer_queue_at));
    return queue < -1 ? -2 : queue;
}

/* The stream the tracker chooses (zyx.streams.DependencyTracker.choose): the last writer
 * of the first input, else of an output, else the least-loaded; -2 where unsure. */
static long choose(Launcher *self, PyObject **records) {
    if (self->reads && writer(self, records[0]) != -1)
        return writer(self, records[0]);
    for (Py_ssize_t k = self->reads; k < self->buffers; k++)
        if (writer(self, records[k]) != -1)
            return writer(self, records[k]);
    long best = -2, least = 0;
    for (Py_ssize_t q = 0; q < self->streams; q++) {
        long load = small_int(PyList_GET_ITEM(self->load, q));
        if (load < 0)
            return -2;
        if (best < 0 || load < least)
            best = (long)q, least = load;
    }
    return best;
}

/* Whether the command needs a wait on another stream (or the records are unusual). */
static int hazard(Launcher *self, PyObject **records, long queue) {
    for (Py_ssize_t k = 0; k < self->buffers; k++) {
        PyObject *record = records[k];
        if (record == NULL)
            continue;
        long last = writer(self, record);
        if (last == -2 || (last >= 0 && last != queue))
            return 1;
        if (k < self->reads)
            continue;
        PyObject *readers = SLOT(record, self->readers_at), *key, *value;
        if (readers == NULL || !PyDict_CheckExact(readers))
            return 1;
        Py_ssize_t at = 0;
        while (PyDict_Next(readers, &at, &key, &value))
            if (small_int(key) != queue)
                return 1;
    }
    return 0;
}

/* Record the command just launched on ``queue`` (Sequencer.inline's commit lines). */
static int commit(Launcher *self, PyObject **bufs, PyObject **records, long queue) {
    long seq = small_int(PyList_GET_ITEM(self->issued, queue)) + 1;
    long load = small_int(PyList_GET_ITEM(self->load, queue)) + 1;
    PyObject *seq_obj = PyLong_FromLong(seq), *load_obj = PyLong_FromLong(load);
    PyObject *token = PyLong_FromLongLong((long long)seq * self->streams + queue);
    PyObject *queue_obj = PyLong_FromLong(queue);
    int status = -1;
    if (!seq_obj || !load_obj || !token || !queue_obj)
        goto done;
    PyList_SetItem(self->issued, queue, Py_NewRef(seq_obj));
    PyList_SetItem(self->load, queue, Py_NewRef(load_obj));
    for (Py_ssize_t k = 0; k < self->buffers; k++) {
        PyObject *record = records[k] ? Py_NewRef(records[k])
                                      : PyObject_CallOneArg(self->track, bufs[k]);
        if (record == NULL)
            goto done;
        PyObject *readers = SLOT(record, self->readers_at);
        int failed = readers == NULL || !PyDict_CheckExact(readers);
        if (!failed && k < self->reads)
            failed = PyDict_SetItem(readers, queue_obj, token);
        else if (!failed) {
            set_slot(record, self->writer_queue_at, queue_obj);
            set_slot(record, self->writer_at, token);
            PyDict_Clear(readers);
        }
        Py_DECREF(record);
        if (failed) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a tracker record without its readers");
            goto done;
        }
    }
    status = 0;
done:
    Py_XDECREF(seq_obj);
    Py_XDECREF(load_obj);
    Py_XDECREF(token);
    Py_XDECREF(queue_obj);
    return status;
}

static PyObject *launcher_fallback(Launcher *self, PyObject *args) {
    return PyObject_CallOneArg(self->fallback, args);
}

/* Launch on ``queue`` and record it; the buffers and their records are held. */
static PyObject *launch_and_commit(Launcher *self, PyObject **bufs, PyObject **records,
                                   long queue, const long *groups) {
    int result;
    Py_BEGIN_ALLOW_THREADS
    result = launch_kernel(self->function, (unsigned)groups[0], (unsigned)groups[1],
                           (unsigned)groups[2], self->block[0], self->block[1], self->block[2],
                           self->shared, self->handles[queue], self->kernel_params, NULL);
    Py_END_ALLOW_THREADS
    if (result) {
        PyObject *error = PyObject_CallFunction(self->failure, "i", result);
        if (error != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(error), error);
            Py_DECREF(error);
        }
        return NULL;
    }
    if (commit(self, bufs, records, queue))
        return NULL;
    self->launched++;
    Py_RETURN_NONE;
}

/* submit(args): Device.launch of the program */
static PyObject *launcher_submit(Launcher *self, PyObject *args) {
    if (!PyList_CheckExact(args) && !PyTuple_CheckExact(args))
        return launcher_fallback(self, args);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(args);
    if (n != self->params || PyList_GET_SIZE(self->packed) != n)
        return launcher_fallback(self, args);
    PyObject *const *items = PySequence_Fast_ITEMS(args);
    /* Packed objects were checked then, and scalars do not change; another buffer is
     * checked here as Program.specialize's lines check it, and packed below. */
    unsigned long long handles[MAX_PARAMS];
    int changed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *arg = items[i];
        if (arg == PyList_GET_ITEM(self->packed, i))
            continue;
        if (!self->is_buffer[i] || !PyObject_TypeCheck(arg, self->buffer_type) ||
            SLOT(arg, self->pool_at) != self->pool)
            return launcher_fallback(self, args);
        PyObject *handle = SLOT(arg, self->handle_at);
        if (handle == NULL || !PyLong_CheckExact(handle))
            return launcher_fallback(self, args);
        handles[i] = PyLong_AsUnsignedLongLong(handle);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return launcher_fallback(self, args);
        }
        changed = 1;
    }
    /* Any buffer may have been released since it was checked. */
    PyObject *bufs[MAX_BUFFERS], *records[MAX_BUFFERS];
    for (Py_ssize_t k = 0; k < self->buffers; k++) {
        PyObject *buf = items[self->positions[k]];
        PyObject *record = SLOT(buf, self->tracking_at);
        if (small_int(SLOT(buf, self->refcount_at)) <= 0 || record == NULL)
            return launcher_fallback(self, args);
        if (record != Py_None && !Py_IS_TYPE(record, self->record_type))
            return launcher_fallback(self, args);
        bufs[k] = buf;
        records[k] = record == Py_None ? NULL : record;
    }
    void *current = NULL;
    if (ctx_get_current(&current) || current != self->context)
        return launcher_fallback(self, args);
    long queue = choose(self, records);
    if (queue < 0 || queue >= self->streams || hazard(self, records, queue))
        return launcher_fallback(self, args);
    long groups[3];
    for (int i = 0; i < 3; i++) {
        groups[i] = small_int(PyList_GET_ITEM(self->grid, i));
        if (groups[i] < 0 || groups[i] > (long)UINT32_MAX)
            return launcher_fallback(self, args);
    }
    if (changed)
        for (Py_ssize_t i = 0; i < n; i++)
            if (items[i] != PyList_GET_ITEM(self->packed, i)) {
                *(uint64_t *)self->kernel_params[i] = handles[i];
                PyList_SetItem(self->packed, i, Py_NewRef(items[i]));
            }
    /* Held across the launch, which releases the GIL. */
    for (Py_ssize_t k = 0; k < self->buffers; k++) {
        Py_INCREF(bufs[k]);
        Py_XINCREF(records[k]);
    }
    PyObject *done = launch_and_commit(self, bufs, records, queue, groups);
    for (Py_ssize_t k = 0; k < self->buffers; k++) {
        Py_DECREF(bufs[k]);
        Py_XDECREF(records[k]);
    }
    return done;
}

static PyMethodDef launcher_methods[] = {
    {"submit", (PyCFunction)launcher_submit, METH_O,
     "submit(args): launch with ``args``, in C where it repeats an earlier launch"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef launcher_members[] = {
    {"launched", T_PYSSIZET, offsetof(Launcher, launched), READONLY,
     "launches run in C (the rest went to the Python submit)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_zyx_cuda_native.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A program's launch: its steady state in C, the rest in its Python submit.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)launcher_init,
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_traverse = (traverseproc)launcher_traverse,
    .tp_clear = (inquiry)launcher_clear,
    .tp_methods = launcher_methods,
    .tp_members = launcher_members,
};

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(launch, get_current): the driver's cuLaunchKernel and cuCtxGetCurrent"},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) -> CUresult"},
    {"bind_copies", (PyCFunction)(void (*)(void))bind_copies, METH_FASTCALL,
     "bind_copies(htod, dtoh, record, synchronize): the driver's entry points"},
    {"upload", (PyCFunction)(void (*)(void))upload, METH_FASTCALL,
     "upload(device, host, bytes, first, step, slot_bytes, slot0, event0, slot1, event1, "
     "stream) -> (CUresult, call)"},
    {"download", (PyCFunction)(void (*)(void))download, METH_FASTCALL,
     "download(device, host, bytes, first, step, slot_bytes, slot0, event0, slot1, event1, "
     "stream) -> (CUresult, call)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_zyx_cuda_native", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__zyx_cuda_native(void) {
    if (PyType_Ready(&LauncherType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Launcher", (PyObject *)&LauncherType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
