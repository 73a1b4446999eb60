/* zyx-opencl's native calls, built at run time by zyx.native (see native.py), after
 * zyx's tracker.c.
 *
 * enqueue: clEnqueueNDRangeKernel with plain ints and no event out. pyopencl's binding
 * always creates an event, which costs NVIDIA's OpenCL about 2 us of host time per
 * launch; the scheduler asks for events only where something waits (markers). The GIL is
 * kept across the call, as pyopencl keeps it for every enqueue that does not block:
 * releasing and taking it back cost 0.02-0.035 us a launch (measured with the call
 * stubbed), and the call returns without waiting for the device.
 * Enqueuer: a program's submit and enqueue, in C where a launch is a plain one (below).
 * enqueue_window: the scheduler's loop over a window, calling each Enqueuer directly.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int32_t (*enqueue_fn)(void *queue, void *kernel, uint32_t dims, const size_t *offset,
                              const size_t *global, const size_t *local, uint32_t waits,
                              void *const *wait_list, void **event);

typedef int32_t (*set_arg_fn)(void *kernel, uint32_t index, size_t size, const void *value);

static enqueue_fn enqueue_kernel = NULL;
static set_arg_fn set_kernel_arg = NULL;

#define MAX_WAITS 64

/* bind(clEnqueueNDRangeKernel, clSetKernelArg): the loader's entry points */
static PyObject *bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *entries[2];
    if (zyx_entry_points("bind", args, nargs, 2, entries))
        return NULL;
    enqueue_kernel = (enqueue_fn)entries[0];
    set_kernel_arg = (set_arg_fn)entries[1];
    Py_RETURN_NONE;
}

/* enqueue(queue, kernel, gx, gy, gz, lx, ly, lz, waits) -> cl_int status; waits is None
 * or a tuple of cl_event addresses */
static PyObject *enqueue(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    size_t sizes[6];
    void *wait_list[MAX_WAITS];
    uint32_t waits = 0;
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "enqueue takes 9 arguments, got %zd", nargs);
        return NULL;
    }
    void *queue = PyLong_AsVoidPtr(args[0]);
    if (queue == NULL && PyErr_Occurred())
        return NULL;
    void *kernel = PyLong_AsVoidPtr(args[1]);
    if (kernel == NULL && PyErr_Occurred())
        return NULL;
    for (int i = 0; i < 6; i++) {
        sizes[i] = PyLong_AsSize_t(args[2 + i]);
        if (sizes[i] == (size_t)-1 && PyErr_Occurred())
            return NULL;
    }
    if (args[8] != Py_None) {
        if (!PyTuple_Check(args[8])) {
            PyErr_SetString(PyExc_TypeError, "enqueue: waits must be None or a tuple");
            return NULL;
        }
        Py_ssize_t count = PyTuple_GET_SIZE(args[8]);
        if (count > MAX_WAITS) {
            PyErr_Format(PyExc_ValueError, "enqueue: %zd events to wait for, at most %d",
                         count, MAX_WAITS);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < count; i++) {
            wait_list[i] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(args[8], i));
            if (wait_list[i] == NULL && PyErr_Occurred())
                return NULL;
        }
        waits = (uint32_t)count;
    }
    if (enqueue_kernel == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "enqueue before bind");
        return NULL;
    }
    int32_t status = enqueue_kernel(queue, kernel, 3, NULL, sizes, sizes + 3, waits,
                                    waits ? wait_list : NULL, NULL);
    return PyLong_FromLong(status);
}

/* ---- Enqueuer: a program's launches, for the steady state -----------------------------
 *
 * A launch passes through two generated Python functions of its program (program.py):
 * ``submit`` checks its arguments and appends it to the scheduler's window; ``enqueue``,
 * when the window is enqueued, does the tracker's queue choice and waits, the window's
 * gate, the kernel's arguments set where they changed, the enqueue, the record.
 * ``Enqueuer.submit`` appends here every launch whose arguments are plainly of their
 * params' kinds (live buffers of the pool, exact ints or floats), its work-groups within
 * the device's limits;
 * ``Enqueuer.enqueue`` enqueues here, with zyx's tracker.c, every launch that needs no
 * wait but the window's gate and finds the kernel holding its arguments, or only other
 * buffers. Anything else (a subclass, a released buffer, a wait on another queue, new
 * scalars) goes to the Python function, which decides afresh: nothing is changed before
 * that choice is made.
 */

