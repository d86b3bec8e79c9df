/* Optional C accelerator for gateway.core.insert_columns (the applier's columns path).
 *
 * fill_txn(data, specs, groups, seen) -> int | None | (head, start, end)
 *     Appends the rows of the serialized Transaction (segment) `data` to the window's column
 *     lists, as gateway.core.insert_columns._add_transaction_py does (the specification).
 *     Every statement must be a Statement of one field, an InsertStatement (else None). An
 *     INSERT without records adds nothing; the others are looked up in the dict `specs` by
 *     their *head* -- the raw bytes of every field of the InsertStatement other than its
 *     records (field 4), in order: two statements with the same head have the same table,
 *     key_fields and fields (parsing is a function of the bytes). A spec of None -> None; a
 *     head not in `specs` -> (head, start, end), the InsertStatement being data[start:end],
 *     with nothing appended (the caller learns its spec and calls again). A spec is
 *     insert_columns' _Spec: (table, key columns, columns, key cases, cases, codes), `codes`
 *     holding the Value field number of each key column then each other column.
 *     Rows go to `groups[head]` = (spec, key lists, value lists) (made when missing), one list
 *     per column; every value must be a Value of exactly one field, its column's or null_value
 *     (-> None); each record's key tuple must not be in the set `seen[spec[0]]` (made when
 *     missing; the key is added). Returns the number of rows, or None for anything the row
 *     path must take: a rollback, a record with the wrong number of values, another field, a
 *     value of another case, a repeated key, a string that is not UTF-8, bytes that do not
 *     parse. The lists and sets may have been appended to when None is returned (the caller
 *     then drops the whole window). Never reads outside `data`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_protowire.h"
#include "../v1/wire_tags.h"

#define MAX_COLS 256

/* The Python value of the serialized Value d[s:e] for a column whose case is field `code`:
 * a new reference; Py_None (new reference) for null_value; NULL with no error set when the
 * row path must take it; NULL with an error set on failure. */
