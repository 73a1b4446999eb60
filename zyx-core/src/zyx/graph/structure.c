/* zyx.graph.structure's walk in C: the plan cache's key of a graph, and its leaves.
 *
 * ``structure`` in structure.py is the specification: this is the same walk, entry for
 * entry, read in the same order, so the key is equal (and hashes equal) and the leaves are
 * the same list. It runs on every realize; in Python its dict of positions, its stack and
 * its attribute reads were a quarter of a cached realize's host time (C: a seventh of that).
 *
 * A ``Node``'s fields are read through its __slots__ (the offsets found once, by
 * ``configure``); positions are kept in a table keyed by address, which holds a reference
 * to each node it has seen, and the stack holds one to each node on it: the one Python
 * call of the walk, a custom op's ``key``, may drop the graph's own references.
 *
 * Where anything is unusual (an object that is not exactly a ``Node``, a field unset,
 * sources that are not a tuple, targets that are neither a list nor a tuple, a source
 * without a position, a cycle), the call goes to the Python ``structure`` whole, which
 * decides afresh. An exception that ``key`` raises, or a failed allocation, propagates as
 * it would from the Python walk. Nothing here locks: the runtime calls it under its lock,
 * and each call's state is its own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define SLOT(object, at) (*(PyObject **)((char *)(object) + (at)))
#define INLINE 32 /* entries of each array kept on the C stack: most graphs fit */

enum { OK = 0, FALLBACK = 1, FAILED = -1 };
enum { WALKING = -1, ABSENT = -2 }; /* positions: sources not all done yet; never seen */

static PyTypeObject *node_type;
static Py_ssize_t op_at, arg_at, srcs_at, dtype_at, shape_at, device_at, buffer_at;
static PyObject *scalar_op, *custom_op, *fallback, *key_name;

typedef struct {
    PyObject *node;
    int emit; /* its sources have their entries: make its own */
} Entry;

typedef struct {
    PyObject *node;
    Py_ssize_t position;
} Seen;

typedef struct {
    Entry *stack;
    Py_ssize_t stacked, stack_room;
    Seen *seen;
    size_t mask; /* the table's size, less one: a power of two */
    Py_ssize_t used;
    PyObject **key;
    Py_ssize_t keyed, key_room;
    PyObject *leaves;
    Py_ssize_t count;
    Entry stack_inline[INLINE];
    Seen seen_inline[2 * INLINE];
    PyObject *key_inline[INLINE];
} Walk;

/* Double the array ``*items`` of ``*room`` entries of ``size`` bytes (``inline_items``
 * until it first grows); -1 with an exception. */