typedef struct {
    PyObject_HEAD
    ZyxTracking tracking;
    PyObject *fallback; /* the generated Python enqueue */
    PyObject *program;  /* its ``bound``: the arguments its kernel holds */
    PyObject *used;     /* list: the queues the window being enqueued used so far */
    PyObject *gate;     /* list: the window's gate, where it has one */
    PyObject *failure;  /* failure(status) -> the exception to raise */
    PyObject *submit;   /* the generated Python submit */
    PyObject *batch;    /* list: the scheduler's window */
    PyObject *flush;    /* the scheduler's flush: enqueues the window */
    PyObject *work;     /* the global work of every launch, or None where it varies or is none */
    Py_ssize_t dim_param[3]; /* per axis: the Variable param its groups depend on, or -1 */
    long dim[3], limit[3];   /* per axis: the groups or that param's divisor; the most groups */
    Py_ssize_t params, window;
    char takes_float[ZYX_MAX_PARAMS]; /* scalar params that take a float too */
    long long low[ZYX_MAX_PARAMS], high[ZYX_MAX_PARAMS]; /* int params' plain values */
    void *kernel;
    size_t local[3];
    Py_ssize_t appended; /* launches appended here, not in the Python submit */
    Py_ssize_t enqueued; /* launches enqueued here, not in the Python enqueue */
} Enqueuer;

static PyObject *bound_name, *handle_name, *int_ptr_name, *enqueue_name;

static int enqueuer_traverse(Enqueuer *self, visitproc visit, void *arg) {
    Py_VISIT(self->fallback);
    Py_VISIT(self->program);
    Py_VISIT(self->used);
    Py_VISIT(self->gate);
    Py_VISIT(self->failure);
    Py_VISIT(self->submit);
    Py_VISIT(self->batch);
    Py_VISIT(self->flush);
    Py_VISIT(self->work);
    return zyx_tracking_traverse(&self->tracking, visit, arg);
}

static int enqueuer_clear(Enqueuer *self) {
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->program);
    Py_CLEAR(self->used);
    Py_CLEAR(self->gate);
    Py_CLEAR(self->failure);
    Py_CLEAR(self->submit);
    Py_CLEAR(self->batch);
    Py_CLEAR(self->flush);
    Py_CLEAR(self->work);
    zyx_tracking_clear(&self->tracking);
    return 0;
}

static void enqueuer_dealloc(Enqueuer *self) {
    PyObject_GC_UnTrack(self);
    enqueuer_clear(self);
    zyx_tracking_free(&self->tracking);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The scalar params (not in ``t``'s buffer params) of ``floats``, a tuple of positions,
 * marked as taking floats too. */
static int float_params(Enqueuer *self, PyObject *floats) {
    memset(self->takes_float, 0, sizeof(self->takes_float));
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(floats); i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(floats, i));
        if (at == -1 && PyErr_Occurred())
            return -1;
        if (at < 0 || at >= self->params || self->tracking.is_buffer[at]) {
            PyErr_Format(PyExc_ValueError, "Enqueuer: %zd is not a scalar param", at);
            return -1;
        }
        self->takes_float[at] = 1;
    }
    return 0;
}

/* The plain values of the int params: ``ranges``, a tuple of (position, low, high). A
 * value outside is left to the Python submit, which refuses it. */
static int int_ranges(Enqueuer *self, PyObject *ranges) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ranges); i++) {
        Py_ssize_t at;
        long long low, high;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(ranges, i), "nLL", &at, &low, &high))
            return -1;
        if (at < 0 || at >= self->params || self->tracking.is_buffer[at]) {
            PyErr_Format(PyExc_ValueError, "Enqueuer: %zd is not a scalar param", at);
            return -1;
        }
        self->low[at] = low;
        self->high[at] = high;
    }
    return 0;
}

/* The work-groups per axis, from ``grid``: per axis an int, or (param, div) for
 * ceil(args[param] / div) (``SymDim``); with at most ``limits`` groups. */