static PyObject *value(const unsigned char *d, Py_ssize_t s, Py_ssize_t e, int code) {
    Py_ssize_t p = s;
    uint64_t tag, v;
    if (read_varint(d, &p, e, &tag) < 0) return NULL;
    int field = (int)(tag >> 3), wire = (int)(tag & 7);
    if (field == VALUE_NULL_VALUE && wire == 0) {
        if (read_varint(d, &p, e, &v) < 0 || p != e) return NULL;
        Py_RETURN_NONE;
    }
    if (field != code) return NULL;
    switch (field) {
    case VALUE_BOOL_VALUE: case VALUE_INT_VALUE: case VALUE_UINT_VALUE:
        if (wire != 0 || read_varint(d, &p, e, &v) < 0 || p != e) return NULL;
        if (field == VALUE_BOOL_VALUE) return PyBool_FromLong(v != 0);
        if (field == VALUE_INT_VALUE)
            return PyLong_FromLongLong((int64_t)((v >> 1) ^ (~(v & 1) + 1)));
        return PyLong_FromUnsignedLongLong(v);
    case VALUE_DOUBLE_VALUE: case VALUE_TIMESTAMP_NS: {
        if (wire != 1 || e - p != 8) return NULL;
        uint64_t bits = read_fixed64(d + p);
        if (field == VALUE_TIMESTAMP_NS) return PyLong_FromLongLong((int64_t)bits);
        double x;
        memcpy(&x, &bits, 8);
        return PyFloat_FromDouble(x);
    }
    case VALUE_STRING_VALUE: case VALUE_BYTES_VALUE: {
        if (wire != 2 || read_varint(d, &p, e, &v) < 0 || v != (uint64_t)(e - p)) return NULL;
        if (field == VALUE_BYTES_VALUE)
            return PyBytes_FromStringAndSize((const char *)d + p, e - p);
        PyObject *str = PyUnicode_DecodeUTF8((const char *)d + p, e - p, NULL);
        if (!str && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
        return str;
    }
    default:
        return NULL;
    }
}

/* A column's value as read from the record before, kept while its bytes repeat: the same
 * bytes give the same value, so the object made for the first row is appended again (values
 * are immutable) -- a column that repeats (a status, an origin, an epoch, the exception rows'
 * cause and GTID) costs no decoding and no allocation per row. `obj` is borrowed from the
 * column's list, which keeps it alive for the call. */
typedef struct {
    Py_ssize_t start, len;
    PyObject *obj;
} Last;

/* value() of d[s:e], or the object of `last` when its bytes are the same (a new reference
 * either way; NULL as value() gives it). `last` is updated to this value. */
static PyObject *value_again(const unsigned char *d, Py_ssize_t s, Py_ssize_t e, int code,
                             Last *last) {
    Py_ssize_t n = e - s;
    if (last->obj && last->len == n && memcmp(d + last->start, d + s, (size_t)n) == 0)
        return Py_NewRef(last->obj);
    PyObject *x = value(d, s, e, code);
    if (x) {
        last->start = s;
        last->len = n;
        last->obj = x;
    }
    return x;
}

/* Appends the records (field 4) of the InsertStatement d[p:end] to the column lists, as `fill`
 * documents: the number of records, -1 when the row path must take the statement, -2 with an
 * error set. `codes` holds `ncols` field numbers, the first `nk` of them the key columns'. */
static Py_ssize_t fill_records(const unsigned char *d, Py_ssize_t p, Py_ssize_t end,
                               const int *codes, Py_ssize_t ncols, Py_ssize_t nk,
                               PyObject *key_lists, PyObject *val_lists, PyObject *seen) {
    Py_ssize_t starts[MAX_COLS], ends[MAX_COLS], rows = 0;
    Last last[MAX_COLS];
    memset(last, 0, sizeof(Last) * (size_t)ncols);
    while (p < end) {
        uint64_t tag, ln;
        if (read_varint(d, &p, end, &tag) < 0) return -1;
        if (tag != INSERT_STATEMENT_RECORDS_KEY) {
            if (skip_field(d, &p, end, tag) < 0) return -1;
            continue;
        }
        if (read_varint(d, &p, end, &ln) < 0 || ln > (uint64_t)(end - p)) return -1;
        Py_ssize_t r_end = p + (Py_ssize_t)ln, nkeys = 0, nvals = 0;
        while (p < r_end) {
            uint64_t t, vl;
            if (read_varint(d, &p, r_end, &t) < 0
                || (t != INSERT_RECORD_KEY_VALUES_KEY && t != INSERT_RECORD_AFTER_VALUES_KEY))
                return -1;
            if (read_varint(d, &p, r_end, &vl) < 0 || vl > (uint64_t)(r_end - p)) return -1;
            Py_ssize_t slot;
            if (t == INSERT_RECORD_KEY_VALUES_KEY) {
                if (nkeys == nk) return -1;
                slot = nkeys++;
            } else {
                if (nvals == ncols - nk) return -1;
                slot = nk + nvals++;
            }
            starts[slot] = p;
            ends[slot] = p + (Py_ssize_t)vl;
            p = ends[slot];
        }
        if (nkeys != nk || nvals != ncols - nk) return -1;
        PyObject *key = PyTuple_New(nk);
        if (!key) return -2;
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *x = value_again(d, starts[i], ends[i], codes[i], &last[i]);
            if (!x) { Py_DECREF(key); return PyErr_Occurred() ? -2 : -1; }
            PyTuple_SET_ITEM(key, i, x);
        }
        int held = PySet_Contains(seen, key);
        if (held != 0 || PySet_Add(seen, key) < 0) {
            Py_DECREF(key);
            return held > 0 ? -1 : -2;
        }
        for (Py_ssize_t i = 0; i < nk; i++) {
            if (PyList_Append(PyList_GET_ITEM(key_lists, i), PyTuple_GET_ITEM(key, i)) < 0) {
                Py_DECREF(key);
                return -2;
            }
        }
        Py_DECREF(key);
        for (Py_ssize_t j = nk; j < ncols; j++) {
            PyObject *x = value_again(d, starts[j], ends[j], codes[j], &last[j]);
            if (!x) return PyErr_Occurred() ? -2 : -1;
            int rc = PyList_Append(PyList_GET_ITEM(val_lists, j - nk), x);
            Py_DECREF(x);
            if (rc < 0) return -2;
        }
        rows++;
    }
    return rows;
}

