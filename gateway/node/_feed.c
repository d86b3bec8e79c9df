/* Optional C accelerator for the appliers' read of the committed log (gateway.node.appliers.feed;
 * split out of _wire.c so each C file mirrors one Python module).
 *
 * feed_entries(keys, unit_tag, ents, skipped, entry_cls): the appliers' CommittedEntry
 * objects of a read of the committed log, whole transactions with their admission header
 * (_txnhead.h, as gateway.node.state.wire.txn_head) and their bytes
 * (gateway.node.appliers.feed.CommittedLogSource._entry is the specification).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "../core/_protowire.h"
#include "_slots.h"
#include "_txnhead.h"

/* Attribute names, interned at module init. */
static PyObject *s_type, *s_index, *s_data;

/* Where entry_cls keeps its __slots__ "index", "_transaction", "replicated", "wire", "head"
 * (offsets into an instance), so feed_entries fills new instances as __init__ would without
 * calling it (~0.25 us less per entry than a call into the class); 0 when entry_cls is not
 * such a class (then it is called). */
static int slot_offsets(PyObject *cls, Py_ssize_t off[5]) {
    static const char *const names[5] = {"index", "_transaction", "replicated", "wire", "head"};
    return slot_offsets_of(cls, names, 5, off);
}

/* entry_cls(a[0], ..., a[n-1]) with the remaining slots as __init__'s defaults (None, (),
 * None, None): filled in place when offsets are known (off != NULL), else called. */
static PyObject *new_entry(PyObject *cls, const Py_ssize_t *off, PyObject *const *a,
                           Py_ssize_t n, PyObject *empty) {
    if (!off) return PyObject_Vectorcall(cls, a, n, NULL);
    PyTypeObject *t = (PyTypeObject *)cls;
    PyObject *obj = t->tp_alloc(t, 0);
    if (!obj) return NULL;
    PyObject *v[5] = {a[0], a[1], n > 2 ? a[2] : empty, n > 3 ? a[3] : Py_None,
                      n > 4 ? a[4] : Py_None};
    for (int i = 0; i < 5; i++) *(PyObject **)((char *)obj + off[i]) = Py_NewRef(v[i]);
    return obj;
}

/* feed_entries(keys, unit_tag, ents, skipped, entry_cls) -> (out, todo): the appliers'
 * entries of the committed log entries ents (gateway.node.appliers.feed.CommittedLogSource._entry, the
 * specification), out[i] for ents[i]: entry_cls(index, None, (), wire, head) for a
 * transaction entry whole in one segment whose index is not in the set skipped (wire: the
 * payload after its type tag, head: as txn_head), entry_cls(index, None) for an entry holding
 * no transaction for the appliers (not NORMAL, empty, skipped, another type tag); None, with
 * i in todo, for the caller to build (a replicated epoch: type tag unit_tag; a transaction
 * that is not whole in one segment or not read this way; data that is not bytes). */
static PyObject *feed_entries(PyObject *self, PyObject *args) {
    const unsigned char *k;
    Py_ssize_t klen;
    int unit_tag;
    PyObject *ents, *skipped, *cls;
    if (!PyArg_ParseTuple(args, "y#iO!OO", &k, &klen, &unit_tag, &PyList_Type, &ents,
                          &skipped, &cls))
        return NULL;
    if (klen != 12) {
        PyErr_SetString(PyExc_ValueError, "feed_entries: expected a type tag and 11 field keys");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(ents);
    Py_ssize_t offsets[5];
    const Py_ssize_t *off = slot_offsets(cls, offsets) ? offsets : NULL;
    PyObject *out = PyList_New(n), *todo = PyList_New(0), *empty = PyTuple_New(0);
    PyObject *result = NULL;
    if (!out || !todo || !empty) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* e owned while its attributes are read: a property is Python code, which may change
         * the list (its length is checked again before every entry for the same reason) */
        if (PyList_GET_SIZE(ents) != n) {
            PyErr_SetString(PyExc_ValueError, "feed_entries: ents changed length during the call");
            goto done;
        }
        PyObject *e = Py_NewRef(PyList_GET_ITEM(ents, i));
        PyObject *index = PyObject_GetAttr(e, s_index);
        if (!index) { Py_DECREF(e); goto done; }
        PyObject *made = NULL;
        PyObject *type = PyObject_GetAttr(e, s_type);
        PyObject *data = type ? PyObject_GetAttr(e, s_data) : NULL;
        Py_DECREF(e);
        long t = data ? PyLong_AsLong(type) : -1;
        if (!data || (t == -1 && PyErr_Occurred())) {
            Py_XDECREF(type);
            Py_XDECREF(data);
            Py_DECREF(index);
            goto done;
        }
        Py_DECREF(type);
        int bytes = PyBytes_Check(data);  /* anything else: the caller's */
        const unsigned char *d = bytes ? (const unsigned char *)PyBytes_AS_STRING(data) : NULL;
        Py_ssize_t len = bytes ? PyBytes_GET_SIZE(data) : 0;
        int bare = bytes;
        if (bytes && t == 0 && len > 0) {
            if (d[0] == (unsigned char)unit_tag) {
                bare = 0;  /* the caller's */
            } else if (d[0] == k[0]) {
                int in = PySet_Check(skipped) || PyFrozenSet_Check(skipped)
                             ? PySet_Contains(skipped, index)
                             : PySequence_Contains(skipped, index);
                if (in < 0) {
                    Py_DECREF(data);
                    Py_DECREF(index);
                    goto done;
                }
                if (!in) {
                    uint64_t h[3];
                    int got = head_of(k, d, len, h);
                    if (got < 0) {
                        Py_DECREF(data);
                        Py_DECREF(index);
                        goto done;
                    }
                    bare = 0;
                    if (got) {
                        PyObject *a[5] = {index, Py_None, empty,
                                          PyBytes_FromStringAndSize((const char *)d + 1,
                                                                    len - 1),
                                          NULL};
                        if (a[3]) a[4] = head_tuple(h);
                        if (a[3] && a[4]) made = new_entry(cls, off, a, 5, empty);
                        Py_XDECREF(a[3]);
                        Py_XDECREF(a[4]);
                        if (!made) {
                            Py_DECREF(data);
                            Py_DECREF(index);
                            goto done;
                        }
                    }
                }
            }
        }
        Py_DECREF(data);
        if (bare) {
            PyObject *a[2] = {index, Py_None};
            made = new_entry(cls, off, a, 2, empty);
            if (!made) {
                Py_DECREF(index);
                goto done;
            }
        }
        Py_DECREF(index);
        if (made) {
            PyList_SET_ITEM(out, i, made);
        } else {
            PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
            PyObject *pos = PyLong_FromSsize_t(i);
            if (!pos || PyList_Append(todo, pos) < 0) {
                Py_XDECREF(pos);
                goto done;
            }
            Py_DECREF(pos);
        }
    }
    result = PyTuple_Pack(2, out, todo);
done:
    Py_XDECREF(out);
    Py_XDECREF(todo);
    Py_XDECREF(empty);
    return result;
}

static PyMethodDef methods[] = {
    {"feed_entries", feed_entries, METH_VARARGS,
     "feed_entries(keys, unit_tag, ents, skipped, entry_cls) -> (out, todo): the appliers' "
     "entries of committed log entries (gateway.node.appliers.feed)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_feed", "C accelerator for the appliers' read of the committed log.",
    -1, methods,
};

PyMODINIT_FUNC PyInit__feed(void) {
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_type, "type"}, {&s_index, "index"}, {&s_data, "data"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (!*names[i].slot) return NULL;
    }
    return PyModule_Create(&module);
}
