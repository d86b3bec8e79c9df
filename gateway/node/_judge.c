/* Optional C accelerator for judging a replicated epoch under the row epoch functions
 * (gateway.node.state.epoch_judge; NDB$EPOCH and NDB$EPOCH2, on any role but NONE).
 *
 * The specification is Python: gateway.conflict.functions._epoch (the verdict of one change
 * against the row as stored) and gateway.conflict.resolve.judge_epoch (the epoch's overlay of
 * accepted changes, and the DATA_IN_CONFLICT of a change made on top of a rejected one);
 * tests/node/test_epoch_judge_accelerator.py checks both give the same verdicts.
 *
 * epoch_verdicts(keys, codes, origins, ends, mre, source, primary, local_epoch, overlay,
 *                lookup, cell) -> (verdicts: bytes, delete_deletes: int, first: int)
 *
 *   keys[i]      the store row key of ruled row change i (bytes), in the epoch's order;
 *   codes[i]     its operation (1 insert, 2 update, 3 delete) | 4 when its function is
 *                NDB$EPOCH2 (else NDB$EPOCH);
 *   origins[i]   the origin cluster of its transaction (int);
 *   ends         the row index each transaction ends at (ascending; the last is len(keys));
 *   mre          {peer: max replicated epoch} of this cluster;
 *   source       the cluster the epoch comes from (0: unknown);
 *   primary      this cluster's role is PRIMARY (else SECONDARY or PASS);
 *   overlay      {key: ...} rows written by earlier entries of the same apply batch: for a
 *                key in it the row is lookup(key) -> (exists, epoch, author);
 *   cell         cell(key) -> the store's cell bytes for key, or None (the LSM cell format:
 *                flags byte, then with FLAG_META little-endian epoch u64, author u32, ...).
 *
 * verdicts[i]: bit 0 apply, bits 1-3 cause (0 none, 1 ROW_DOES_NOT_EXIST, 2
 * ROW_ALREADY_EXISTS, 3 DATA_IN_CONFLICT), bit 4 refresh, bit 5 applied as an update (an
 * insert over an existing row), bit 6 delete-delete, bit 7 the row existed when judged;
 * delete_deletes: how many delete-deletes were met (a later DATA_IN_CONFLICT of the same
 * change clears its bit 6, not this count), the first of them at row first (-1: none).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FLAG_TOMBSTONE 0x01
#define FLAG_META 0x02

enum { OP_WRITE = 1, OP_UPDATE = 2, OP_DELETE = 3 };
enum { CAUSE_NONE = 0, CAUSE_RDNE = 1, CAUSE_RAE = 2, CAUSE_DIC = 3 };
enum { V_APPLY = 1, V_REFRESH = 16, V_AS_UPDATE = 32, V_DD = 64, V_EXISTS = 128 };

typedef struct {
    int exists;
    uint64_t epoch;
    uint64_t author;
} Row;

static int as_u64(PyObject *o, uint64_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* The row as stored before the epoch (overlay of the batch, else the store's cell). */
static int stored_row(PyObject *key, PyObject *overlay, PyObject *lookup, PyObject *cell,
                      Row *r) {
    int in = PyDict_Contains(overlay, key);
    if (in < 0) return -1;
    if (in) {
        PyObject *t = PyObject_CallOneArg(lookup, key);
        if (!t) return -1;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
            Py_DECREF(t);
            PyErr_SetString(PyExc_TypeError, "lookup must return (exists, epoch, author)");
            return -1;
        }
        int ex = PyObject_IsTrue(PyTuple_GET_ITEM(t, 0));
        int bad = ex < 0 || as_u64(PyTuple_GET_ITEM(t, 1), &r->epoch) < 0 ||
                  as_u64(PyTuple_GET_ITEM(t, 2), &r->author) < 0;
        Py_DECREF(t);
        if (bad) return -1;
        r->exists = ex;
        return 0;
    }
    PyObject *c = PyObject_CallOneArg(cell, key);
    if (!c) return -1;
    if (c == Py_None) {
        Py_DECREF(c);
        r->exists = 0;
        r->epoch = r->author = 0;
        return 0;
    }
    char *d;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(c, &d, &n) < 0 || n < 1) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "empty store cell");
        Py_DECREF(c);
        return -1;
    }
    unsigned char flags = (unsigned char)d[0];
    r->exists = !(flags & FLAG_TOMBSTONE);
    r->epoch = r->author = 0;
    if (flags & FLAG_META) {
        if (n < 21) {
            Py_DECREF(c);
            PyErr_SetString(PyExc_ValueError, "store cell shorter than its metadata");
            return -1;
        }
        uint64_t ep = 0;
        uint32_t au = 0;
        memcpy(&ep, d + 1, 8); /* little-endian: the build targets are */
        memcpy(&au, d + 9, 4);
        r->epoch = ep;
        r->author = au;
    }
    Py_DECREF(c);
    return 0;
}

