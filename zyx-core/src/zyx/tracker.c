/* zyx.streams' scheduling of one launch, in C, for backends' native launchers.
 *
 * ``zyx.native.load(name, source, prelude=("tracker",))`` compiles this text ahead of a
 * backend's own. A launcher keeps a ``ZyxTracking`` of its program's buffer params and, per
 * launch, decides as ``DependencyTracker.choose`` does, tests whether any wait is needed
 * (``DependencyTracker.waits`` would give none), and records the launch as
 * ``Sequencer.inline``'s commit lines do. It reads and writes ``Buffer.tracking`` and the
 * ``zyx.streams.Access`` records through their __slots__, in place.
 *
 * Where anything is unusual (a wait is needed, a record is not an ``Access``, an int is
 * not small), these functions say so and change nothing, and the launcher hands the
 * launch to its Python path, which decides afresh.
 *
 * It also holds what every backend's native module needs besides: reading the entry
 * points its ``bind`` is given, and taking a launcher's references at init.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define ZYX_MAX_BUFFERS 32
#define ZYX_MAX_PARAMS 64
#define ZYX_SLOT(object, at) (*(PyObject **)((char *)(object) + (at)))

typedef struct {
    PyObject *load;   /* DependencyTracker.load: commands per queue since it was idle */
    PyObject *issued; /* Sequencer.issued: the queues' sequence numbers */
    PyObject *reached; /* Sequencer.reached: the points known complete */
    PyObject *track;  /* DependencyTracker.track(buffer) -> a new record */
    PyTypeObject *buffer_type; /* zyx.backend.Buffer */
    PyObject *pool;            /* the device's pool: a buffer argument must be of it */
    PyTypeObject *record_type;
    Py_ssize_t pool_at, refcount_at, tracking_at, writer_queue_at, writer_at, readers_at;
    Py_ssize_t queues, reads, buffers; /* buffer params: the reads first, then the writes */
    Py_ssize_t positions[ZYX_MAX_BUFFERS];
    char is_buffer[ZYX_MAX_PARAMS];
    void **handles; /* the queues' native handles (streams, command queues) */
} ZyxTracking;

static void zyx_set_slot(PyObject *object, Py_ssize_t at, PyObject *value) {
    PyObject *old = ZYX_SLOT(object, at);
    Py_INCREF(value);
    ZYX_SLOT(object, at) = value;
    Py_XDECREF(old);
}

/* ``count`` entry points (a native module's ``bind``) from ``args`` into ``entries``: -1 with an exception where they
 * are not ``count`` non-null addresses. */
