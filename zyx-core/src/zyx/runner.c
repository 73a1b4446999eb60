/* zyx.runtime's ExecPlan.run in C: a cached plan's allocations, launches and releases.
 *
 * ``ExecPlan.run`` and ``ExecPlan._run`` in runtime.py are the specification: this makes
 * the same calls, in the same order, with the same arguments (the allocator's
 * ``allocate`` and ``free``, each launch's ``Device.launch``, each target's
 * ``realize_with``), and leaves no buffer behind where one of them raises. It runs on every
 * realize of a cached plan, where the Python loop's frames, tuple unpacking and list
 * copies cost more than the calls it makes (a claimed matmul: half of the plan's run).
 *
 * A plan is prepared once (``Plan``) from the tuples ``runtime._native_ops`` makes of its
 * steps; a plan that copies between devices is not prepared and keeps the Python path.
 * Nothing here locks: the runtime calls ``run`` under its lock, and each call's buffers
 * are its own (on the C stack where they fit).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define INLINE 16 /* slots kept on the C stack: most plans fit */

enum { ALLOC = 0, LAUNCH = 1, RELEASE = 2 };

static PyObject *allocate_fn, *free_fn, *stats, *launches_name, *buffer_name, *arg_name,
    *realize_with_name, *launch_name;

typedef struct {
    Py_ssize_t at, value; /* an argument's position; the leaf or slot it takes */
} Bind;

typedef struct {
    int code;
    Py_ssize_t slot;       /* ALLOC, RELEASE: the slot */
    PyObject *callee;      /* ALLOC: the pool; LAUNCH: the device */
    PyObject *operand;     /* ALLOC: the byte count; LAUNCH: the program */
    PyObject *fixed;       /* LAUNCH: a list of the arguments, ``None`` where bound */
    Bind *binds;           /* LAUNCH: the leaves', then the slots' */
    Py_ssize_t leaf_binds, slot_binds;
} Op;

typedef struct {
    PyObject_HEAD
    Op *ops;
    Py_ssize_t count, slots, launches;
    Bind *targets; /* per target: its position among the targets, the slot of its buffer */
    Py_ssize_t target_count;
} Plan;

static void plan_dealloc(Plan *self) {
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Op *op = &self->ops[i];
        Py_XDECREF(op->callee);
        Py_XDECREF(op->operand);
        Py_XDECREF(op->fixed);
        PyMem_Free(op->binds);
    }
    PyMem_Free(self->ops);
    PyMem_Free(self->targets);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ``pairs`` (a tuple of 2-tuples of ints) into ``out``; each first within ``[0, first)``,
 * each second within ``[0, second)`` where ``second`` is not negative. */
static int read_binds(PyObject *pairs, Bind *out, Py_ssize_t first, Py_ssize_t second) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pairs); i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        if (!PyArg_ParseTuple(pair, "nn", &out[i].at, &out[i].value))
            return -1;
        if (out[i].at < 0 || out[i].at >= first || out[i].value < 0 ||
            (second >= 0 && out[i].value >= second)) {
            PyErr_Format(PyExc_ValueError, "plan: binding (%zd, %zd) out of range",
                         out[i].at, out[i].value);
            return -1;
        }
    }
    return 0;
}

static int read_op(PyObject *item, Op *op, Py_ssize_t slots) {
    PyObject *callee, *operand, *fixed, *leaves, *bound;
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 2) {
        PyErr_SetString(PyExc_TypeError, "plan: an op is a tuple (code, ...)");
        return -1;
    }
    op->code = (int)PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
    if (op->code == ALLOC) {
        if (!PyArg_ParseTuple(item, "inOO!", &op->code, &op->slot, &callee, &PyLong_Type,
                              &operand))
            return -1;
    } else if (op->code == RELEASE) {
        if (!PyArg_ParseTuple(item, "in", &op->code, &op->slot))
            return -1;
        callee = operand = NULL;
    } else if (op->code == LAUNCH) {
        if (!PyArg_ParseTuple(item, "iOOO!O!O!", &op->code, &callee, &operand, &PyList_Type,
                              &fixed, &PyTuple_Type, &leaves, &PyTuple_Type, &bound))
            return -1;
        Py_ssize_t n = PyTuple_GET_SIZE(leaves) + PyTuple_GET_SIZE(bound);
        op->binds = PyMem_Calloc(n ? n : 1, sizeof(Bind));
        if (op->binds == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        op->leaf_binds = PyTuple_GET_SIZE(leaves);
        op->slot_binds = PyTuple_GET_SIZE(bound);
        Py_ssize_t params = PyList_GET_SIZE(fixed);
        if (read_binds(leaves, op->binds, params, -1) < 0 ||
            read_binds(bound, op->binds + op->leaf_binds, params, slots) < 0)
            return -1;
        op->fixed = Py_NewRef(fixed);
        op->slot = -1;
    } else {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "plan: unknown op code %d", op->code);
        return -1;
    }
    if (op->code != LAUNCH && (op->slot < 0 || op->slot >= slots)) {
        PyErr_Format(PyExc_ValueError, "plan: slot %zd out of range", op->slot);
        return -1;
    }
    op->callee = Py_XNewRef(callee);
    op->operand = Py_XNewRef(operand);
    return 0;
}