/* The head of the InsertStatement d[s:e] (`head` documents it): a new bytes object, Py_None (a
 * new reference) when the bytes are not a well-formed field sequence, NULL with an error set.
 * `*has_records` is set when the statement holds at least one record. */
static PyObject *head_of(const unsigned char *d, Py_ssize_t s, Py_ssize_t e, int *has_records) {
    Py_ssize_t p = s, n = 0;
    char *out = PyMem_Malloc(e > s ? (size_t)(e - s) : 1);
    PyObject *result = NULL;
    *has_records = 0;
    if (!out) return PyErr_NoMemory();
    while (p < e) {
        Py_ssize_t start = p;
        uint64_t tag;
        if (read_varint(d, &p, e, &tag) < 0 || skip_field(d, &p, e, tag) < 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (tag != INSERT_STATEMENT_RECORDS_KEY) {
            memcpy(out + n, d + start, (size_t)(p - start));
            n += p - start;
        } else {
            *has_records = 1;
        }
    }
    result = PyBytes_FromStringAndSize(out, n);
done:
    PyMem_Free(out);
    return result;
}

typedef struct {
    PyObject *head;  /* owned */
    PyObject *spec;  /* owned: another thread may clear `specs` while pass 2 allocates */
    Py_ssize_t start, end;
} Insert;

/* The column lists of `spec`'s group in `groups` (keyed by `head`), made when missing:
 * borrowed references, or -1 with an error set. */
static int group_of(PyObject *groups, PyObject *head, PyObject *spec, Py_ssize_t nk,
                    Py_ssize_t ncols, PyObject **key_lists, PyObject **val_lists) {
    PyObject *group = PyDict_GetItemWithError(groups, head);
    if (!group) {
        if (PyErr_Occurred()) return -1;
        PyObject *keys = PyList_New(nk), *vals = PyList_New(ncols - nk);
        if (!keys || !vals) goto fail;
        for (Py_ssize_t i = 0; i < ncols; i++) {
            PyObject *col = PyList_New(0);
            if (!col) goto fail;
            if (i < nk) PyList_SET_ITEM(keys, i, col);
            else PyList_SET_ITEM(vals, i - nk, col);
        }
        group = PyTuple_Pack(3, spec, keys, vals);
        Py_DECREF(keys);
        Py_DECREF(vals);
        if (!group) return -1;
        int rc = PyDict_SetItem(groups, head, group);
        Py_DECREF(group);  /* the dict holds it */
        if (rc < 0) return -1;
        goto found;
    fail:
        Py_XDECREF(keys);
        Py_XDECREF(vals);
        return -1;
    }
found:
    if (!PyTuple_Check(group) || PyTuple_GET_SIZE(group) != 3
            || !PyList_Check(PyTuple_GET_ITEM(group, 1)) || !PyList_Check(PyTuple_GET_ITEM(group, 2))
            || PyList_GET_SIZE(PyTuple_GET_ITEM(group, 1)) != nk
            || PyList_GET_SIZE(PyTuple_GET_ITEM(group, 2)) != ncols - nk) {
        PyErr_SetString(PyExc_ValueError, "fill_txn: a group is not (spec, key lists, value "
                        "lists) of its spec's columns");
        return -1;
    }
    *key_lists = PyTuple_GET_ITEM(group, 1);
    *val_lists = PyTuple_GET_ITEM(group, 2);
    return 0;
}

/* The set of keys seen in `seen` for `table`, made when missing: borrowed, or NULL (error). */
static PyObject *seen_of(PyObject *seen, PyObject *table) {
    PyObject *set = PyDict_GetItemWithError(seen, table);
    if (set || PyErr_Occurred()) return set;
    set = PySet_New(NULL);
    if (!set) return NULL;
    int rc = PyDict_SetItem(seen, table, set);
    Py_DECREF(set);
    return rc < 0 ? NULL : set;
}

static PyObject *fill_txn(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *specs, *groups, *seen;
    if (!PyArg_ParseTuple(args, "y*O!O!O!", &data, &PyDict_Type, &specs, &PyDict_Type, &groups,
                          &PyDict_Type, &seen))
        return NULL;
    const unsigned char *d = data.buf;
    Py_ssize_t p = 0, end = data.len, n = 0, cap = 0, rows = 0;
    Insert *ins = NULL;
    PyObject *result = NULL;
    /* Pass 1: every statement is an INSERT whose spec is known; nothing is appended yet. */
    while (p < end) {
        uint64_t tag, ln, t, bl;
        if (read_varint(d, &p, end, &tag) < 0 || tag == TRANSACTION_ROLLBACK_KEY) goto general;
        if (tag != TRANSACTION_STATEMENTS_KEY) {
            if (skip_field(d, &p, end, tag) < 0) goto general;
            continue;
        }
        if (read_varint(d, &p, end, &ln) < 0 || ln > (uint64_t)(end - p)) goto general;
        Py_ssize_t s_end = p + (Py_ssize_t)ln;
        /* a Statement of exactly one field, its insert (field 1) */
        if (read_varint(d, &p, s_end, &t) < 0 || t != STATEMENT_INSERT_KEY
                || read_varint(d, &p, s_end, &bl) < 0
                || bl != (uint64_t)(s_end - p))
            goto general;
        Py_ssize_t b_start = p;
        p = s_end;
        int has_records;
        PyObject *h = head_of(d, b_start, s_end, &has_records);
        if (!h) goto done;
        if (h == Py_None) { Py_DECREF(h); goto general; }
        if (!has_records) { Py_DECREF(h); continue; }
        PyObject *spec = PyDict_GetItemWithError(specs, h);
        if (!spec) {
            if (PyErr_Occurred()) { Py_DECREF(h); goto done; }
            result = Py_BuildValue("(Nnn)", h, b_start, s_end);  /* steals h */
            goto done;
        }
        if (spec == Py_None) { Py_DECREF(h); goto general; }
        if (n == cap) {
            Py_ssize_t ncap = cap ? cap * 2 : 8;
            Insert *grown = PyMem_Realloc(ins, (size_t)ncap * sizeof(Insert));
            if (!grown) { Py_DECREF(h); PyErr_NoMemory(); goto done; }
            ins = grown;
            cap = ncap;
        }
        ins[n].head = h;
        ins[n].spec = Py_NewRef(spec);
        ins[n].start = b_start;
        ins[n].end = s_end;
        n++;
    }
    /* Pass 2: append each statement's records to its group. */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *spec = ins[i].spec;
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 6
                || !PyTuple_Check(PyTuple_GET_ITEM(spec, 3))
                || !PyTuple_Check(PyTuple_GET_ITEM(spec, 5))) {
            PyErr_SetString(PyExc_ValueError, "fill_txn: a spec is not insert_columns' _Spec");
            goto done;
        }
        PyObject *codes_obj = PyTuple_GET_ITEM(spec, 5);
        Py_ssize_t nk = PyTuple_GET_SIZE(PyTuple_GET_ITEM(spec, 3));
        Py_ssize_t ncols = PyTuple_GET_SIZE(codes_obj);
        if (ncols > MAX_COLS || nk < 1 || nk > ncols) goto general;
        int codes[MAX_COLS];
        for (Py_ssize_t c = 0; c < ncols; c++) {
            codes[c] = (int)PyLong_AsLong(PyTuple_GET_ITEM(codes_obj, c));
            if (codes[c] == -1 && PyErr_Occurred()) goto done;
        }
        PyObject *key_lists, *val_lists, *set;
        if (group_of(groups, ins[i].head, spec, nk, ncols, &key_lists, &val_lists) < 0)
            goto done;
        if (!(set = seen_of(seen, PyTuple_GET_ITEM(spec, 0)))) goto done;
        Py_ssize_t got = fill_records(d, ins[i].start, ins[i].end, codes, ncols, nk, key_lists,
                                      val_lists, set);
        if (got == -2) goto done;
        if (got < 0) goto general;
        rows += got;
    }
    result = PyLong_FromSsize_t(rows);
    goto done;
general:
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(ins[i].head);
        Py_DECREF(ins[i].spec);
    }
    PyMem_Free(ins);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"fill_txn", fill_txn, METH_VARARGS,
     "fill_txn(data, specs, groups, seen) -> rows appended, None, or (head, start, end) of an "
     "INSERT whose spec is missing"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns",
    "C accelerator for reading windows of plain inserts as columns.", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) { return PyModule_Create(&module); }