static int grid_of(Enqueuer *self, PyObject *grid, PyObject *limits) {
    if (!PyTuple_Check(grid) || PyTuple_GET_SIZE(grid) != 3 || !PyTuple_Check(limits) ||
        PyTuple_GET_SIZE(limits) != 3) {
        PyErr_SetString(PyExc_ValueError, "Enqueuer: grid and limits of 3 axes");
        return -1;
    }
    for (int axis = 0; axis < 3; axis++) {
        PyObject *d = PyTuple_GET_ITEM(grid, axis);
        self->dim_param[axis] = -1;
        if (PyTuple_Check(d) &&
            !PyArg_ParseTuple(d, "nl", &self->dim_param[axis], &self->dim[axis]))
            return -1;
        if (!PyTuple_Check(d))
            self->dim[axis] = PyLong_AsLong(d);
        self->limit[axis] = PyLong_AsLong(PyTuple_GET_ITEM(limits, axis));
        if (PyErr_Occurred())
            return -1;
        Py_ssize_t at = self->dim_param[axis];
        int variable = at >= 0 && at < self->params && !self->tracking.is_buffer[at];
        if (at >= self->params || (at >= 0 && (!variable || self->dim[axis] < 1))) {
            PyErr_SetString(PyExc_ValueError, "Enqueuer: a grid axis of no Variable param");
            return -1;
        }
    }
    return 0;
}

static int fixed_work(Enqueuer *self);

/* Enqueuer(fallback, program, params, reads, writes, load, issued, reached, track,
 *          buffer_type, pool, record_type, used, gate, queues, kernel, local, failure,
 *          (submit, batch, window, flush, grid, limits, floats, ranges)) */
static int enqueuer_init(Enqueuer *self, PyObject *args, PyObject *kwargs) {
    PyObject *fallback, *program, *reads, *writes, *load, *issued, *reached, *track;
    PyObject *pool, *used, *gate;
    PyObject *queues, *failure, *submit, *batch, *flush, *grid, *limits, *floats, *ranges;
    PyTypeObject *buffer_type, *record_type;
    Py_ssize_t params;
    unsigned long long kernel;
    if (!PyArg_ParseTuple(args, "OOnOOOOOOO!OO!O!O!O!K(nnn)O(OO!nOOOO!O!)", &fallback, &program,
                          &params, &reads, &writes, &load, &issued, &reached, &track,
                          &PyType_Type, &buffer_type, &pool, &PyType_Type, &record_type,
                          &PyList_Type, &used, &PyList_Type, &gate, &PyTuple_Type, &queues,
                          &kernel, &self->local[0], &self->local[1], &self->local[2], &failure,
                          &submit, &PyList_Type, &batch, &self->window, &flush, &grid,
                          &limits, &PyTuple_Type, &floats, &PyTuple_Type, &ranges))
        return -1;
    if (enqueue_kernel == NULL || set_kernel_arg == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Enqueuer before bind");
        return -1;
    }
    ZyxTracking *t = &self->tracking;
    if (zyx_tracking_init(t, params, reads, writes, load, issued, reached, track, buffer_type,
                          pool, record_type, queues))
        return -1;
    if (PyList_GET_SIZE(used) != t->queues) {
        PyErr_SetString(PyExc_ValueError, "Enqueuer: one used flag per queue");
        return -1;
    }
    self->params = params;
    if (float_params(self, floats) || int_ranges(self, ranges) || grid_of(self, grid, limits))
        return -1;
    self->kernel = (void *)(uintptr_t)kernel;
    PyObject **const fields[] = {&self->fallback, &self->program, &self->used,
                                 &self->gate,     &self->failure, &self->submit,
                                 &self->batch,    &self->flush};
    PyObject *const values[] = {fallback, program, used, gate, failure, submit, batch, flush};
    zyx_hold_fields(fields, values, 8);
    return fixed_work(self);
}

/* The cl_mem of a buffer argument (its handle's ``int_ptr``), or NULL. */
static void *cl_mem_of(PyObject *buffer) {
    PyObject *handle = PyObject_GetAttr(buffer, handle_name);
    PyObject *address = handle ? PyObject_GetAttr(handle, int_ptr_name) : NULL;
    void *mem = address ? PyLong_AsVoidPtr(address) : NULL;
    Py_XDECREF(handle);
    Py_XDECREF(address);
    if (mem == NULL)
        PyErr_Clear();
    return mem;
}

/* Whether the kernel can take these arguments here: each equal to the one it holds, or a
 * buffer (its cl_mem into ``mems``, ``*changed`` set). -1 with an exception. */
static int bindable(Enqueuer *self, PyObject *const *items, PyObject *bound, void **mems,
                    int *changed) {
    if (!PyTuple_CheckExact(bound) || PyTuple_GET_SIZE(bound) != self->params)
        return 0;
    for (Py_ssize_t i = 0; i < self->params; i++) {
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(bound, i), items[i], Py_EQ);
        if (same < 0)
            return -1;
        if (same)
            continue;
        if (!self->tracking.is_buffer[i] || (mems[i] = cl_mem_of(items[i])) == NULL)
            return 0;
        *changed = 1;
    }
    return 1;
}

