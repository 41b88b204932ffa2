/* rpcbench._exact: same(a, b), the size pass's exact check in one walk of C.
 *
 * A decoded call is "back exactly" when its fast-mode pickle (protocol 5, no memo) equals the pickle of the
 * call sent (rpcbench/fidelity.py, identical): same values of the same types, 1, 1.0 and True apart, bytes and
 * bytearray apart, floats by their bits, dict items in the same order. Pickling both sides costs about as much
 * as msgpack's own encode and decode of a call; this walks both values once, comparing as the two pickles
 * would, with no bytes written.
 *
 * same(a, b) is True or False exactly when the pickles would be equal or not, for values made of None, bool,
 * int, float, str, bytes, bytearray, tuple, list and dict (exact types: a subclass pickles with its class's
 * name). Where it meets two values of one other type (a set, a subclass, any object), it returns None: the
 * caller compares the pickles. Two exact types that differ, one of them listed, are False: a listed type's
 * pickle opcodes are its own. Built from setup.py when a C compiler is there; without it rpcbench compares the
 * pickles themselves, with the same answers (tests/test_exact.py holds the two together).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define SAME 1
#define DIFFERENT 0
#define FAILED -1  /* an exception is set (nested deeper than the recursion limit) */
#define UNKNOWN -2 /* a type this does not know: compare the pickles */

static int same(PyObject *a, PyObject *b);

static int
known(PyTypeObject *t)
{
    return t == &PyLong_Type || t == &PyUnicode_Type || t == &PyFloat_Type || t == &PyBool_Type
           || t == Py_TYPE(Py_None) || t == &PyBytes_Type || t == &PyByteArray_Type || t == &PyTuple_Type
           || t == &PyList_Type || t == &PyDict_Type;
}

static int
same_items(PyObject **x, PyObject **y, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = same(x[i], y[i]);
        if (r != SAME) {
            return r;
        }
    }
    return SAME;
}

static int
same_dicts(PyObject *a, PyObject *b)
{
    /* pickle writes an exact dict's items in PyDict_Next order: compared pair by pair in that order */
    Py_ssize_t i = 0, j = 0;
    PyObject *ka, *va, *kb, *vb;
    if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) {
        return DIFFERENT;
    }
    while (PyDict_Next(a, &i, &ka, &va) && PyDict_Next(b, &j, &kb, &vb)) {
        int r = same(ka, kb);
        if (r == SAME) {
            r = same(va, vb);
        }
        if (r != SAME) {
            return r;
        }
    }
    return SAME;
}

static int
same_containers(PyTypeObject *t, PyObject *a, PyObject *b)
{
    if (t == &PyTuple_Type) {
        Py_ssize_t n = PyTuple_GET_SIZE(a);
        return n != PyTuple_GET_SIZE(b) ? DIFFERENT
                                        : same_items(&PyTuple_GET_ITEM(a, 0), &PyTuple_GET_ITEM(b, 0), n);
    }
    if (t == &PyList_Type) {
        /* no Python code runs during the walk, so neither list can change under it */
        Py_ssize_t n = PyList_GET_SIZE(a);
        return n != PyList_GET_SIZE(b) ? DIFFERENT : same_items(PySequence_Fast_ITEMS(a), PySequence_Fast_ITEMS(b), n);
    }
    if (t == &PyDict_Type) {
        return same_dicts(a, b);
    }
    return UNKNOWN;
}

static int
same(PyObject *a, PyObject *b)
{
    PyTypeObject *t = Py_TYPE(a);
    if (t != Py_TYPE(b)) {
        return known(t) || known(Py_TYPE(b)) ? DIFFERENT : UNKNOWN;
    }
    if (t == &PyUnicode_Type || t == &PyLong_Type || t == &PyBytes_Type) {
        return PyObject_RichCompareBool(a, b, Py_EQ);  /* exact types: equal content, equal pickle */
    }
    if (t == &PyFloat_Type) {
        double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
        return memcmp(&x, &y, sizeof x) == 0;  /* pickle writes the bits: -0.0 is not 0.0, a NaN is its bits */
    }
    if (t == &PyBool_Type || a == Py_None) {
        return a == b;
    }
    if (t == &PyByteArray_Type) {
        Py_ssize_t n = PyByteArray_GET_SIZE(a);
        return n == PyByteArray_GET_SIZE(b) && memcmp(PyByteArray_AS_STRING(a), PyByteArray_AS_STRING(b), n) == 0;
    }
    if (Py_EnterRecursiveCall(" in rpcbench._exact.same")) {
        return FAILED;
    }
    int r = same_containers(t, a, b);
    Py_LeaveRecursiveCall();
    return r;
}

static PyObject *
exact_same(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "same() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    switch (same(args[0], args[1])) {
    case SAME:
        Py_RETURN_TRUE;
    case DIFFERENT:
        Py_RETURN_FALSE;
    case UNKNOWN:
        Py_RETURN_NONE;
    default:
        return NULL;
    }
}

static PyMethodDef exact_methods[] = {
    {"same", (PyCFunction)(void (*)(void))exact_same, METH_FASTCALL,
     "same(a, b) -> True, False or None\n\nWould a and b give equal fast-mode pickles? None: a type this does not "
     "know is in them (compare the pickles)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef exact_module = {
    PyModuleDef_HEAD_INIT, "rpcbench._exact",
    "The size pass's exact check in C: same(a, b) as equal fast-mode pickles would say.", -1, exact_methods,
};

PyMODINIT_FUNC
PyInit__exact(void)
{
    return PyModule_Create(&exact_module);
}