static int grow(void **items, Py_ssize_t *room, size_t size, void *inline_items) {
    Py_ssize_t more = *room * 2;
    if ((size_t)more > PY_SSIZE_T_MAX / size) {
        PyErr_NoMemory();
        return -1;
    }
    void *grown = *items == inline_items ? PyMem_Malloc(more * size)
                                         : PyMem_Realloc(*items, more * size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (*items == inline_items)
        memcpy(grown, inline_items, *room * size);
    *items = grown;
    *room = more;
    return 0;
}

static int push(Walk *w, PyObject *node, int emit) {
    if (w->stacked == w->stack_room &&
        grow((void **)&w->stack, &w->stack_room, sizeof(Entry), w->stack_inline) < 0)
        return FAILED;
    Py_INCREF(node);
    w->stack[w->stacked++] = (Entry){node, emit};
    return OK;
}

/* Append ``item`` (a new reference, which the key takes; NULL: failed) to the key. */
static int add(Walk *w, PyObject *item) {
    if (item == NULL)
        return FAILED;
    if (w->keyed == w->key_room &&
        grow((void **)&w->key, &w->key_room, sizeof(PyObject *), w->key_inline) < 0) {
        Py_DECREF(item);
        return FAILED;
    }
    w->key[w->keyed++] = item;
    return OK;
}

static size_t place(const Walk *w, PyObject *node) {
    size_t h = (size_t)((uintptr_t)node >> 4) * (size_t)0x9E3779B97F4A7C15ull;
    size_t i = (h ^ (h >> 29)) & w->mask;
    while (w->seen[i].node != NULL && w->seen[i].node != node)
        i = (i + 1) & w->mask;
    return i;
}

static Py_ssize_t position(const Walk *w, PyObject *node) {
    const Seen *seen = &w->seen[place(w, node)];
    return seen->node == NULL ? ABSENT : seen->position;
}

/* Rehash into a table twice the size; -1 with an exception. */
static int rehash(Walk *w) {
    size_t size = (w->mask + 1) * 2;
    Seen *old = w->seen, *grown = PyMem_Calloc(size, sizeof(Seen));
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t old_size = w->mask + 1;
    w->seen = grown;
    w->mask = size - 1;
    for (size_t i = 0; i < old_size; i++)
        if (old[i].node != NULL)
            w->seen[place(w, old[i].node)] = old[i];
    if (old != w->seen_inline)
        PyMem_Free(old);
    return 0;
}

/* Set ``node``'s position, holding a reference to it where it is new. */
static int set_position(Walk *w, PyObject *node, Py_ssize_t at) {
    if ((size_t)(w->used + 1) * 2 > w->mask + 1 && rehash(w) < 0)
        return FAILED;
    Seen *seen = &w->seen[place(w, node)];
    if (seen->node == NULL) {
        Py_INCREF(node);
        seen->node = node;
        w->used++;
    }
    seen->position = at;
    return OK;
}

/* A new reference to ``object`` (NULL: none), for the key. */
static int add_ref(Walk *w, PyObject *object) {
    Py_INCREF(object);
    return add(w, object);
}

/* The entry of a leaf: ``is a scalar, dtype, shape, id(device)``. */
static int leaf(Walk *w, PyObject *node, PyObject *is_scalar) {
    PyObject *dtype = SLOT(node, dtype_at), *shape = SLOT(node, shape_at);
    PyObject *device = SLOT(node, device_at);
    if (dtype == NULL || shape == NULL || device == NULL)
        return FALLBACK;
    if (set_position(w, node, w->count++) < 0 || PyList_Append(w->leaves, node) < 0 ||
        add_ref(w, is_scalar) < 0 || add_ref(w, dtype) < 0 || add_ref(w, shape) < 0 ||
        add(w, PyLong_FromVoidPtr(device)) < 0)
        return FAILED;
    return OK;
}

/* A node seen on the stack: skipped where it has its position, a leaf, or pushed again
 * above its sources to make its entry once they have theirs. */
static int visit(Walk *w, PyObject *node) {
    if (!Py_IS_TYPE(node, node_type))
        return FALLBACK;
    Py_ssize_t at = position(w, node);
    if (at != ABSENT)
        return at == WALKING ? FALLBACK : OK; /* a cycle: the Python walk's to meet */
    PyObject *buffer = SLOT(node, buffer_at), *op = SLOT(node, op_at);
    PyObject *srcs = SLOT(node, srcs_at);
    if (buffer == NULL || op == NULL)
        return FALLBACK;
    if (buffer != Py_None || op == scalar_op)
        return leaf(w, node, op == scalar_op ? Py_True : Py_False);
    if (srcs == NULL || !PyTuple_CheckExact(srcs))
        return FALLBACK;
    if (set_position(w, node, WALKING) < 0 || push(w, node, 1) < 0)
        return FAILED;
    for (Py_ssize_t i = PyTuple_GET_SIZE(srcs) - 1; i >= 0; i--)
        if (push(w, PyTuple_GET_ITEM(srcs, i), 0) < 0)
            return FAILED;
    return OK;
}

/* The rest of an op's entry, after its op and arg: ``dtype, shape, id(device), number of
 * sources, their positions``. */
static int op_entry(Walk *w, PyObject *node, PyObject *srcs) {
    PyObject *dtype = SLOT(node, dtype_at), *shape = SLOT(node, shape_at);
    PyObject *device = SLOT(node, device_at);
    if (dtype == NULL || shape == NULL || device == NULL || !PyTuple_CheckExact(srcs))
        return FALLBACK;
    Py_ssize_t n = PyTuple_GET_SIZE(srcs);
    if (add_ref(w, dtype) < 0 || add_ref(w, shape) < 0 ||
        add(w, PyLong_FromVoidPtr(device)) < 0 || add(w, PyLong_FromSsize_t(n)) < 0)
        return FAILED;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at = position(w, PyTuple_GET_ITEM(srcs, i));
        if (at < 0)
            return FALLBACK;
        if (add(w, PyLong_FromSsize_t(at)) < 0)
            return FAILED;
    }
    return OK;
}

/* The entry of an op whose sources have theirs. Its op, arg and sources are read before
 * a custom op's ``key`` runs, and held through it, as the Python walk's locals are. */
static int emit(Walk *w, PyObject *node) {
    PyObject *op = SLOT(node, op_at), *arg = SLOT(node, arg_at), *srcs = SLOT(node, srcs_at);
    if (op == NULL || arg == NULL || srcs == NULL)
        return FALLBACK;
    if (add_ref(w, op) < 0) /* the key holds op from here on */
        return FAILED;
    Py_INCREF(arg);
    Py_INCREF(srcs);
    PyObject *item = op == custom_op ? PyObject_GetAttr(arg, key_name) : Py_NewRef(arg);
    int status = add(w, item);
    if (status == OK)
        status = set_position(w, node, w->count++);
    if (status == OK)
        status = op_entry(w, node, srcs);
    Py_DECREF(arg);
    Py_DECREF(srcs);
    return status;
}

