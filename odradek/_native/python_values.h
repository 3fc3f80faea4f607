/*
 * Python values as the C fast paths of odradek.storage read them (_segment_append.c,
 * _log_append.c): each step done, declined (the Python path must decide, nothing was changed)
 * or failed (a Python exception is set).
 */
#ifndef ODRADEK_PYTHON_VALUES_H
#define ODRADEK_PYTHON_VALUES_H

#include <Python.h>
#include <stdint.h>

enum { DONE = 0, DECLINE = 1, FAILED = -1 };

/* A Python int as int64: DONE, DECLINE when it is no int or does not fit, FAILED with an
 * exception set. */
static inline int to_int64(PyObject *number, int64_t *value)
{
    if (!PyLong_Check(number))
        return DECLINE;
    int overflow;
    long long result = PyLong_AsLongLongAndOverflow(number, &overflow);
    if (result == -1 && PyErr_Occurred())
        return FAILED;
    if (overflow)
        return DECLINE;
    *value = (int64_t)result;
    return DONE;
}

/* getattr(owner, name) as int64, as to_int64 (None: DECLINE). */
static inline int get_int64(PyObject *owner, PyObject *name, int64_t *value)
{
    PyObject *attribute = PyObject_GetAttr(owner, name);
    if (attribute == NULL)
        return FAILED;
    int status = to_int64(attribute, value);
    Py_DECREF(attribute);
    return status;
}

/* Intern each name of a NULL-terminated table {slot, "name"}: 0, or -1 with an exception. */
typedef struct {
    PyObject **slot;
    const char *name;
} InternedName;

static inline int intern_names(const InternedName *table)
{
    for (; table->slot != NULL; table++)
        if ((*table->slot = PyUnicode_InternFromString(table->name)) == NULL)
            return -1;
    return 0;
}

#endif