/* mre.get(origin, 0) */
static int mre_of(PyObject *mre, PyObject *origin, uint64_t *out) {
    PyObject *v = PyDict_GetItemWithError(mre, origin);
    if (!v) {
        if (PyErr_Occurred()) return -1;
        *out = 0;
        return 0;
    }
    return as_u64(v, out);
}

/* gateway.conflict.functions._epoch's check for one change. */
static int verdict(int op, int epoch2, uint64_t origin, PyObject *origin_obj, const Row *st,
                   int primary, PyObject *mre) {
    int ex = st->exists ? V_EXISTS : 0;
    if (!primary) {
        if (op == OP_WRITE) return V_APPLY | (st->exists ? V_AS_UPDATE : 0) | ex;
        return (st->exists ? V_APPLY : 0) | ex;
    }
    if (op == OP_DELETE && !st->exists)
        return epoch2 ? V_DD | ex : (CAUSE_RDNE << 1) | V_REFRESH | V_DD | ex;
    if (op == OP_UPDATE && !st->exists) return (CAUSE_RDNE << 1) | V_REFRESH | ex;
    if (st->epoch || st->author) {
        uint64_t m;
        if (mre_of(mre, origin_obj, &m) < 0) return -1;
        if (st->author != origin && st->epoch > m) return (CAUSE_DIC << 1) | V_REFRESH | ex;
    }
    if (op == OP_WRITE && st->exists) return (CAUSE_RAE << 1) | V_REFRESH | ex;
    return V_APPLY | ex;
}

