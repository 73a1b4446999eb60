/* zyx-opencl's native calls, built at run time by zyx.native (see native.py), after
 * zyx's tracker.c.
 *
 * enqueue: clEnqueueNDRangeKernel with plain ints and no event out. pyopencl's binding
 * always creates an event, which costs a driver host time on every launch (NVIDIA's
 * OpenCL most: benchmarks/opencl_c_loop.py times one queue with and without); the
 * scheduler asks for events only where something waits (markers). The GIL is kept across
 * the call, as pyopencl keeps it for every enqueue that does not block: the call returns
 * without waiting for the device, and giving the GIL up and taking it back would cost
 * more than it lets other threads do meanwhile.
 * Enqueuer: a kernel's submit and enqueue, in C where a launch is a plain one (below),
 * under the device's Lock (tracker.c's, which this module exports too).
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

/* ---- Enqueuer: a kernel's launches, for the steady state ------------------------------
 *
 * A launch passes through two Python methods of its program (program.py), which are the
 * specification of these: ``schedule`` checks its arguments and appends it to the
 * scheduler's window; ``issue``, when the window is enqueued, does the tracker's queue
 * choice and waits, the window's gate, the kernel's arguments set where they changed, the
 * enqueue, the record. ``Enqueuer.submit`` appends here every launch whose arguments are
 * plainly of their params' kinds (tracker.c's ``zyx_plain``), its work-groups within the
 * device's limits and its buffers as large as the kernel reaches (``zyx_fits``); ``Enqueuer.enqueue`` enqueues here, with tracker.c, every launch that
 * needs no wait but the window's gate and finds the kernel holding its arguments, or only
 * other buffers. Anything else (a subclass, a released buffer, a wait on another queue,
 * new scalars) goes to the Python method, which decides afresh: nothing is changed before
 * that choice is made.
 *
 * An Enqueuer is made from two objects, read by field name: the program's
 * ``zyx.native.LaunchLayout`` and its ``zyx_opencl.scheduler.NativeKernel``.
 */

typedef struct {
    PyObject_HEAD
    ZyxTracking tracking;
    PyObject *schedule; /* OpenCLProgram.schedule: the Python submit */
    PyObject *issue;    /* OpenCLProgram.issue: the Python enqueue */
    PyObject *program;  /* its ``bound``: the arguments its kernel holds */
    PyObject *used;     /* list: the queues the window being enqueued used so far */
    PyObject *gate;     /* list: the window's gate, where it has one */
    PyObject *failure;  /* failure(call, status) -> the exception to raise */
    PyObject *batch;    /* list: the scheduler's window */
    PyObject *flush;    /* the scheduler's flush: enqueues the window */
    PyObject *work;     /* the global work of every launch, or None where it varies or is none */
    Py_ssize_t window;
    void *kernel;
    size_t local[3];
    Py_ssize_t appended; /* launches appended here, not in schedule */
    Py_ssize_t enqueued; /* launches enqueued here, not in issue */
} Enqueuer;

static PyObject *bound_name, *int_ptr_name, *enqueue_name;

static int enqueuer_traverse(Enqueuer *self, visitproc visit, void *arg) {
    Py_VISIT(self->schedule);
    Py_VISIT(self->issue);
    Py_VISIT(self->program);
    Py_VISIT(self->used);
    Py_VISIT(self->gate);
    Py_VISIT(self->failure);
    Py_VISIT(self->batch);
    Py_VISIT(self->flush);
    Py_VISIT(self->work);
    return zyx_tracking_traverse(&self->tracking, visit, arg);
}