static int zyx_entry_points(const char *name, PyObject *const *args, Py_ssize_t nargs,
                            int count, void **entries) {
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

/* Set each of ``count`` fields to its value, taking a reference (a launcher's init). */
static void zyx_hold_fields(PyObject **const *fields, PyObject *const *values, int count) {
    for (int i = 0; i < count; i++) {
        Py_INCREF(values[i]);
        Py_XSETREF(*fields[i], values[i]);
    }
}

/* The offset of ``type``'s __slots__ attribute ``name`` in its instances. */
static int zyx_slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset) {
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

/* An int's value, or -2 where it is not a small int. */
static long zyx_small_int(PyObject *value) {
    if (value == NULL || !PyLong_CheckExact(value))
        return -2;
    int overflow;
    long v = PyLong_AsLongAndOverflow(value, &overflow);
    return overflow ? -2 : v;
}

/* Append the params a tuple of ints names (each below ``params``) to ``t->positions``. */
static int zyx_positions(ZyxTracking *t, PyObject *tuple, Py_ssize_t params) {
    if (!PyTuple_Check(tuple) || t->buffers + PyTuple_GET_SIZE(tuple) > ZYX_MAX_BUFFERS) {
        PyErr_Format(PyExc_ValueError, "a tuple of at most %d buffer params", ZYX_MAX_BUFFERS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        Py_ssize_t position = PyLong_AsSsize_t(PyTuple_GET_ITEM(tuple, i));
        if (position == -1 && PyErr_Occurred())
            return -1;
        if (position < 0 || position >= params) {
            PyErr_Format(PyExc_ValueError, "param %zd of %zd", position, params);
            return -1;
        }
        t->positions[t->buffers++] = position;
    }
    return 0;
}

/* The queues' native handles, from a tuple of addresses, into ``t->handles``. */
static int zyx_handles(ZyxTracking *t, PyObject *handles) {
    if (!PyTuple_Check(handles) || PyTuple_GET_SIZE(handles) != t->queues) {
        PyErr_SetString(PyExc_ValueError, "a tuple of one handle per queue");
        return -1;
    }
    PyMem_Free(t->handles);
    t->handles = PyMem_New(void *, t->queues);
    if (t->handles == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < t->queues; i++) {
        t->handles[i] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(handles, i));
        if (PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* Set up ``t`` for a program of ``params`` params that reads the buffer params ``reads``
 * and writes ``writes`` (tuples of positions) of ``pool``, on the tracker's ``load`` and
 * the sequencer's ``issued`` and ``reached`` lists, with ``track`` making records, over
 * the queues ``handles`` (a tuple of addresses); takes references. */
static int zyx_tracking_init(ZyxTracking *t, Py_ssize_t params, PyObject *reads,
                             PyObject *writes, PyObject *load, PyObject *issued,
                             PyObject *reached, PyObject *track, PyTypeObject *buffer_type,
                             PyObject *pool, PyTypeObject *record_type, PyObject *handles) {
    if (!PyList_Check(load) || !PyList_Check(issued) || !PyList_Check(reached) ||
        PyList_GET_SIZE(load) < 1 || PyList_GET_SIZE(issued) != PyList_GET_SIZE(load) ||
        PyList_GET_SIZE(reached) != PyList_GET_SIZE(load)) {
        PyErr_SetString(PyExc_ValueError, "load, issued, reached: one int per queue");
        return -1;
    }
    if (params < 0 || params > ZYX_MAX_PARAMS) {
        PyErr_Format(PyExc_ValueError, "at most %d params", ZYX_MAX_PARAMS);
        return -1;
    }
    t->buffers = 0;
    if (zyx_positions(t, reads, params))
        return -1;
    t->reads = t->buffers;
    if (zyx_positions(t, writes, params) ||
        zyx_slot_offset(buffer_type, "pool", &t->pool_at) ||
        zyx_slot_offset(buffer_type, "refcount", &t->refcount_at) ||
        zyx_slot_offset(buffer_type, "tracking", &t->tracking_at) ||
        zyx_slot_offset(record_type, "writer_queue", &t->writer_queue_at) ||
        zyx_slot_offset(record_type, "writer", &t->writer_at) ||
        zyx_slot_offset(record_type, "readers", &t->readers_at))
        return -1;
    t->queues = PyList_GET_SIZE(load);
    if (zyx_handles(t, handles))
        return -1;
    memset(t->is_buffer, 0, sizeof(t->is_buffer));
    for (Py_ssize_t k = 0; k < t->buffers; k++)
        t->is_buffer[t->positions[k]] = 1;
    PyObject **const fields[] = {&t->load,  &t->issued, &t->reached,
                                 &t->track, (PyObject **)&t->buffer_type,
                                 &t->pool,  (PyObject **)&t->record_type};
    PyObject *const values[] = {load,  issued, reached, track, (PyObject *)buffer_type,
                                pool,  (PyObject *)record_type};
    zyx_hold_fields(fields, values, 7);
    return 0;
}

static int zyx_tracking_traverse(ZyxTracking *t, visitproc visit, void *arg) {
    Py_VISIT(t->load);
    Py_VISIT(t->issued);
    Py_VISIT(t->reached);
    Py_VISIT(t->track);
    Py_VISIT(t->buffer_type);
    Py_VISIT(t->pool);
    Py_VISIT(t->record_type);
    return 0;
}

static void zyx_tracking_clear(ZyxTracking *t) {
    Py_CLEAR(t->load);
    Py_CLEAR(t->issued);
    Py_CLEAR(t->reached);
    Py_CLEAR(t->track);
    Py_CLEAR(t->buffer_type);
    Py_CLEAR(t->pool);
    Py_CLEAR(t->record_type);
}

/* Everything ``t`` holds, for its launcher's dealloc. */
static void zyx_tracking_free(ZyxTracking *t) {
    zyx_tracking_clear(t);
    PyMem_Free(t->handles);
    t->handles = NULL;
}

/* Whether ``arg`` is a buffer of the pool (released or not). */
static int zyx_of_pool(const ZyxTracking *t, PyObject *arg) {
    return PyObject_TypeCheck(arg, t->buffer_type) && ZYX_SLOT(arg, t->pool_at) == t->pool;
}

/* Whether no buffer argument of a launch (``items``, each a buffer of the pool at a buffer
 * param) was released. */
static int zyx_alive(const ZyxTracking *t, PyObject *const *items) {
    for (Py_ssize_t k = 0; k < t->buffers; k++)
        if (zyx_small_int(ZYX_SLOT(items[t->positions[k]], t->refcount_at)) <= 0)
            return 0;
    return 1;
}

/* The launch's buffers (``items`` are its arguments) and their records (NULL where
 * untracked), held; 0, or 1 where a record is not an ``Access`` (nothing held then). */
static int zyx_tracking_hold(ZyxTracking *t, PyObject *const *items, PyObject **bufs,
                             PyObject **records) {
    for (Py_ssize_t k = 0; k < t->buffers; k++) {
        PyObject *record = ZYX_SLOT(items[t->positions[k]], t->tracking_at);
        if (record == NULL || (record != Py_None && !Py_IS_TYPE(record, t->record_type)))
            return 1;
        bufs[k] = items[t->positions[k]];
        records[k] = record == Py_None ? NULL : record;
    }
    for (Py_ssize_t k = 0; k < t->buffers; k++) {
        Py_INCREF(bufs[k]);
        Py_XINCREF(records[k]);
    }
    return 0;
}

static void zyx_tracking_release(ZyxTracking *t, PyObject **bufs, PyObject **records) {
    for (Py_ssize_t k = 0; k < t->buffers; k++) {
        Py_DECREF(bufs[k]);
        Py_XDECREF(records[k]);
    }
}

/* The queue the last write of a buffer went to: -1 where none, -2 where unsure. */
static long zyx_writer(ZyxTracking *t, PyObject *record) {
    if (record == NULL)
        return -1;
    long queue = zyx_small_int(ZYX_SLOT(record, t->writer_queue_at));
    return queue < -1 ? -2 : queue;
}

/* DependencyTracker.choose: the last writer of the first input, else of an output, else
 * the least-loaded queue; -2 where unsure. */
static long zyx_tracking_choose(ZyxTracking *t, PyObject **records) {
    if (t->reads && zyx_writer(t, records[0]) != -1)
        return zyx_writer(t, records[0]);
    for (Py_ssize_t k = t->reads; k < t->buffers; k++)
        if (zyx_writer(t, records[k]) != -1)
            return zyx_writer(t, records[k]);
    long best = -2, least = 0;
    for (Py_ssize_t q = 0; q < t->queues; q++) {
        long load = zyx_small_int(PyList_GET_ITEM(t->load, q));
        if (load < 0)
            return -2;
        if (best < 0 || load < least)
            best = (long)q, least = load;
    }
    return best;
}

/* Whether a launch on ``queue`` must wait for ``token``, a point of queue ``other``: one
 * not known complete (zyx.streams.unreached), or 1 where unsure. */
static int zyx_waits_for(ZyxTracking *t, long queue, long other, PyObject *token) {
    if (other == queue)
        return 0;
    long point = zyx_small_int(token);
    if (other < 0 || other >= t->queues || point < 0)
        return 1;
    return point / t->queues > zyx_small_int(PyList_GET_ITEM(t->reached, other));
}

/* Whether a launch on ``queue`` must wait for another queue (or the records are unusual):
 * where DependencyTracker.waits gives points that are not known complete. */
static int zyx_tracking_hazard(ZyxTracking *t, PyObject **records, long queue) {
    if (queue < 0 || queue >= t->queues)
        return 1;
    for (Py_ssize_t k = 0; k < t->buffers; k++) {
        PyObject *record = records[k];
        if (record == NULL)
            continue;
        long last = zyx_writer(t, record);
        if (last == -2 || (last >= 0 && zyx_waits_for(t, queue, last,
                                                      ZYX_SLOT(record, t->writer_at))))
            return 1;
        if (k < t->reads)
            continue;
        PyObject *readers = ZYX_SLOT(record, t->readers_at), *key, *value;
        if (readers == NULL || !PyDict_CheckExact(readers))
            return 1;
        Py_ssize_t at = 0;
        while (PyDict_Next(readers, &at, &key, &value))
            if (zyx_waits_for(t, queue, zyx_small_int(key), value))
                return 1;
    }
    return 0;
}

/* Record the launch just enqueued on ``queue``: its sequence number and token, the
 * queue's load, each buffer's record (a new one where untracked). */
static int zyx_tracking_commit(ZyxTracking *t, PyObject **bufs, PyObject **records,
                               long queue) {
    long seq = zyx_small_int(PyList_GET_ITEM(t->issued, queue)) + 1;
    long load = zyx_small_int(PyList_GET_ITEM(t->load, queue)) + 1;
    PyObject *seq_obj = PyLong_FromLong(seq), *load_obj = PyLong_FromLong(load);
    PyObject *token = PyLong_FromLongLong((long long)seq * t->queues + queue);
    PyObject *queue_obj = PyLong_FromLong(queue);
    int status = -1;
    if (!seq_obj || !load_obj || !token || !queue_obj)
        goto done;
    PyList_SetItem(t->issued, queue, Py_NewRef(seq_obj));
    PyList_SetItem(t->load, queue, Py_NewRef(load_obj));
    for (Py_ssize_t k = 0; k < t->buffers; k++) {
        PyObject *record = records[k] ? Py_NewRef(records[k])
                                      : PyObject_CallOneArg(t->track, bufs[k]);
        if (record == NULL)
            goto done;
        PyObject *readers = ZYX_SLOT(record, t->readers_at);
        int failed = readers == NULL || !PyDict_CheckExact(readers);
        if (!failed && k < t->reads)
            failed = PyDict_SetItem(readers, queue_obj, token);
        else if (!failed) {
            zyx_set_slot(record, t->writer_queue_at, queue_obj);
            zyx_set_slot(record, t->writer_at, token);
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
