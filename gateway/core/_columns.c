/* Optional C accelerator for gateway.core.insert_columns (the applier's columns path).
 *
 * head(data) -> bytes
 *     The raw bytes of every field of the serialized InsertStatement `data` other than its
 *     records (field 4), in order: two statements with the same head have the same table,
 *     key_fields and fields (parsing is a function of the bytes), so the head keys the
 *     statement's column spec. None when the bytes are not a well-formed field sequence.
 *
 * fill(data, codes, nk, key_lists, val_lists, seen) -> int | None
 *     Appends the records (field 4) of the serialized InsertStatement `data` to the group's
 *     column lists, as gateway.core.insert_columns._add_insert_py does (the specification):
 *     `codes` holds the Value field number of each key column then each other column
 *     (len(key_lists) == nk, len(val_lists) == len(codes) - nk); every value must be a Value of
 *     exactly one field, that column's or null_value (-> None); each record's key tuple must
 *     not be in the set `seen` (it is added). Returns the number of records, or None for
 *     anything the row path must take: a record with the wrong number of values, another
 *     field, a value of another case, a repeated key, a string that is not UTF-8, bytes that
 *     do not parse. The lists and `seen` may have been appended to when None is returned (the
 *     caller then drops the whole window). Never reads outside `data`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_protowire.h"

#define MAX_COLS 256

/* Skips the field whose tag (already read) is `tag`: 0, or -1 when it runs past end or has a
 * wire type this reader does not take (groups). */
static int skip_field(const unsigned char *d, Py_ssize_t *p, Py_ssize_t end, uint64_t tag) {
    uint64_t v;
    switch (tag & 7) {
    case 0: return read_varint(d, p, end, &v);
    case 1: if (end - *p < 8) return -1; *p += 8; return 0;
    case 5: if (end - *p < 4) return -1; *p += 4; return 0;
    case 2:
        if (read_varint(d, p, end, &v) < 0 || v > (uint64_t)(end - *p)) return -1;
        *p += (Py_ssize_t)v;
        return 0;
    default: return -1;
    }
}

/* The Python value of the serialized Value d[s:e] for a column whose case is field `code`:
 * a new reference; Py_None (new reference) for null_value; NULL with no error set when the
 * row path must take it; NULL with an error set on failure. */
