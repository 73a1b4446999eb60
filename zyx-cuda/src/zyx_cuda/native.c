/* zyx-cuda's native calls, built at run time by zyx.native (see native.py).
 *
 * launch: cuLaunchKernel with plain ints, no conversion objects: the driver's entry point
 * is bound once (bind), the kernel arguments are already packed in a void** block.
 * upload, download: one staging lane's whole share of a host<->device copy (see
 * staging.py), without the GIL: per chunk, wait for the slot, copy into or out of it,
 * and the DMA; in Python each chunk cost a GIL handoff per driver call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

static PyObject *bind(PyObject *self, PyObject *address) {
    void *entry = PyLong_AsVoidPtr(address);
    if (entry == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "bind: null cuLaunchKernel address");
        return NULL;
    }
    launch_kernel = (launch_kernel_fn)entry;
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
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "bind_copies takes 4 arguments, got %zd", nargs);
        return NULL;
    }
    for (int i = 0; i < 4; i++) {
        entries[i] = PyLong_AsVoidPtr(args[i]);
        if (entries[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "bind_copies: null address");
            return NULL;
        }
    }
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

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)bind, METH_O, "bind(address): the driver's cuLaunchKernel"},
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

PyMODINIT_FUNC PyInit__zyx_cuda_native(void) { return PyModule_Create(&module); }
