/* zyx.streams' scheduling of one launch, in C, for backends' native launchers.
 *
 * ``zyx.native.load(name, source, prelude=("tracker",))`` compiles this text ahead of a
 * backend's own. A launcher keeps a ``ZyxTracking``, set up once from its program's
 * ``zyx.native.LaunchLayout`` (``zyx_tracking_init``), and per launch checks arguments as
 * ``Program.inspect`` does for plain ones (``zyx_plain``, ``zyx_groups``), decides as
 * ``DependencyTracker.choose`` does, tests whether any wait is needed
 * (``DependencyTracker.waits`` would give none that is not known complete), and records
 * the launch as ``Sequencer.commit`` does. It checks, as ``Program.inspect`` does, that each
 * buffer holds what the kernel is known to reach in it (``zyx_fits``, from the
 * instructions of ``zyx.ir.extent``). It reads and writes ``Buffer.tracking`` and the
 * ``zyx.streams.Access`` records through their __slots__, in place. Those Python methods
 * are the specification of these functions.
 *
 * Where anything is unusual (a wait is needed, a record is not an ``Access``, an int is
 * not small, an argument is not plainly of its kind), these functions say so and change
 * nothing, and the launcher hands the launch to its backend's Python path, which decides
 * afresh. Nothing here locks: a device calls its launcher under its lock.
 *
 * It also holds what every backend's native module needs besides: reading the entry
 * points its ``bind`` is given and the fields of the objects a launcher is made from, and
 * ``Lock``, the device lock a launcher takes in C (below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>

#define ZYX_MAX_BUFFERS 32
#define ZYX_MAX_PARAMS 64
#define ZYX_SLOT(object, at) (*(PyObject **)((char *)(object) + (at)))


static void zyx_set_slot(PyObject *object, Py_ssize_t at, PyObject *value) {
    PyObject *old = ZYX_SLOT(object, at);
    Py_INCREF(value);
    ZYX_SLOT(object, at) = value;
    Py_XDECREF(old);
}

/* ``count`` entry points (a native module's ``bind``) from ``args`` into ``entries``: -1
 * with an exception where they are not ``count`` non-null addresses. */
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

/* ``object.name`` (a new reference), or NULL with an exception naming the field. */
static PyObject *zyx_field(PyObject *object, const char *name) {
    PyObject *value = PyObject_GetAttrString(object, name);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s has no field %s", Py_TYPE(object)->tp_name, name);
    }
    return value;
}

/* Set ``*field`` to ``object.name``, holding it; -1 with an exception. */
static int zyx_hold_field(PyObject **field, PyObject *object, const char *name) {
    PyObject *value = zyx_field(object, name);
    if (value == NULL)
        return -1;
    Py_XSETREF(*field, value);
    return 0;
}