static PyObject *value(const unsigned char *d, Py_ssize_t s, Py_ssize_t e, int code) {
    Py_ssize_t p = s;
    uint64_t tag, v;
    if (read_varint(d, &p, e, &tag) < 0) return NULL;
    int field = (int)(tag >> 3), wire = (int)(tag & 7);
    if (field == 1 && wire == 0) {
        if (read_varint(d, &p, e, &v) < 0 || p != e) return NULL;
        Py_RETURN_NONE;
    }
    if (field != code) return NULL;
    switch (field) {
    case 2: case 3: case 4:
        if (wire != 0 || read_varint(d, &p, e, &v) < 0 || p != e) return NULL;
        if (field == 2) return PyBool_FromLong(v != 0);
        if (field == 3) return PyLong_FromLongLong((int64_t)((v >> 1) ^ (~(v & 1) + 1)));
        return PyLong_FromUnsignedLongLong(v);
    case 5: case 9: {
        if (wire != 1 || e - p != 8) return NULL;
        uint64_t bits = read_fixed64(d + p);
        if (field == 9) return PyLong_FromLongLong((int64_t)bits);
        double x;
        memcpy(&x, &bits, 8);
        return PyFloat_FromDouble(x);
    }
    case 7: case 8: {
        if (wire != 2 || read_varint(d, &p, e, &v) < 0 || v != (uint64_t)(e - p)) return NULL;
        if (field == 8) return PyBytes_FromStringAndSize((const char *)d + p, e - p);
        PyObject *str = PyUnicode_DecodeUTF8((const char *)d + p, e - p, NULL);
        if (!str && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
        return str;
    }
    default:
        return NULL;
    }
}

static PyObject *head(PyObject *self, PyObject *arg) {
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *d = data.buf;
    Py_ssize_t p = 0, end = data.len;
    char *out = PyMem_Malloc(end ? (size_t)end : 1);
    Py_ssize_t n = 0;
    PyObject *result = NULL;
    if (!out) { PyErr_NoMemory(); goto done; }
    while (p < end) {
        Py_ssize_t start = p;
        uint64_t tag;
        if (read_varint(d, &p, end, &tag) < 0 || skip_field(d, &p, end, tag) < 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (tag != 0x22) {
            memcpy(out + n, d + start, (size_t)(p - start));
            n += p - start;
        }
    }
    result = PyBytes_FromStringAndSize(out, n);
done:
    PyMem_Free(out);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *fill(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *codes_obj, *key_lists, *val_lists, *seen;
    Py_ssize_t nk;
    if (!PyArg_ParseTuple(args, "y*OnO!O!O!", &data, &codes_obj, &nk, &PyList_Type, &key_lists,
                          &PyList_Type, &val_lists, &PySet_Type, &seen))
        return NULL;
    PyObject *result = NULL;
    int codes[MAX_COLS];
    Py_ssize_t starts[MAX_COLS], ends[MAX_COLS];
    Py_ssize_t ncols = PySequence_Size(codes_obj);
    if (ncols < 0) goto done;
    if (ncols > MAX_COLS || nk < 1 || nk > ncols || PyList_GET_SIZE(key_lists) != nk
            || PyList_GET_SIZE(val_lists) != ncols - nk) {
        if (ncols > MAX_COLS) { result = Py_NewRef(Py_None); goto done; }
        PyErr_SetString(PyExc_ValueError, "fill: codes, nk and the column lists disagree");
        goto done;
    }
    for (Py_ssize_t i = 0; i < ncols; i++) {
        PyObject *c = PySequence_GetItem(codes_obj, i);
        if (!c) goto done;
        codes[i] = (int)PyLong_AsLong(c);
        Py_DECREF(c);
        if (codes[i] == -1 && PyErr_Occurred()) goto done;
    }
    const unsigned char *d = data.buf;
    Py_ssize_t p = 0, end = data.len, rows = 0;
    while (p < end) {
        uint64_t tag, ln;
        if (read_varint(d, &p, end, &tag) < 0) goto general;
        if (tag != 0x22) {
            if (skip_field(d, &p, end, tag) < 0) goto general;
            continue;
        }
        if (read_varint(d, &p, end, &ln) < 0 || ln > (uint64_t)(end - p)) goto general;
        Py_ssize_t r_end = p + (Py_ssize_t)ln, nkeys = 0, nvals = 0;
        while (p < r_end) {
            uint64_t t, vl;
            if (read_varint(d, &p, r_end, &t) < 0 || (t != 0x0a && t != 0x12)) goto general;
            if (read_varint(d, &p, r_end, &vl) < 0 || vl > (uint64_t)(r_end - p)) goto general;
            Py_ssize_t slot;
            if (t == 0x0a) {
                if (nkeys == nk) goto general;
                slot = nkeys++;
            } else {
                if (nvals == ncols - nk) goto general;
                slot = nk + nvals++;
            }
            starts[slot] = p;
            ends[slot] = p + (Py_ssize_t)vl;
            p = ends[slot];
        }
        if (nkeys != nk || nvals != ncols - nk) goto general;
        PyObject *key = PyTuple_New(nk);
        if (!key) goto done;
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *x = value(d, starts[i], ends[i], codes[i]);
            if (!x) { Py_DECREF(key); if (PyErr_Occurred()) goto done; goto general; }
            PyTuple_SET_ITEM(key, i, x);
        }
        int held = PySet_Contains(seen, key);
        if (held != 0 || PySet_Add(seen, key) < 0) {
            Py_DECREF(key);
            if (held > 0) goto general;
            goto done;
        }
        for (Py_ssize_t i = 0; i < nk; i++) {
            if (PyList_Append(PyList_GET_ITEM(key_lists, i), PyTuple_GET_ITEM(key, i)) < 0) {
                Py_DECREF(key);
                goto done;
            }
        }
        Py_DECREF(key);
        for (Py_ssize_t j = nk; j < ncols; j++) {
            PyObject *x = value(d, starts[j], ends[j], codes[j]);
            if (!x) { if (PyErr_Occurred()) goto done; goto general; }
            int rc = PyList_Append(PyList_GET_ITEM(val_lists, j - nk), x);
            Py_DECREF(x);
            if (rc < 0) goto done;
        }
        rows++;
    }
    result = PyLong_FromSsize_t(rows);
    goto done;
general:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"head", head, METH_O,
     "head(data) -> the serialized InsertStatement's fields other than its records, or None"},
    {"fill", fill, METH_VARARGS,
     "fill(data, codes, nk, key_lists, val_lists, seen) -> records appended, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns",
    "C accelerator for reading windows of plain inserts as columns.", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) { return PyModule_Create(&module); }