/* Raise ``failure(call, status)``. */
static PyObject *raise_failure(Enqueuer *self, const char *call, int32_t status) {
    PyObject *error = PyObject_CallFunction(self->failure, "si", call, (int)status);
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return NULL;
}

/* Set the buffers that changed, enqueue on ``queue`` (after ``gate``, where not NULL) and
 * record it. */
static PyObject *enqueue_and_commit(Enqueuer *self, PyObject *args, PyObject *bound,
                                    void **mems, int changed, PyObject **bufs,
                                    PyObject **records, long queue, const size_t *global,
                                    void *gate) {
    PyObject *const *items = PySequence_Fast_ITEMS(args);
    if (changed) {
        /* As OpenCLProgram.bind: nothing is assumed bound until every argument is set. */
        if (PyObject_SetAttr(self->program, bound_name, Py_None))
            return NULL;
        for (Py_ssize_t i = 0; i < self->params; i++) {
            if (PyTuple_GET_ITEM(bound, i) == items[i] || !self->tracking.is_buffer[i])
                continue;
            int32_t status = set_kernel_arg(self->kernel, (uint32_t)i, sizeof(void *), &mems[i]);
            if (status)
                return raise_failure(self, "clSetKernelArg", status);
        }
        if (PyObject_SetAttr(self->program, bound_name, args))
            return NULL;
    }
    if (PyList_GET_ITEM(self->used, queue) != Py_True)
        PyList_SetItem(self->used, queue, Py_NewRef(Py_True));
    int32_t status = enqueue_kernel(self->tracking.handles[queue], self->kernel, 3, NULL,
                                    global, self->local, gate != NULL, gate ? &gate : NULL, NULL);
    if (status)
        return raise_failure(self, "clEnqueueNDRangeKernel", status);
    if (zyx_tracking_commit(&self->tracking, bufs, records, queue))
        return NULL;
    self->enqueued++;
    return PyLong_FromLong(queue);
}

/* The ``cl_event`` a launch on ``queue`` waits for: the window's gate where it is the
 * queue's first launch of a gated window, else NULL; 0, or -1 where the gate's address
 * cannot be read (no exception). */
static int gate_of(Enqueuer *self, long queue, void **gate) {
    *gate = NULL;
    if (PyList_GET_ITEM(self->used, queue) == Py_True || PyList_GET_SIZE(self->gate) == 0)
        return 0;
    PyObject *address = PyObject_GetAttr(PyList_GET_ITEM(self->gate, 0), int_ptr_name);
    *gate = address ? PyLong_AsVoidPtr(address) : NULL;
    Py_XDECREF(address);
    if (*gate != NULL)
        return 0;
    PyErr_Clear();
    return -1;
}

/* enqueue(args, work) -> queue: Launchable.enqueue of the program; raises its failure */
static PyObject *enqueuer_enqueue(Enqueuer *self, PyObject *const *argv, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "enqueue takes 2 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *args = argv[0], *work = argv[1];
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != self->params ||
        !PyTuple_CheckExact(work) || PyTuple_GET_SIZE(work) != 3)
        return PyObject_Vectorcall(self->fallback, argv, 2, NULL);
    size_t global[3];
    for (int i = 0; i < 3; i++) {
        long size = zyx_small_int(PyTuple_GET_ITEM(work, i));
        if (size < 0)
            return PyObject_Vectorcall(self->fallback, argv, 2, NULL);
        global[i] = (size_t)size;
    }
    ZyxTracking *t = &self->tracking;
    PyObject *bufs[ZYX_MAX_BUFFERS], *records[ZYX_MAX_BUFFERS];
    if (zyx_tracking_hold(t, PySequence_Fast_ITEMS(args), bufs, records))
        return PyObject_Vectorcall(self->fallback, argv, 2, NULL);
    long queue = zyx_tracking_choose(t, records);
    PyObject *bound = NULL, *done = NULL;
    void *mems[ZYX_MAX_PARAMS], *gate = NULL;
    int changed = 0, ready = !zyx_tracking_hazard(t, records, queue);
    if (ready && gate_of(self, queue, &gate))
        ready = 0;
    if (ready) {
        bound = PyObject_GetAttr(self->program, bound_name);
        ready = bound ? bindable(self, PySequence_Fast_ITEMS(args), bound, mems, &changed) : -1;
    }
    if (ready > 0)
        done = enqueue_and_commit(self, args, bound, mems, changed, bufs, records, queue,
                                  global, gate);
    else if (ready == 0)
        done = PyObject_Vectorcall(self->fallback, argv, 2, NULL);
    Py_XDECREF(bound);
    zyx_tracking_release(t, bufs, records);
    return done;
}

