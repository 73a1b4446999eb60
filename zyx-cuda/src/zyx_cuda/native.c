/* zyx-cuda's native calls, built at run time by zyx.native (see native.py).
 *
 * launch: cuLaunchKernel with plain ints, no conversion objects: the driver's entry point
 * is bound once (bind), the kernel arguments are already packed in a void** block.
 * copy: a chunk into pinned staging memory with streaming stores, which write around
 * the cache instead of reading each destination line first.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
    if (launch_kernel == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "launch before bind");
        return NULL;
    }
    void *function = PyLong_AsVoidPtr(args[0]);
    for (int i = 0; i < 7; i++) {
        unsigned long value = PyLong_AsUnsignedLong(args[1 + i]);
        if (value > UINT32_MAX && !PyErr_Occurred())
            PyErr_SetString(PyExc_OverflowError, "launch: dimension above 2**32 - 1");
        dims[i] = (unsigned)value;
    }
    void *stream = PyLong_AsVoidPtr(args[8]);
    void **params = (void **)PyLong_AsVoidPtr(args[9]);
    if (PyErr_Occurred())
        return NULL;
    int result;
    Py_BEGIN_ALLOW_THREADS
    result = launch_kernel(function, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
                           dims[6], stream, params, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(result);
}

static void stream_copy(char *dst, const char *src, size_t n) {
#if defined(__SSE2__)
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src);
        __m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    _mm_sfence();
#endif
    memcpy(dst, src, n);
}

/* copy(dst, src, nbytes): host addresses, GIL released */
static PyObject *copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "copy takes 3 arguments, got %zd", nargs);
        return NULL;
    }
    char *dst = (char *)PyLong_AsVoidPtr(args[0]);
    const char *src = (const char *)PyLong_AsVoidPtr(args[1]);
    size_t n = PyLong_AsSize_t(args[2]);
    if (PyErr_Occurred())
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    stream_copy(dst, src, n);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)bind, METH_O, "bind(address): the driver's cuLaunchKernel"},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(function, gx, gy, gz, bx, by, bz, shared, stream, params) -> CUresult"},
    {"copy", (PyCFunction)(void (*)(void))copy, METH_FASTCALL,
     "copy(dst, src, nbytes): streaming-store copy between host addresses"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_zyx_cuda_native", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__zyx_cuda_native(void) { return PyModule_Create(&module); }
