/* zyx.allocator's cache hits in C: ``Allocator.allocate`` of a size the cache holds, and
 * ``Allocator.free`` of a buffer the cache takes back.
 *
 * allocator.py is the specification: these read and change the same dicts it does
 * (``_free``, ``_cached``, ``_limit``, ``_ours``), in the same way, and hand every other
 * case (a miss, a buffer shared or not the allocator's, a pool without a limit yet, a full
 * cache) to the Python method, which decides afresh. A cached plan's run makes two to four
 * such calls; in Python each cost as much as the launch.
 *
 * Nothing here locks, as nothing in the Python methods does: callers hold the allocator's
 * lock. The fast paths call no Python code (pools and sizes hash and compare by identity
 * and value), so no other thread runs in the middle of one.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *free_lists, *cached, *limits, *ours, *slow_allocate, *slow_free;
static PyObject *pool_name, *nbytes_name, *refcount_name;

/* The list of spare buffers of ``nbytes`` in ``pool`` (borrowed), or NULL (an error set
 * only where a lookup failed). */
static PyObject *spares(PyObject *pool, PyObject *nbytes) {
    PyObject *sizes = PyDict_GetItemWithError(free_lists, pool);
    if (sizes == NULL || !PyDict_Check(sizes))
        return NULL;
    PyObject *spare = PyDict_GetItemWithError(sizes, nbytes);
    return spare != NULL && PyList_CheckExact(spare) ? spare : NULL;
}

/* ``_cached[pool] += change`` where ``_cached`` has the pool: 0 done, 1 not (no change),
 * -1 failed. */
static int add_cached(PyObject *pool, PyObject *change, int subtract) {
    PyObject *before = PyDict_GetItemWithError(cached, pool);
    if (before == NULL)
        return PyErr_Occurred() ? -1 : 1;
    PyObject *after = subtract ? PyNumber_Subtract(before, change) : PyNumber_Add(before, change);
    if (after == NULL)
        return -1;
    int status = PyDict_SetItem(cached, pool, after);
    Py_DECREF(after);
    return status;
}

static PyObject *allocate(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "allocate(pool, nbytes)");
        return NULL;
    }
    PyObject *pool = args[0], *nbytes = args[1];
    PyObject *spare = PyLong_CheckExact(nbytes) ? spares(pool, nbytes) : NULL;
    if (spare == NULL && PyErr_Occurred())
        return NULL;
    Py_ssize_t count = spare == NULL ? 0 : PyList_GET_SIZE(spare);
    if (count == 0 || PyDict_GetItemWithError(cached, pool) == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_Vectorcall(slow_allocate, args, 2, NULL);
    }
    PyObject *buf = Py_NewRef(PyList_GET_ITEM(spare, count - 1));
    if (PyList_SetSlice(spare, count - 1, count, NULL) < 0 || add_cached(pool, nbytes, 1) < 0) {
        Py_DECREF(buf);
        return NULL;
    }
    return buf;
}

/* Whether the cache takes ``buf`` back as it is: 1 with ``*pool``, ``*nbytes`` and
 * ``*list`` set (new references, the list's borrowed), 0 where the Python method decides,
 * -1 failed. */
static int takes(PyObject *buf, PyObject **pool, PyObject **nbytes, PyObject **list) {
    *pool = *nbytes = *list = NULL;
    PyObject *refcount = PyObject_GetAttr(buf, refcount_name);
    if (refcount == NULL)
        return -1;
    int overflow = 0;
    int one = PyLong_CheckExact(refcount) && PyLong_AsLongAndOverflow(refcount, &overflow) == 1;
    Py_DECREF(refcount);
    if (!one)
        return 0;
    PyObject *key = PyLong_FromVoidPtr(buf);
    if (key == NULL)
        return -1;
    PyObject *ref = PyDict_GetItemWithError(ours, key);
    Py_DECREF(key);
    if (ref == NULL || !PyWeakref_CheckRef(ref) || PyWeakref_GetObject(ref) != buf)
        return PyErr_Occurred() ? -1 : 0;
    if ((*pool = PyObject_GetAttr(buf, pool_name)) == NULL ||
        (*nbytes = PyObject_GetAttr(buf, nbytes_name)) == NULL)
        return -1;
    PyObject *limit = PyDict_GetItemWithError(limits, *pool);
    PyObject *before = limit == NULL ? NULL : PyDict_GetItemWithError(cached, *pool);
    if (before == NULL || !PyLong_CheckExact(*nbytes))
        return PyErr_Occurred() ? -1 : 0;
    PyObject *after = PyNumber_Add(before, *nbytes);
    if (after == NULL)
        return -1;
    int fits = PyObject_RichCompareBool(after, limit, Py_LE);
    Py_DECREF(after);
    if (fits <= 0)
        return fits;
    *list = spares(*pool, *nbytes);
    return *list != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
}

static PyObject *free_buffer(PyObject *module, PyObject *buf) {
    PyObject *pool, *nbytes, *list;
    int taken = takes(buf, &pool, &nbytes, &list);
    if (taken == 1 && (PyList_Append(list, buf) < 0 || add_cached(pool, nbytes, 0) < 0))
        taken = -1;
    Py_XDECREF(pool);
    Py_XDECREF(nbytes);
    if (taken == 0)
        return PyObject_CallOneArg(slow_free, buf);
    return taken < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *state[6];
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO", &PyDict_Type, &state[0], &PyDict_Type, &state[1],
                          &PyDict_Type, &state[2], &PyDict_Type, &state[3], &state[4],
                          &state[5]))
        return NULL;
    PyObject **fields[6] = {&free_lists, &cached, &limits, &ours, &slow_allocate, &slow_free};
    for (int i = 0; i < 6; i++)
        Py_XSETREF(*fields[i], Py_NewRef(state[i]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(free, cached, limit, ours, allocate, free_buffer): an Allocator's dicts, and "
     "its Python methods for what the fast paths leave."},
    {"allocate", (PyCFunction)(void (*)(void))allocate, METH_FASTCALL,
     "allocate(pool, nbytes): Allocator.allocate."},
    {"free", free_buffer, METH_O, "free(buf): Allocator.free."},
    {NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_zyx_allocator", NULL, -1,
                                        methods};

PyMODINIT_FUNC PyInit__zyx_allocator(void) {
    pool_name = PyUnicode_InternFromString("pool");
    nbytes_name = PyUnicode_InternFromString("nbytes");
    refcount_name = PyUnicode_InternFromString("refcount");
    if (!pool_name || !nbytes_name || !refcount_name)
        return NULL;
    return PyModule_Create(&module_def);
}