/* ``object.name`` as a C integer (``Py_ssize_t``); -1 with an exception. */
static int zyx_size_field(PyObject *object, const char *name, Py_ssize_t *out) {
    PyObject *value = zyx_field(object, name);
    if (value == NULL)
        return -1;
    *out = PyLong_AsSsize_t(value);
    Py_DECREF(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* ``object.name`` as an address (an int); -1 with an exception. */
static int zyx_address_field(PyObject *object, const char *name, void **out) {
    PyObject *value = zyx_field(object, name);
    if (value == NULL)
        return -1;
    *out = PyLong_AsVoidPtr(value);
    Py_DECREF(value);
    return PyErr_Occurred() ? -1 : 0;
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

/* ---- Lock: a device's lock, taken by its launcher in C --------------------------------
 *
 * A re-entrant lock with the methods of ``threading.RLock`` that zyx uses (``acquire()``,
 * ``release()``, ``with``), which a native launcher takes with a C call: a launch is a
 * few hundred nanoseconds in C, and calling an ``RLock``'s methods costs as much again. A
 * backend whose native module is built makes its pool's lock one of these
 * (``zyx.native.new_lock``); its launcher takes it around a launch, and the Python path it
 * hands a launch to takes it again, re-entrantly. As in CPython's own ``RLock`` (up to
 * 3.12), the owner and count are read and written under the GIL only; the underlying
 * lock is the one a waiting thread blocks on, without the GIL.
 */

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    unsigned long owner;
    Py_ssize_t count;
} ZyxLock;

static PyTypeObject ZyxLockType;

/* Take ``l`` for the calling thread (again, where it holds it); blocks without the GIL
 * while another thread holds it. */
static void zyx_lock_acquire(ZyxLock *l) {
    unsigned long me = PyThread_get_thread_ident();
    if (l->count > 0 && l->owner == me) {
        l->count++;
        return;
    }
    if (!PyThread_acquire_lock(l->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(l->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    l->owner = me;
    l->count = 1;
}

/* Give ``l`` back once; -1 with RuntimeError where the calling thread does not hold it. */
static int zyx_lock_release(ZyxLock *l) {
    if (l->count == 0 || l->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return -1;
    }
    if (--l->count == 0) {
        l->owner = 0;
        PyThread_release_lock(l->lock);
    }
    return 0;
}

static PyObject *zyx_lock_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    ZyxLock *self = (ZyxLock *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void zyx_lock_dealloc(ZyxLock *self) {
    if (self->lock != NULL) {
        if (self->count > 0)
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *zyx_lock_py_acquire(ZyxLock *self, PyObject *unused) {
    zyx_lock_acquire(self);
    Py_RETURN_TRUE;
}

static PyObject *zyx_lock_py_release(ZyxLock *self, PyObject *unused) {
    if (zyx_lock_release(self))
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *zyx_lock_py_exit(ZyxLock *self, PyObject *const *args, Py_ssize_t nargs) {
    if (zyx_lock_release(self))
        return NULL;
    Py_RETURN_FALSE;
}

static PyObject *zyx_lock_py_is_owned(ZyxLock *self, PyObject *unused) {
    return PyBool_FromLong(self->count > 0 && self->owner == PyThread_get_thread_ident());
}

static PyMethodDef zyx_lock_methods[] = {
    {"acquire", (PyCFunction)zyx_lock_py_acquire, METH_NOARGS,
     "acquire() -> True: take the lock, waiting while another thread holds it"},
    {"release", (PyCFunction)zyx_lock_py_release, METH_NOARGS, "release(): give it back once"},
    {"__enter__", (PyCFunction)zyx_lock_py_acquire, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))zyx_lock_py_exit, METH_FASTCALL, NULL},
    {"_is_owned", (PyCFunction)zyx_lock_py_is_owned, METH_NOARGS,
     "whether the calling thread holds it"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ZyxLockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "zyx.native.Lock",
    .tp_basicsize = sizeof(ZyxLock),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A re-entrant lock a native launcher takes in C (zyx/tracker.c).",
    .tp_new = zyx_lock_new,
    .tp_dealloc = (destructor)zyx_lock_dealloc,
    .tp_methods = zyx_lock_methods,
};

/* ``object.name`` where it is a Lock of this module, held in ``*field``; -1 with an
 * exception where it is not. */
static int zyx_hold_lock(ZyxLock **field, PyObject *object, const char *name) {
    PyObject *lock = zyx_field(object, name);
    if (lock == NULL)
        return -1;
    if (!Py_IS_TYPE(lock, &ZyxLockType)) {
        PyErr_Format(PyExc_TypeError, "%s is a %s, not this module's Lock (zyx.native.new_lock)",
                     name, Py_TYPE(lock)->tp_name);
        Py_DECREF(lock);
        return -1;
    }
    Py_XSETREF(*field, (ZyxLock *)lock);
    return 0;
}

/* Add the ``Lock`` type to a backend's native module (its PyInit calls this). */
static int zyx_add_lock_type(PyObject *module) {
    if (PyType_Ready(&ZyxLockType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Lock", (PyObject *)&ZyxLockType);
}

typedef struct {
    PyObject *load;   /* DependencyTracker.load: commands per queue since it was idle */
    PyObject *issued; /* Sequencer.issued: the queues' sequence numbers */
    PyObject *reached; /* Sequencer.reached: the points known complete */
    PyObject *track;  /* DependencyTracker.track(buffer) -> a new record */
    PyTypeObject *buffer_type; /* zyx.backend.Buffer */
    PyObject *pool;            /* the device's pool: a buffer argument must be of it */
    PyTypeObject *record_type; /* zyx.streams.Access */
    ZyxLock *lock;             /* the device's lock: a launch holds it */
    Py_ssize_t pool_at, refcount_at, handle_at, tracking_at;
    Py_ssize_t writer_queue_at, writer_at, readers_at;
    Py_ssize_t queues, params, reads, buffers; /* buffer params: the reads, then the writes */
    Py_ssize_t positions[ZYX_MAX_BUFFERS];
    char is_buffer[ZYX_MAX_PARAMS];
    char takes_float[ZYX_MAX_PARAMS];                    /* scalar params that take a float */
    long long low[ZYX_MAX_PARAMS], high[ZYX_MAX_PARAMS]; /* the ints they take */
    Py_ssize_t dim_param[3]; /* per axis: the Variable param its groups depend on, or -1 */
    long dim[3], limit[3];   /* per axis: the groups or that param's divisor; the most */
    void **handles;          /* the queues' native handles (streams, command queues) */
    /* What the kernel reaches in its buffers (zyx.ir.extent; LaunchLayout.extent_code) */
    Py_ssize_t nbytes_at;       /* Buffer.nbytes */
    Py_ssize_t extent_count;    /* instructions */
    long long *extent_code;     /* four per instruction: op, a, b, c */
    long long *extent_regs;     /* one value per instruction */
    Py_ssize_t need_node[ZYX_MAX_PARAMS]; /* per param: the node of its need, or -1 */
    long long static_need[ZYX_MAX_PARAMS]; /* per param, where no Variable enters them */
    int sized;          /* whether any param has a need */
    int extent_static;  /* whether the needs depend on no Variable (static_need holds them) */
    int extent_broken;  /* whether they overflowed long long at init: the Python path */
} ZyxTracking;

/* An int's value, or -2 where it is not a small int. */
static long zyx_small_int(PyObject *value) {
    if (value == NULL || !PyLong_CheckExact(value))
        return -2;
    int overflow;
    long v = PyLong_AsLongAndOverflow(value, &overflow);
    return overflow ? -2 : v;
}

/* Append the params a tuple of ints names (each below ``t->params``) to ``t->positions``. */
static int zyx_positions(ZyxTracking *t, PyObject *tuple) {
    if (!PyTuple_Check(tuple) || t->buffers + PyTuple_GET_SIZE(tuple) > ZYX_MAX_BUFFERS) {
        PyErr_Format(PyExc_ValueError, "a tuple of at most %d buffer params", ZYX_MAX_BUFFERS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        Py_ssize_t position = PyLong_AsSsize_t(PyTuple_GET_ITEM(tuple, i));
        if (position == -1 && PyErr_Occurred())
            return -1;
        if (position < 0 || position >= t->params) {
            PyErr_Format(PyExc_ValueError, "param %zd of %zd", position, t->params);
            return -1;
        }
        t->positions[t->buffers++] = position;
        t->is_buffer[position] = 1;
    }
    return 0;
}

/* The layout's ``reads`` and ``writes``. */
static int zyx_buffer_params(ZyxTracking *t, PyObject *layout) {
    PyObject *reads = zyx_field(layout, "reads"), *writes = zyx_field(layout, "writes");
    int status = -1;
    t->buffers = 0;
    memset(t->is_buffer, 0, sizeof(t->is_buffer));
    if (reads != NULL && writes != NULL && !zyx_positions(t, reads)) {
        t->reads = t->buffers;
        status = zyx_positions(t, writes);
    }
    Py_XDECREF(reads);
    Py_XDECREF(writes);
    return status;
}

/* The layout's ``scalars``: per Variable (position, low, high, takes a float). */
static int zyx_scalar_params(ZyxTracking *t, PyObject *layout) {
    PyObject *scalars = zyx_field(layout, "scalars");
    if (scalars == NULL)
        return -1;
    int status = PyTuple_Check(scalars) ? 0 : -1;
    memset(t->takes_float, 0, sizeof(t->takes_float));
    for (Py_ssize_t i = 0; status == 0 && i < PyTuple_GET_SIZE(scalars); i++) {
        Py_ssize_t at;
        long long low, high;
        int real;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(scalars, i), "nLLp", &at, &low, &high, &real))
            status = -1;
        else if (at < 0 || at >= t->params || t->is_buffer[at])
            status = -1;
        else
            t->low[at] = low, t->high[at] = high, t->takes_float[at] = (char)real;
    }
    if (status && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "LaunchLayout.scalars: not (Variable, low, high, real)");
    Py_DECREF(scalars);
    return status;
}

/* The layout's ``grid`` (per axis (-1, groups) or (param, div)) and ``limits``. */
static int zyx_grid(ZyxTracking *t, PyObject *layout) {
    PyObject *grid = zyx_field(layout, "grid"), *limits = zyx_field(layout, "limits");
    int status = grid && limits && PyTuple_Check(grid) && PyTuple_GET_SIZE(grid) == 3 &&
                         PyTuple_Check(limits) && PyTuple_GET_SIZE(limits) == 3
                     ? 0
                     : -1;
    for (int axis = 0; status == 0 && axis < 3; axis++) {
        Py_ssize_t at;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(grid, axis), "nl", &at, &t->dim[axis])) {
            status = -1;
            break;
        }
        t->dim_param[axis] = at;
        t->limit[axis] = PyLong_AsLong(PyTuple_GET_ITEM(limits, axis));
        int variable = at >= 0 && at < t->params && !t->is_buffer[at] && t->dim[axis] >= 1;
        if (PyErr_Occurred() || (at != -1 && !variable))
            status = -1;
    }
    if (status && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "LaunchLayout.grid: an axis of no Variable param");
    Py_XDECREF(grid);
    Py_XDECREF(limits);
    return status;
}

/* The queues' native handles, from the layout's tuple of addresses, into ``t->handles``. */
static int zyx_handles(ZyxTracking *t, PyObject *layout) {
    PyObject *handles = zyx_field(layout, "queues");
    int status = -1;
    if (handles == NULL)
        return -1;
    if (!PyTuple_Check(handles) || PyTuple_GET_SIZE(handles) != t->queues)
        PyErr_SetString(PyExc_ValueError, "LaunchLayout.queues: one handle per queue");
    else if ((t->handles = PyMem_New(void *, t->queues)) == NULL)
        PyErr_NoMemory();
    else
        status = 0;
    for (Py_ssize_t i = 0; status == 0 && i < t->queues; i++) {
        t->handles[i] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(handles, i));
        if (PyErr_Occurred())
            status = -1;
    }
    Py_DECREF(handles);
    return status;
}

/* The slots of ``Buffer`` and ``Access`` a launcher reads and writes in place. */
static int zyx_slots(ZyxTracking *t) {
    return zyx_slot_offset(t->buffer_type, "pool", &t->pool_at) ||
           zyx_slot_offset(t->buffer_type, "refcount", &t->refcount_at) ||
           zyx_slot_offset(t->buffer_type, "handle", &t->handle_at) ||
           zyx_slot_offset(t->buffer_type, "tracking", &t->tracking_at) ||
           zyx_slot_offset(t->record_type, "writer_queue", &t->writer_queue_at) ||
           zyx_slot_offset(t->record_type, "writer", &t->writer_at) ||
           zyx_slot_offset(t->record_type, "readers", &t->readers_at);
}

/* ---- extents: the bytes a launch needs of each buffer ---------------------------------
 *
 * ``zyx.ir.extent.run`` is the specification: every instruction (op, a, b, c) computes one
 * value from earlier ones (a constant, a Variable's argument, + * - / % min max, a
 * select), here in ``long long``; an overflow or an argument that is not a small int says
 * "unusual", and the launch goes to the Python path, which computes exactly.
 */

enum { ZYX_CONST, ZYX_VAR, ZYX_ADD, ZYX_MUL, ZYX_NEG, ZYX_TDIV, ZYX_TMOD, ZYX_MIN, ZYX_MAX,
       ZYX_SEL, ZYX_FDIV };

/* Every instruction for a launch of ``items`` (NULL: there is no Variable) into
 * ``t->extent_regs``; 0, or 1 where unusual. */
static int zyx_extents_run(ZyxTracking *t, PyObject *const *items) {
    long long *r = t->extent_regs;
    for (Py_ssize_t k = 0; k < t->extent_count; k++) {
        const long long *in = t->extent_code + 4 * k;
        long long a = in[1], x = 0, y = 0;
        if (in[0] != ZYX_CONST && in[0] != ZYX_VAR) {
            x = r[a];
            y = in[0] == ZYX_NEG ? 0 : r[in[2]];
        }
        switch (in[0]) {
        case ZYX_CONST:
            r[k] = a;
            break;
        case ZYX_VAR: {
            int overflow;
            if (items == NULL || !PyLong_Check(items[a]))
                return 1;
            r[k] = PyLong_AsLongLongAndOverflow(items[a], &overflow);
            if (overflow || (r[k] == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                return 1;
            }
            break;
        }
        case ZYX_ADD:
            if (__builtin_add_overflow(x, y, &r[k]))
                return 1;
            break;
        case ZYX_MUL:
            if (__builtin_mul_overflow(x, y, &r[k]))
                return 1;
            break;
        case ZYX_NEG:
            if (x == LLONG_MIN)
                return 1;
            r[k] = -x;
            break;
        case ZYX_TDIV:
        case ZYX_FDIV:
            if (y == 0) {
                r[k] = 0;
                break;
            }
            if (x == LLONG_MIN && y == -1)
                return 1;
            r[k] = x / y;
            if (in[0] == ZYX_FDIV && x % y != 0 && ((x < 0) != (y < 0)))
                r[k]--;
            break;
        case ZYX_TMOD:
            r[k] = y == 0 || y == -1 ? 0 : x % y;
            break;
        case ZYX_MIN:
            r[k] = x < y ? x : y;
            break;
        case ZYX_MAX:
            r[k] = x > y ? x : y;
            break;
        case ZYX_SEL:
            r[k] = x >= 1 ? y : r[in[3]];
            break;
        default:
            return 1;
        }
    }
    return 0;
}

/* The layout's ``extent_code`` (instructions over earlier nodes) and ``extent_needs`` (per
 * param its node, -1 for none); the needs evaluated here where no Variable enters them. */
static int zyx_extents_init(ZyxTracking *t, PyObject *layout) {
    PyObject *code = zyx_field(layout, "extent_code"), *needs = zyx_field(layout, "extent_needs");
    int status = -1, variables = 0;
    PyMem_Free(t->extent_code);
    PyMem_Free(t->extent_regs);
    t->extent_code = NULL, t->extent_regs = NULL;
    t->extent_count = 0, t->sized = 0, t->extent_static = 1, t->extent_broken = 0;
    if (code == NULL || needs == NULL)
        goto done;
    if (!PyTuple_Check(code) || !PyTuple_Check(needs) || PyTuple_GET_SIZE(needs) != t->params) {
        PyErr_SetString(PyExc_ValueError, "LaunchLayout: extent_code, and one need per param");
        goto done;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(code);
    t->extent_code = PyMem_New(long long, 4 * (count ? count : 1));
    t->extent_regs = PyMem_New(long long, count ? count : 1);
    if (t->extent_code == NULL || t->extent_regs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    t->extent_count = count;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *in = PyTuple_GET_ITEM(code, k);
        long long *out = t->extent_code + 4 * k;
        if (!PyTuple_Check(in) || PyTuple_GET_SIZE(in) != 4) {
            PyErr_SetString(PyExc_ValueError, "LaunchLayout.extent_code: (op, a, b, c) each");
            goto done;
        }
        for (int j = 0; j < 4; j++) {
            int overflow;
            out[j] = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(in, j), &overflow);
            if (out[j] == -1 && PyErr_Occurred())
                goto done;
            if (overflow) /* a constant past long long: only Python computes with it */
                t->extent_broken = 1, out[j] = 0;
        }
        int operands = out[0] == ZYX_CONST || out[0] == ZYX_VAR ? 0 : out[0] == ZYX_NEG ? 1
                       : out[0] == ZYX_SEL ? 3 : 2;
        for (int j = 1; j <= operands; j++)
            if (out[j] < 0 || out[j] >= k) {
                PyErr_SetString(PyExc_ValueError, "LaunchLayout.extent_code: a later operand");
                goto done;
            }
        if (out[0] == ZYX_VAR) {
            if (out[1] < 0 || out[1] >= t->params || t->is_buffer[out[1]]) {
                PyErr_SetString(PyExc_ValueError, "LaunchLayout.extent_code: not a Variable");
                goto done;
            }
            variables = 1;
        }
    }
    for (Py_ssize_t i = 0; i < t->params; i++) {
        t->need_node[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(needs, i));
        if (t->need_node[i] == -1 && PyErr_Occurred())
            goto done;
        if (t->need_node[i] < -1 || t->need_node[i] >= count ||
            (t->need_node[i] >= 0 && !t->is_buffer[i])) {
            PyErr_SetString(PyExc_ValueError, "LaunchLayout.extent_needs: not a buffer's node");
            goto done;
        }
        t->sized |= t->need_node[i] >= 0;
    }
    t->extent_static = !variables;
    if (t->extent_static && !t->extent_broken) {
        if (zyx_extents_run(t, NULL))
            t->extent_broken = 1;
        for (Py_ssize_t i = 0; i < t->params; i++)
            t->static_need[i] = t->need_node[i] >= 0 ? t->extent_regs[t->need_node[i]] : 0;
    }
    status = zyx_slot_offset(t->buffer_type, "nbytes", &t->nbytes_at);
done:
    Py_XDECREF(code);
    Py_XDECREF(needs);
    return status;
}

/* Whether each buffer of a launch of plain ``items`` holds what the kernel is known to
 * reach in it (``Program.inspect``'s check): 1; 0 where one does not, or where the needs
 * cannot be computed here (the Python path decides, and raises). */
static int zyx_fits(ZyxTracking *t, PyObject *const *items) {
    if (!t->sized)
        return 1;
    if (t->extent_broken || (!t->extent_static && zyx_extents_run(t, items)))
        return 0;
    for (Py_ssize_t k = 0; k < t->buffers; k++) {
        Py_ssize_t i = t->positions[k], node = t->need_node[i];
        if (node < 0)
            continue;
        long long need = t->extent_static ? t->static_need[i] : t->extent_regs[node];
        long nbytes = zyx_small_int(ZYX_SLOT(items[i], t->nbytes_at));
        if (nbytes < 0 || (long long)nbytes < need)
            return 0;
    }
    return 1;
}

/* Set up ``t`` from a ``zyx.native.LaunchLayout``; holds what it keeps. 0, or -1 with an
 * exception. */
static int zyx_tracking_init(ZyxTracking *t, PyObject *layout) {
    PyObject **const held[] = {&t->load,  &t->issued, &t->reached, &t->track, &t->pool,
                               (PyObject **)&t->buffer_type, (PyObject **)&t->record_type};
    const char *const names[] = {"load", "issued", "reached", "track", "pool",
                                 "buffer_type", "record_type"};
    for (int i = 0; i < 7; i++)
        if (zyx_hold_field(held[i], layout, names[i]))
            return -1;
    if (zyx_hold_lock(&t->lock, layout, "lock"))
        return -1;
    if (!PyList_Check(t->load) || !PyList_Check(t->issued) || !PyList_Check(t->reached) ||
        PyList_GET_SIZE(t->load) < 1 || PyList_GET_SIZE(t->issued) != PyList_GET_SIZE(t->load) ||
        PyList_GET_SIZE(t->reached) != PyList_GET_SIZE(t->load) ||
        !PyType_Check(t->buffer_type) || !PyType_Check(t->record_type)) {
        PyErr_SetString(PyExc_ValueError, "LaunchLayout: load, issued, reached of one int per "
                                          "queue, and the buffer and record types");
        return -1;
    }
    t->queues = PyList_GET_SIZE(t->load);
    if (zyx_size_field(layout, "params", &t->params))
        return -1;
    if (t->params < 0 || t->params > ZYX_MAX_PARAMS) {
        PyErr_Format(PyExc_ValueError, "LaunchLayout: at most %d params", ZYX_MAX_PARAMS);
        return -1;
    }
    PyMem_Free(t->handles);
    t->handles = NULL;
    return zyx_buffer_params(t, layout) || zyx_scalar_params(t, layout) ||
                   zyx_grid(t, layout) || zyx_slots(t) || zyx_handles(t, layout) ||
                   zyx_extents_init(t, layout)
               ? -1
               : 0;
}

static int zyx_tracking_traverse(ZyxTracking *t, visitproc visit, void *arg) {
    Py_VISIT(t->load);
    Py_VISIT(t->issued);
    Py_VISIT(t->reached);
    Py_VISIT(t->track);
    Py_VISIT(t->buffer_type);
    Py_VISIT(t->pool);
    Py_VISIT(t->record_type);
    Py_VISIT(t->lock);
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
    Py_CLEAR(t->lock);
}

/* Everything ``t`` holds, for its launcher's dealloc. */
static void zyx_tracking_free(ZyxTracking *t) {
    zyx_tracking_clear(t);
    PyMem_Free(t->handles);
    t->handles = NULL;
    PyMem_Free(t->extent_code);
    PyMem_Free(t->extent_regs);
    t->extent_code = NULL, t->extent_regs = NULL;
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

/* Whether ``arg`` is plainly a value of scalar param ``i`` (``Program.inspect`` takes it as
 * it is): an exact float, or an exact int a double holds, where it takes a float; else an
 * exact int within the param's range. */
static int zyx_plain_scalar(const ZyxTracking *t, Py_ssize_t i, PyObject *arg) {
    if (t->takes_float[i] && PyFloat_CheckExact(arg))
        return 1;
    if (!PyLong_CheckExact(arg))
        return 0;
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(arg, &overflow);
    return !overflow && value >= t->low[i] && value <= t->high[i];
}

/* Whether every argument is plainly of its param's kind: a buffer of the pool not
 * released, or a plain scalar. */
static int zyx_plain(const ZyxTracking *t, PyObject *const *items) {
    for (Py_ssize_t i = 0; i < t->params; i++) {
        PyObject *arg = items[i];
        if (t->is_buffer[i] ? !zyx_of_pool(t, arg) : !zyx_plain_scalar(t, i, arg))
            return 0;
    }
    return zyx_alive(t, items);
}

/* The work-groups per axis of a launch of plain ``items`` (``Program.groups``) into
 * ``groups``: 1, or 0 where an axis has none or more than the device's limit, or an
 * argument is unusual (a launch for the Python path). */
static int zyx_groups(const ZyxTracking *t, PyObject *const *items, long *groups) {
    for (int axis = 0; axis < 3; axis++) {
        long count = t->dim[axis];
        if (t->dim_param[axis] >= 0) {
            long value = zyx_small_int(items[t->dim_param[axis]]);
            if (value < 0)
                return 0;
            count = value / count + (value % count != 0);
        }
        if (count < 1 || count > t->limit[axis])
            return 0;
        groups[axis] = count;
    }
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

/* Sequencer.commit: record the launch just enqueued on ``queue``: its sequence number and
 * token, the queue's load, each buffer's record (a new one where untracked). */
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
