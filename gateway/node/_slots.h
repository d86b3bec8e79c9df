/* Where a class keeps some of its __slots__, so C code can fill a new instance as its
 * __init__ would without calling it (_feed.c's CommittedEntry, _judge.c's refresh key
 * values). Included by one C file each; no state. */
#ifndef GATEWAY_NODE_SLOTS_H
#define GATEWAY_NODE_SLOTS_H

#include <Python.h>
#include <structmember.h>

/* 1 and the offsets into an instance of cls of its slots names[0..n-1] in off[], or 0 when
 * cls is not a class or one of them is not a plain object slot (the caller then calls cls). */
static int slot_offsets_of(PyObject *cls, const char *const *names, int n, Py_ssize_t *off) {
    if (!PyType_Check(cls)) return 0;
    for (int i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttrString(cls, names[i]);
        if (!d) {
            PyErr_Clear();
            return 0;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (ok) off[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) return 0;
    }
    return 1;
}

#endif