static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *ops, *targets;
    Py_ssize_t slots;
    if (!PyArg_ParseTuple(args, "O!nO!", &PyList_Type, &ops, &slots, &PyTuple_Type, &targets))
        return NULL;
    if (slots < 0) {
        PyErr_SetString(PyExc_ValueError, "plan: a negative slot count");
        return NULL;
    }
    Plan *self = (Plan *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->slots = slots;
    Py_ssize_t count = PyList_GET_SIZE(ops), targeted = PyTuple_GET_SIZE(targets);
    self->ops = PyMem_Calloc(count ? count : 1, sizeof(Op));
    self->targets = PyMem_Calloc(targeted ? targeted : 1, sizeof(Bind));
    if (self->ops == NULL || self->targets == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        self->count = i + 1; /* what dealloc releases, filled or not */
        if (read_op(PyList_GET_ITEM(ops, i), &self->ops[i], slots) < 0) {
            Py_DECREF(self);
            return NULL;
        }
        self->launches += self->ops[i].code == LAUNCH;
    }
    self->target_count = targeted;
    if (read_binds(targets, self->targets, PY_SSIZE_T_MAX, slots) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* What a leaf gives a launch: its buffer, or its value where it has none (a scalar). */
static PyObject *leaf_value(PyObject *leaves, Py_ssize_t at) {
    if (at >= PySequence_Fast_GET_SIZE(leaves)) {
        PyErr_SetString(PyExc_IndexError, "plan: a leaf past the leaves given");
        return NULL;
    }
    PyObject *leaf = PySequence_Fast_GET_ITEM(leaves, at);
    PyObject *buffer = PyObject_GetAttr(leaf, buffer_name);
    if (buffer != Py_None)
        return buffer;
    Py_DECREF(buffer);
    return PyObject_GetAttr(leaf, arg_name);
}

static int launch(Op *op, PyObject *leaves, PyObject **bufs) {
    Py_ssize_t n = PyList_GET_SIZE(op->fixed);
    PyObject *args = PyList_New(n);
    if (args == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++)
        PyList_SET_ITEM(args, i, Py_NewRef(PyList_GET_ITEM(op->fixed, i)));
    for (Py_ssize_t i = 0; i < op->leaf_binds + op->slot_binds; i++) {
        Bind *bind = &op->binds[i];
        PyObject *value = i < op->leaf_binds ? leaf_value(leaves, bind->value)
                                             : Py_NewRef(bufs[bind->value] ? bufs[bind->value]
                                                                           : Py_None);
        if (value == NULL) {
            Py_DECREF(args);
            return -1;
        }
        Py_SETREF(PyList_GET_ITEM(args, bind->at), value);
    }
    PyObject *call[3] = {op->callee, op->operand, args};
    PyObject *done = PyObject_VectorcallMethod(launch_name, call, 3, NULL);
    Py_DECREF(args);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

/* ``allocator.free(buf)``, the runner's reference to ``buf`` given up; -1 where it raised. */
static int give_back(PyObject *buf) {
    PyObject *done = PyObject_CallOneArg(free_fn, buf);
    Py_DECREF(buf);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    return 0;
}

static int step(Op *op, PyObject *leaves, PyObject **bufs) {
    if (op->code == ALLOC) {
        PyObject *call[2] = {op->callee, op->operand};
        PyObject *buf = PyObject_Vectorcall(allocate_fn, call, 2, NULL);
        if (buf == NULL)
            return -1;
        Py_XSETREF(bufs[op->slot], buf);
        return 0;
    }
    if (op->code == LAUNCH)
        return launch(op, leaves, bufs);
    PyObject *buf = bufs[op->slot];
    if (buf == NULL) {
        PyErr_Format(PyExc_RuntimeError, "plan: slot %zd released while empty", op->slot);
        return -1;
    }
    bufs[op->slot] = NULL;
    return give_back(buf);
}

/* Hand each target its buffer (``realize_with``). */
static int finish(Plan *self, PyObject *targets, PyObject **bufs) {
    for (Py_ssize_t i = 0; i < self->target_count; i++) {
        Bind *target = &self->targets[i];
        PyObject *buf = bufs[target->value];
        if (buf == NULL || target->at >= PySequence_Fast_GET_SIZE(targets)) {
            PyErr_SetString(PyExc_RuntimeError, "plan: a target without its buffer");
            return -1;
        }
        bufs[target->value] = NULL;
        PyObject *call[2] = {PySequence_Fast_GET_ITEM(targets, target->at), buf};
        PyObject *done =
PyObject_VectorcallMethod(realize_with_name, call, 2, NULL);
        Py_DECREF(buf);
        if (done == NULL)
            return -1;
        Py_DECREF(done);
    }
    return 0;
}

/* ``_free``: every buffer left goes back, the first that fails to ending it; an error
 * raised before stays the context of one raised here, as after Python's ``finally``. */
static void free_rest(PyObject **bufs, Py_ssize_t slots) {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    Py_ssize_t i = 0;
    for (; i < slots; i++) {
        PyObject *buf = bufs[i];
        bufs[i] = NULL;
        if (buf != NULL && give_back(buf) < 0)
            break;
    }
    for (i++; i < slots; i++)
        Py_CLEAR(bufs[i]);
    if (type == NULL)
        return;
    if (!PyErr_Occurred()) {
        PyErr_Restore(type, value, trace);
        return;
    }
    PyObject *type2, *value2, *trace2;
    PyErr_NormalizeException(&type, &value, &trace);
    if (trace != NULL)
        PyException_SetTraceback(value, trace);
    PyErr_Fetch(&type2, &value2, &trace2);
    PyErr_NormalizeException(&type2, &value2, &trace2);
    PyException_SetContext(value2, value); /* steals value */
    PyErr_Restore(type2, value2, trace2);
    Py_XDECREF(type);
    Py_XDECREF(trace);
}

/* ``stats.launches += done``, an error raised before kept (and one raised here lost). */
static void count(Py_ssize_t done) {
    if (done == 0)
        return;
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyObject *before = PyObject_GetAttr(stats, launches_name);
    PyObject *add = before == NULL ? NULL : PyLong_FromSsize_t(done);
    PyObject *after = add == NULL ? NULL : PyNumber_Add(before, add);
    if (after == NULL || PyObject_SetAttr(stats, launches_name, after) < 0)
        PyErr_WriteUnraisable(stats);
    Py_XDECREF(before);
    Py_XDECREF(add);
    Py_XDECREF(after);
    PyErr_Restore(type, value, trace);
}

static PyObject *plan_run(Plan *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "run(leaves, targets)");
        return NULL;
    }
    if (allocate_fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "runner: configure() was not called");
        return NULL;
    }
    PyObject *leaves = PySequence_Fast(args[0], "run: leaves must be a sequence");
    PyObject *targets = leaves ? PySequence_Fast(args[1], "run: targets must be a sequence")
                               : NULL;
    PyObject *inline_bufs[INLINE] = {NULL};
    PyObject **bufs = self->slots <= INLINE ? inline_bufs
                                            : PyMem_Calloc(self->slots, sizeof(PyObject *));
    int status = targets != NULL && bufs != NULL ? 0 : -1;
    if (bufs == NULL)
        PyErr_NoMemory();
    Py_ssize_t done = 0;
    for (Py_ssize_t i = 0; status == 0 && i < self->count; i++) {
        status = step(&self->ops[i], leaves, bufs);
        done += status == 0 && self->ops[i].code == LAUNCH;
    }
    if (status == 0)
        status = finish(self, targets, bufs);
    if (bufs != NULL) {
        free_rest(bufs, self->slots);
        status = PyErr_Occurred() ? -1 : status;
        if (bufs != inline_bufs)
            PyMem_Free(bufs);
    }
    count(done);
    Py_XDECREF(leaves);
    Py_XDECREF(targets);
    return status == 0 ? Py_NewRef(Py_None) : NULL;
}