static int walk(Walk *w, PyObject *targets) {
    if (!PyList_CheckExact(targets) && !PyTuple_CheckExact(targets))
        return FALLBACK;
    for (Py_ssize_t i = PySequence_Fast_GET_SIZE(targets) - 1; i >= 0; i--)
        if (push(w, PySequence_Fast_GET_ITEM(targets, i), 0) < 0)
            return FAILED;
    while (w->stacked) {
        Entry top = w->stack[--w->stacked];
        int status = top.emit ? emit(w, top.node) : visit(w, top.node);
        Py_DECREF(top.node);
        if (status != OK)
            return status;
    }
    return OK;
}

/* ``(key, leaves)``: the entries and the targets' positions, as one tuple. */
static int finish(Walk *w, PyObject *targets, PyObject **result) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(targets); /* a list: read again, as Python does */
    PyObject *positions = PyTuple_New(n);
    if (positions == NULL)
        return FAILED;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at = position(w, PySequence_Fast_GET_ITEM(targets, i));
        PyObject *number = at < 0 ? NULL : PyLong_FromSsize_t(at);
        if (number == NULL) {
            Py_DECREF(positions);
            return at < 0 ? FALLBACK : FAILED;
        }
        PyTuple_SET_ITEM(positions, i, number);
    }
    if (add(w, positions) < 0)
        return FAILED;
    PyObject *key = PyTuple_New(w->keyed);
    if (key == NULL)
        return FAILED;
    for (Py_ssize_t i = 0; i < w->keyed; i++)
        PyTuple_SET_ITEM(key, i, w->key[i]);
    w->keyed = 0;
    *result = PyTuple_Pack(2, key, w->leaves);
    Py_DECREF(key);
    return *result == NULL ? FAILED : OK;
}

static void release(Walk *w) {
    while (w->stacked)
        Py_DECREF(w->stack[--w->stacked].node);
    for (size_t i = 0; i <= w->mask; i++)
        Py_XDECREF(w->seen[i].node);
    while (w->keyed)
        Py_DECREF(w->key[--w->keyed]);
    Py_XDECREF(w->leaves);
    if (w->stack != w->stack_inline)
        PyMem_Free(w->stack);
    if (w->seen != w->seen_inline)
        PyMem_Free(w->seen);
    if (w->key != w->key_inline)
        PyMem_Free(w->key);
}

static PyObject *structure(PyObject *Py_UNUSED(module), PyObject *targets) {
    if (fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "structure: configure() first");
        return NULL;
    }
    Walk w;
    w.stack = w.stack_inline;
    w.stacked = 0;
    w.stack_room = INLINE;
    w.seen = w.seen_inline;
    w.mask = 2 * INLINE - 1;
    w.used = 0;
    memset(w.seen_inline, 0, sizeof(w.seen_inline));
    w.key = w.key_inline;
    w.keyed = 0;
    w.key_room = INLINE;
    w.count = 0;
    PyObject *result = NULL;
    w.leaves = PyList_New(0);
    int status = w.leaves == NULL ? FAILED : walk(&w, targets);
    if (status == OK)
        status = finish(&w, targets, &result);
    release(&w);
    if (status == FALLBACK)
        return PyObject_CallOneArg(fallback, targets);
    return result;
}

static PyObject *configure(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "configure(Node, Op.SCALAR, Op.CUSTOM, structure)");
        return NULL;
    }
    if (fallback != NULL) { /* a call in flight keeps reading these: they never change */
        if ((PyObject *)node_type == args[0] && scalar_op == args[1] && custom_op == args[2] &&
            fallback == args[3])
            Py_RETURN_NONE;
        PyErr_SetString(PyExc_RuntimeError, "structure: configured already, otherwise");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    if (zyx_slot_offset(type, "op", &op_at) || zyx_slot_offset(type, "arg", &arg_at) ||
        zyx_slot_offset(type, "srcs", &srcs_at) || zyx_slot_offset(type, "dtype", &dtype_at) ||
        zyx_slot_offset(type, "shape", &shape_at) || zyx_slot_offset(type, "device", &device_at) ||
        zyx_slot_offset(type, "buffer", &buffer_at))
        return NULL;
    if ((key_name = PyUnicode_InternFromString("key")) == NULL)
        return NULL;
    node_type = (PyTypeObject *)Py_NewRef(args[0]);
    scalar_op = Py_NewRef(args[1]);
    custom_op = Py_NewRef(args[2]);
    fallback = Py_NewRef(args[3]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(Node, Op.SCALAR, Op.CUSTOM, structure): the node type whose slots are read, "
     "the ops the walk tells apart, and the Python walk unusual graphs go to; once"},
    {"structure", structure, METH_O,
     "structure(targets) -> (key, leaves), as zyx.graph.structure.structure"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_zyx_structure", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit__zyx_structure(void) { return PyModule_Create(&module); }
