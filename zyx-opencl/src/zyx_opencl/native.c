/* zyx-opencl's native call, built at run time by zyx.native (see native.py).
 *
 * enqueue: clEnqueueNDRangeKernel with plain ints and no event out. pyopencl's binding
 * always creates an event, which costs NVIDIA's OpenCL about 1.8 us of host time per
 * launch; the scheduler asks for events only where something waits (markers).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int32_t (*enqueue_fn)(void *queue, void *kernel, uint32_t dims, const size_t *offset,
                              const size_t *global, const size_t *local, uint32_t waits,
                              void *const *wait_list, void **event);

static enqueue_fn enqueue_kernel = NULL;

#define MAX_WAITS 64

static PyObject *bind(PyObject *self, PyObject *address) {
    void *entry = PyLong_AsVoidPtr(address);
    if (entry == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "bind: null clEnqueueNDRangeKernel address");
        return NULL;
    }
    enqueue_kernel = (enqueue_fn)entry;
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
    int32_t status;
    Py_BEGIN_ALLOW_THREADS
    status = enqueue_kernel(queue, kernel, 3, NULL, sizes, sizes + 3, waits,
                            waits ? wait_list : NULL, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(status);
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)bind, METH_O, "bind(address): the loader's clEnqueueNDRangeKernel"},
    {"enqueue", (PyCFunction)(void (*)(void))enqueue, METH_FASTCALL,
     "enqueue(queue, kernel, gx, gy, gz, lx, ly, lz, waits) -> cl_int"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_zyx_opencl_native", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__zyx_opencl_native(void) { return PyModule_Create(&module); }