static int enqueuer_clear(Enqueuer *self) {
    Py_CLEAR(self->schedule);
    Py_CLEAR(self->issue);
    Py_CLEAR(self->program);
    Py_CLEAR(self->used);
    Py_CLEAR(self->gate);
    Py_CLEAR(self->failure);
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

/* The launch's global work (work-groups times the local size), or NULL (no exception)
 * where it has no work-group or too many, or an argument is unusual. */
static PyObject *work_of(Enqueuer *self, PyObject *const *items) {
    long groups[3];
    if (!zyx_groups(&self->tracking, items, groups))
        return NULL;
    return Py_BuildValue("(nnn)", (Py_ssize_t)(groups[0] * self->local[0]),
                         (Py_ssize_t)(groups[1] * self->local[1]),
                         (Py_ssize_t)(groups[2] * self->local[2]));
}

/* ``work`` set once: the global work of every launch where no axis depends on an
 * argument and there is a work-group, else None. */
static int fixed_work(Enqueuer *self) {
    const ZyxTracking *t = &self->tracking;
    Py_XSETREF(self->work, Py_NewRef(Py_None));
    if (t->dim_param[0] >= 0 || t->dim_param[1] >= 0 || t->dim_param[2] >= 0)
        return 0;
    PyObject *work = work_of(self, NULL);
    if (work == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_SETREF(self->work, work);
    return 0;
}

/* The NativeKernel's ``local`` (three sizes) and ``window`` (commands per window). */
static int launch_shape(Enqueuer *self, PyObject *kernel) {
    PyObject *local = zyx_field(kernel, "local");
    int ok = local != NULL && PyArg_ParseTuple(local, "nnn", &self->local[0], &self->local[1],
                                               &self->local[2]);
    Py_XDECREF(local);
    return ok ? zyx_size_field(kernel, "window", &self->window) : -1;
}

/* Enqueuer(layout, kernel): a zyx.native.LaunchLayout and a NativeKernel */
static int enqueuer_init(Enqueuer *self, PyObject *args, PyObject *kwargs) {
    PyObject *layout, *kernel;
    if (!PyArg_ParseTuple(args, "OO", &layout, &kernel))
        return -1;
    if (enqueue_kernel == NULL || set_kernel_arg == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Enqueuer before bind");
        return -1;
    }
    PyObject **const held[] = {&self->schedule, &self->issue, &self->program, &self->used,
                               &self->gate,     &self->failure, &self->batch, &self->flush};
    const char *const names[] = {"schedule", "issue",   "program", "used",
                                 "gate",     "failure", "batch",   "flush"};
    if (zyx_tracking_init(&self->tracking, layout))
        return -1;
    for (int i = 0; i < 8; i++)
        if (zyx_hold_field(held[i], kernel, names[i]))
            return -1;
    if (zyx_address_field(kernel, "kernel", &self->kernel) || launch_shape(self, kernel))
        return -1;
    if (!PyList_CheckExact(self->used) || PyList_GET_SIZE(self->used) != self->tracking.queues ||
        !PyList_CheckExact(self->gate) || !PyList_CheckExact(self->batch)) {
        PyErr_SetString(PyExc_ValueError, "NativeKernel: used (one flag per queue), gate and "
                                          "batch must be lists");
        return -1;
    }
    return fixed_work(self);
}

/* The cl_mem of a buffer argument (its handle's ``int_ptr``), or NULL. */
static void *cl_mem_of(const ZyxTracking *t, PyObject *buffer) {
    PyObject *handle = ZYX_SLOT(buffer, t->handle_at);
    PyObject *address = handle ? PyObject_GetAttr(handle, int_ptr_name) : NULL;
    void *mem = address ? PyLong_AsVoidPtr(address) : NULL;
    Py_XDECREF(address);
    if (mem == NULL)
        PyErr_Clear();
    return mem;
}

/* Whether the kernel can take these arguments here: each equal to the one it holds, or a
 * buffer (its cl_mem into ``mems``, ``*changed`` set). -1 with an exception. */
static int bindable(Enqueuer *self, PyObject *const *items, PyObject *bound, void **mems,
                    int *changed) {
    const ZyxTracking *t = &self->tracking;
    if (!PyTuple_CheckExact(bound) || PyTuple_GET_SIZE(bound) != t->params)
        return 0;
    for (Py_ssize_t i = 0; i < t->params; i++) {
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(bound, i), items[i], Py_EQ);
        if (same < 0)
            return -1;
        if (same)
            continue;
        if (!t->is_buffer[i] || !zyx_of_pool(t, items[i]) ||
            (mems[i] = cl_mem_of(t, items[i])) == NULL)
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
 * record it: where a kernel is enqueued in C (program.py's docstring names the one place
 * in Python). */
static PyObject *enqueue_and_commit(Enqueuer *self, PyObject *args, PyObject *bound,
                                    void **mems, int changed, PyObject **bufs,
                                    PyObject **records, long queue, const size_t *global,
                                    void *gate) {
    PyObject *const *items = PySequence_Fast_ITEMS(args);
    if (changed) {
        /* As OpenCLProgram.bind: nothing is assumed bound until every argument is set. */
        if (PyObject_SetAttr(self->program, bound_name, Py_None))
            return NULL;
        for (Py_ssize_t i = 0; i < self->tracking.params; i++) {
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

static PyObject *enqueuer_fallback(Enqueuer *self, PyObject *const *argv) {
    return PyObject_Vectorcall(self->issue, argv, 2, NULL);
}

/* enqueue(args, work) -> queue: Launchable.enqueue of the program; raises its failure */
static PyObject *enqueuer_enqueue(Enqueuer *self, PyObject *const *argv, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "enqueue takes 2 arguments, got %zd", nargs);
        return NULL;
    }
    ZyxTracking *t = &self->tracking;
    PyObject *args = argv[0], *work = argv[1];
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != t->params ||
        !PyTuple_CheckExact(work) || PyTuple_GET_SIZE(work) != 3)
        return enqueuer_fallback(self, argv);
    size_t global[3];
    for (int i = 0; i < 3; i++) {
        long size = zyx_small_int(PyTuple_GET_ITEM(work, i));
        if (size < 0)
            return enqueuer_fallback(self, argv);
        global[i] = (size_t)size;
    }
    PyObject *bufs[ZYX_MAX_BUFFERS], *records[ZYX_MAX_BUFFERS];
    if (zyx_tracking_hold(t, PySequence_Fast_ITEMS(args), bufs, records))
        return enqueuer_fallback(self, argv);
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
        done = enqueuer_fallback(self, argv);
    Py_XDECREF(bound);
    zyx_tracking_release(t, bufs, records);
    return done;
}

/* The launch appended to the window as ``(program, args, work)``, the window enqueued
 * once full; the device's lock held. */
static PyObject *enqueuer_submit_held(Enqueuer *self, PyObject *args) {
    ZyxTracking *t = &self->tracking;
    if ((!PyList_CheckExact(args) && !PyTuple_CheckExact(args)) ||
        PySequence_Fast_GET_SIZE(args) != t->params || !zyx_plain(t, PySequence_Fast_ITEMS(args)))
        return PyObject_CallOneArg(self->schedule, args);
    PyObject *work = self->work != Py_None ? Py_NewRef(self->work)
                                           : work_of(self, PySequence_Fast_ITEMS(args));
    if (work == NULL)
        return PyErr_Occurred() ? NULL : PyObject_CallOneArg(self->schedule, args);
    if (!zyx_fits(t, PySequence_Fast_ITEMS(args))) { /* schedule raises, naming the access */
        Py_DECREF(work);
        return PyObject_CallOneArg(self->schedule, args);
    }
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

/* submit(args): Device.launch of the program, which takes the device's lock */
static PyObject *enqueuer_submit(Enqueuer *self, PyObject *args) {
    zyx_lock_acquire(self->tracking.lock);
    PyObject *done = enqueuer_submit_held(self, args);
    zyx_lock_release(self->tracking.lock); /* held: it cannot fail */
    return done;
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
     "launches appended to the window in C (the rest went to OpenCLProgram.schedule)"},
    {"enqueued", T_PYSSIZET, offsetof(Enqueuer, enqueued), READONLY,
     "launches enqueued in C (the rest went to OpenCLProgram.issue)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject EnqueuerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_zyx_opencl_native.Enqueuer",
    .tp_basicsize = sizeof(Enqueuer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A kernel's submit and enqueue: their steady state in C, the rest in Python.",
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
    int_ptr_name = PyUnicode_InternFromString("int_ptr");
    enqueue_name = PyUnicode_InternFromString("enqueue");
    if (!bound_name || !int_ptr_name || !enqueue_name ||
        PyType_Ready(&EnqueuerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Enqueuer", (PyObject *)&EnqueuerType) < 0 ||
        zyx_add_lock_type(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
