/* zyx-cuda's native calls, built at run time by zyx.native (see native.py).
 *
 * launch: cuLaunchKernel with plain ints, no conversion objects: the driver's entry point
 * is bound once (bind), the kernel arguments are already packed in a void** block.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int (*launch_kernel_fn)(void *function, unsigned gx, unsigned gy, unsigned gz,
                                unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                void *stream, void **params, void **extra);

static launch_kernel_fn launch_kernel = NULL;

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

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)bind, METH_O, "bind(address): the driver's cuLaunchKernel"},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) -> CUresult"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_zyx_cuda_native", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__zyx_cuda_native(void) { return PyModule_Create(&module); }