/* Whether ``arg`` is plainly a value of scalar param ``i``: an exact float, or an exact int
 * a double holds, where it takes a float; else an exact int within the param's range. */
static int plain_scalar(Enqueuer *self, Py_ssize_t i, PyObject *arg) {
    if (self->takes_float[i] && PyFloat_CheckExact(arg))
        return 1;
    if (self->takes_float[i] && PyLong_CheckExact(arg)) {
        if (PyLong_AsDouble(arg) == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        return 1;
    }
    if (!PyLong_CheckExact(arg))
        return 0;
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(arg, &overflow);
    return !overflow && value >= self->low[i] && value <= self->high[i];
}

/* Whether every argument is plainly of its param's kind: a buffer of the pool not
 * released, or a plain scalar. */
static int plain(Enqueuer *self, PyObject *const *items) {
    for (Py_ssize_t i = 0; i < self->params; i++) {
        PyObject *arg = items[i];
        if (self->tracking.is_buffer[i] ? !zyx_of_pool(&self->tracking, arg)
                                        : !plain_scalar(self, i, arg))
            return 0;
    }
    return zyx_alive(&self->tracking, items);
}

/* The launch's global work: the fixed one, else a new tuple from its arguments; NULL
 * (no exception) where it has no work-group or too many, or an argument is unusual. */
static PyObject *work_of(Enqueuer *self, PyObject *const *items) {
    if (self->work != Py_None)
        return Py_NewRef(self->work);
    size_t work[3];
    for (int axis = 0; axis < 3; axis++) {
        long groups = self->dim[axis];
        if (self->dim_param[axis] >= 0) {
            long value = zyx_small_int(items[self->dim_param[axis]]);
            if (value < 0)
                return NULL;
            groups = value / self->dim[axis] + (value % self->dim[axis] != 0);
        }
        if (groups < 1 || groups > self->limit[axis])
            return NULL;
        work[axis] = (size_t)groups * self->local[axis];
    }
    return Py_BuildValue("(nnn)", (Py_ssize_t)work[0], (Py_ssize_t)work[1], (Py_ssize_t)work[2]);
}

/* ``work`` set once: the global work of every launch where no axis depends on an
 * argument and there is a work-group, else None. */
static int fixed_work(Enqueuer *self) {
    Py_XSETREF(self->work, Py_NewRef(Py_None));
    if (self->dim_param[0] >= 0 || self->dim_param[1] >= 0 || self->dim_param[2] >= 0)
        return 0;
    PyObject *work = work_of(self, NULL);
    if (work == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_SETREF(self->work, work);
    return 0;
}

/* submit(args): Device.launch of the program, its device checked: the launch appended to
 * the window as ``(program, args, work)``, the window enqueued once full */
static PyObject *enqueuer_submit(Enqueuer *self, PyObject *args) {
    if ((!PyList_CheckExact(args) && !PyTuple_CheckExact(args)) ||
        PySequence_Fast_GET_SIZE(args) != self->params ||
        !plain(self, PySequence_Fast_ITEMS(args)))
        return PyObject_CallOneArg(self->submit, args);
    PyObject *work = work_of(self, PySequence_Fast_ITEMS(args));
    if (work == NULL)
        return PyErr_Occurred() ? NULL : PyObject_CallOneArg(self->submit, args);
    PyObject *held = PyTuple_CheckExact(args) ? Py_NewRef(args) : PyList_AsTuple(args);
    PyObject *entry = held ? PyTuple_Pack(3, self->program, held, work) : NULL;
    Py_XDECREF(held);
    Py_DECREF(work);
    int failed = entry == NULL || PyList_Append(self->batch, entry);
    Py_XDECREF(entry);
    if (failed)
        return NULL;
    self->appended++;
    if (PyList_GET_SIZE(self->batch) >= self->window)
        return PyObject_CallNoArgs(self->flush);
    Py_RETURN_NONE;
}

static PyMethodDef enqueuer_methods[] = {
    {"submit", (PyCFunction)enqueuer_submit, METH_O,
     "submit(args): Device.launch of the program, in C where its arguments are plain"},
    {"enqueue", (PyCFunction)(void (*)(void))enqueuer_enqueue, METH_FASTCALL,
     "enqueue(args, work) -> queue: in C where it repeats an earlier launch"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef enqueuer_members[] = {
    {"appended", T_PYSSIZET, offsetof(Enqueuer, appended), READONLY,
     "launches appended to the window in C (the rest went to the Python submit)"},
    {"enqueued", T_PYSSIZET, offsetof(Enqueuer, enqueued), READONLY,
     "launches enqueued in C (the rest went to the Python enqueue)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject EnqueuerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_zyx_opencl_native.Enqueuer",
    .tp_basicsize = sizeof(Enqueuer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A program's submit and enqueue: their steady state in C, the rest in Python.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)enqueuer_init,
    .tp_dealloc = (destructor)enqueuer_dealloc,
    .tp_traverse = (traverseproc)enqueuer_traverse,
    .tp_clear = (inquiry)enqueuer_clear,
    .tp_methods = enqueuer_methods,
    .tp_members = enqueuer_members,
};

/* One launch of a window: its program's ``enqueue(args, work)``, called here where it is
 * an Enqueuer's. */
static PyObject *enqueue_launch(PyObject *program, PyObject *const *args) {
    PyObject *enqueue = PyObject_GetAttr(program, enqueue_name);
    if (enqueue == NULL)
        return NULL;
    PyObject *self = PyCFunction_Check(enqueue) ? PyCFunction_GET_SELF(enqueue) : NULL;
    PyObject *queue = self != NULL && Py_IS_TYPE(self, &EnqueuerType)
                          ? enqueuer_enqueue((Enqueuer *)self, args, 2)
                          : PyObject_Vectorcall(enqueue, args, 2, NULL);
    Py_DECREF(enqueue);
    return queue;
}

/* Hand the error being raised to ``failed(error)``, which keeps it or raises it; 0, or -1
 * with ``failed``'s exception. */
static int hand_over(PyObject *failed) {
    PyObject *kind, *error, *traceback;
    PyErr_Fetch(&kind, &error, &traceback); /* PyErr_GetRaisedException from 3.12 */
    PyErr_NormalizeException(&kind, &error, &traceback);
    if (traceback != NULL)
        PyException_SetTraceback(error, traceback);
    PyObject *kept = PyObject_CallOneArg(failed, error);
    Py_XDECREF(kind);
    Py_XDECREF(error);
    Py_XDECREF(traceback);
    Py_XDECREF(kept);
    return kept == NULL ? -1 : 0;
}

/* enqueue_window(batch, command, failed): the scheduler's loop over a window
 * (``Scheduler._enqueue_entries`` without its launch log): each launch of ``batch``
 * through its program's ``enqueue``, each other command through ``command(command)``;
 * the error of either goes to ``failed(error)`` */
static PyObject *enqueue_window(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "enqueue_window(batch: list, command, failed)");
        return NULL;
    }
    PyObject *batch = args[0], *command = args[1], *failed = args[2];
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(batch); i++) {
        PyObject *entry = PyList_GET_ITEM(batch, i);
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) {
            PyErr_SetString(PyExc_TypeError, "enqueue_window: an entry is not a 3-tuple");
            return NULL;
        }
        PyObject *program = PyTuple_GET_ITEM(entry, 0);
        PyObject *queue = program == Py_None
                              ? PyObject_CallOneArg(command, PyTuple_GET_ITEM(entry, 1))
                              : enqueue_launch(program, &PyTuple_GET_ITEM(entry, 1));
        if (queue == NULL && hand_over(failed))
            return NULL;
        Py_XDECREF(queue);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(enqueue, set_arg): the loader's clEnqueueNDRangeKernel and clSetKernelArg"},
    {"enqueue", (PyCFunction)(void (*)(void))enqueue, METH_FASTCALL,
     "enqueue(queue, kernel, gx, gy, gz, lx, ly, lz, waits) -> cl_int"},
    {"enqueue_window", (PyCFunction)(void (*)(void))enqueue_window, METH_FASTCALL,
     "enqueue_window(batch, command, failed): each command of a window enqueued"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_zyx_opencl_native", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__zyx_opencl_native(void) {
    bound_name = PyUnicode_InternFromString("bound");
    handle_name = PyUnicode_InternFromString("handle");
    int_ptr_name = PyUnicode_InternFromString("int_ptr");
    enqueue_name = PyUnicode_InternFromString("enqueue");
    if (!bound_name || !handle_name || !int_ptr_name || !enqueue_name ||
        PyType_Ready(&EnqueuerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Enqueuer", (PyObject *)&EnqueuerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