static PyObject *plan_launches(Plan *self, void *closure) {
    return PyLong_FromSsize_t(self->launches);
}

static PyMethodDef plan_methods[] = {
    {"run", (PyCFunction)(void (*)(void))plan_run, METH_FASTCALL,
     "run(leaves, targets): ExecPlan.run's allocations, launches, releases and targets."},
    {NULL},
};

static PyGetSetDef plan_getset[] = {
    {"launches", (getter)plan_launches, NULL, "The launches of one run.", NULL},
    {NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_zyx_runner.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = plan_new,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_methods = plan_methods,
    .tp_getset = plan_getset,
    .tp_doc = "Plan(ops, slots, targets): an ExecPlan's steps, prepared to run in C.",
};

static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *allocate, *free, *counters;
    if (!PyArg_ParseTuple(args, "OOO", &allocate, &free, &counters))
        return NULL;
    Py_XSETREF(allocate_fn, Py_NewRef(allocate));
    Py_XSETREF(free_fn, Py_NewRef(free));
    Py_XSETREF(stats, Py_NewRef(counters));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(allocate, free, stats): the allocator's calls and the runtime's counters."},
    {NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_zyx_runner", NULL, -1,
                                        methods};

PyMODINIT_FUNC PyInit__zyx_runner(void) {
    launches_name = PyUnicode_InternFromString("launches");
    buffer_name = PyUnicode_InternFromString("buffer");
    arg_name = PyUnicode_InternFromString("arg");
    realize_with_name = PyUnicode_InternFromString("realize_with");
    launch_name = PyUnicode_InternFromString("launch");
    if (!launches_name || !buffer_name || !arg_name || !realize_with_name || !launch_name ||
        PyType_Ready(&PlanType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "Plan", (PyObject *)&PlanType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