static PyObject *epoch_verdicts(PyObject *self, PyObject *args) {
    PyObject *keys, *codes, *origins, *ends, *mre, *overlay, *lookup, *cell;
    unsigned long long source, local_epoch;
    int primary;
    if (!PyArg_ParseTuple(args, "O!SO!O!O!KpKO!OO", &PyList_Type, &keys, &codes, &PyList_Type,
                          &origins, &PyList_Type, &ends, &PyDict_Type, &mre, &source,
                          &primary, &local_epoch, &PyDict_Type, &overlay, &lookup, &cell))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyBytes_GET_SIZE(codes) != n || PyList_GET_SIZE(origins) != n) {
        PyErr_SetString(PyExc_ValueError, "keys, codes and origins differ in length");
        return NULL;
    }
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(codes);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    PyObject *accepted = PyDict_New(); /* key -> index into rows: the overlay of the epoch */
    PyObject *refused = PyDict_New();  /* key -> set of origins whose change was rejected */
    PyObject *pending = PyList_New(0); /* this transaction's rejections: (key, origin) */
    Row *rows = PyMem_Malloc(sizeof(Row) * (n ? n : 1));
    long long dd = 0;
    Py_ssize_t first_dd = -1;
    /* The row's key and origin, owned: lookup and cell run Python code, which may change or
     * empty the lists (the lengths are checked again before every row for the same reason). */
    PyObject *key = NULL, *origin_obj = NULL;
    if (!out || !accepted || !refused || !pending || !rows) goto fail;
    unsigned char *v = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t nrows = 0, i = 0;
    for (Py_ssize_t t = 0; t < PyList_GET_SIZE(ends); t++) {
        Py_ssize_t end = PyLong_AsSsize_t(PyList_GET_ITEM(ends, t));
        if (end == -1 && PyErr_Occurred()) goto fail;
        if (end < i || end > n) {
            PyErr_SetString(PyExc_ValueError, "ends are not ascending within the rows");
            goto fail;
        }
        for (; i < end; i++) {
            if (PyList_GET_SIZE(keys) != n || PyList_GET_SIZE(origins) != n) {
                PyErr_SetString(PyExc_ValueError, "keys or origins changed length during the "
                                "call (by lookup or cell)");
                goto fail;
            }
            Py_XSETREF(key, Py_NewRef(PyList_GET_ITEM(keys, i)));
            Py_XSETREF(origin_obj, Py_NewRef(PyList_GET_ITEM(origins, i)));
            int op = code[i] & 3, epoch2 = (code[i] & 4) != 0;
            if (op == 0) {
                PyErr_SetString(PyExc_ValueError, "a row change without an operation");
                goto fail;
            }
            uint64_t origin;
            if (as_u64(origin_obj, &origin) < 0) goto fail;
            Row st;
            PyObject *at = PyDict_GetItemWithError(accepted, key);
            if (at) {
                st = rows[PyLong_AsSsize_t(at)];
            } else {
                if (PyErr_Occurred()) goto fail;
                if (stored_row(key, overlay, lookup, cell, &st) < 0) goto fail;
            }
            int vd = verdict(op, epoch2, origin, origin_obj, &st, primary, mre);
            if (vd < 0) goto fail;
            if (vd & V_DD && !dd++) first_dd = i;
            if (!(vd & 0x0e)) { /* no cause: made on top of a rejected change? */
                PyObject *who = PyDict_GetItemWithError(refused, key);
                if (!who && PyErr_Occurred()) goto fail;
                if (who) {
                    int by = origin == source;
                    if (!by) {
                        by = PySet_Contains(who, origin_obj);
                        if (by < 0) goto fail;
                    }
                    if (by) /* a new verdict: as judge_epoch, no delete-delete flag */
                        vd = (vd & V_EXISTS) | (CAUSE_DIC << 1) |
                             (primary || (vd & V_REFRESH) ? V_REFRESH : 0);
                }
            }
            if (vd & 0x0e) {
                PyObject *p = PyTuple_Pack(2, key, origin_obj);
                if (!p || PyList_Append(pending, p) < 0) {
                    Py_XDECREF(p);
                    goto fail;
                }
                Py_DECREF(p);
            } else if (vd & V_APPLY) {
                Row *r = at ? &rows[PyLong_AsSsize_t(at)] : &rows[nrows];
                r->exists = op != OP_DELETE;
                r->epoch = local_epoch;
                r->author = origin;
                if (!at) {
                    PyObject *ix = PyLong_FromSsize_t(nrows++);
                    if (!ix || PyDict_SetItem(accepted, key, ix) < 0) {
                        Py_XDECREF(ix);
                        goto fail;
                    }
                    Py_DECREF(ix);
                }
            }
            v[i] = (unsigned char)vd;
        }
        /* the transaction's rejections count for the epoch's later transactions */
        Py_ssize_t np = PyList_GET_SIZE(pending);
        for (Py_ssize_t k = 0; k < np; k++) {
            PyObject *p = PyList_GET_ITEM(pending, k);
            PyObject *key = PyTuple_GET_ITEM(p, 0);
            PyObject *who = PyDict_GetItemWithError(refused, key);
            if (!who) {
                if (PyErr_Occurred()) goto fail;
                who = PySet_New(NULL);
                if (!who || PyDict_SetItem(refused, key, who) < 0) {
                    Py_XDECREF(who);
                    goto fail;
                }
                Py_DECREF(who);
            }
            if (PySet_Add(who, PyTuple_GET_ITEM(p, 1)) < 0) goto fail;
        }
        if (np && PyList_SetSlice(pending, 0, np, NULL) < 0) goto fail;
    }
    if (i != n) {
        PyErr_SetString(PyExc_ValueError, "ends do not cover the rows");
        goto fail;
    }
    PyMem_Free(rows);
    Py_XDECREF(key);
    Py_XDECREF(origin_obj);
    Py_DECREF(accepted);
    Py_DECREF(refused);
    Py_DECREF(pending);
    PyObject *res = Py_BuildValue("(NLn)", out, dd, first_dd);
    return res;
fail:
    PyMem_Free(rows);
    Py_XDECREF(key);
    Py_XDECREF(origin_obj);
    Py_XDECREF(out);
    Py_XDECREF(accepted);
    Py_XDECREF(refused);
    Py_XDECREF(pending);
    return NULL;
}

static PyMethodDef methods[] = {
    {"epoch_verdicts", epoch_verdicts, METH_VARARGS,
     "Verdicts of an epoch's ruled row changes under NDB$EPOCH / NDB$EPOCH2 (see the file)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_judge", "C accelerator for gateway.node.state.epoch_judge.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__judge(void) { return PyModule_Create(&module); }
