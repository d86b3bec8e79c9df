/* Optional C accelerator for point reads in LSM data blocks (gateway.core.lsm.format).
 *
 * A block payload is  tag:u8 (0xE1)  count:u32  (klen:u32 clen:u32)*count  k0 c0 k1 c1 ...
 * (little-endian), keys strictly increasing.
 *
 * last_key(payload) -> bytes | None
 *     Checks the payload's structure (tag, lengths that add up to exactly its size) and
 *     returns its last key (None for a block of no pairs); ValueError when malformed.
 *     format._block_last_key_py is the specification.
 *
 * find(payload, key) -> bytes | None
 *     The cell stored for `key` in the block, or None: a binary search over the keys, no list
 *     of keys or cells built. ValueError when the payload is malformed; never reads outside
 *     it. format._find_cell_py is the specification.
 *
 * cells(ops) -> dict | None
 *     The cells of a list of write ops (key, value, epoch, author, commit_ts) keyed by key
 *     (value None: a delete), a later op of a key replacing an earlier one; None when an op
 *     is anything else, which the store's general loop takes. format.encode_cells_py is the
 *     specification.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define TAG_BLOCK 0xE1
#define STACK_PAIRS 256

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Parses the header: the pair count into *n and the start of the data into *data_at; checks
 * that the lengths add up to the payload's size. 0, or -1 with ValueError set. */
static int parse(const unsigned char *b, Py_ssize_t len, Py_ssize_t *n, Py_ssize_t *data_at) {
    if (len < 1 || b[0] != TAG_BLOCK) {
        PyErr_SetString(PyExc_ValueError, "record is not a data block");
        return -1;
    }
    if (len < 5) {
        PyErr_SetString(PyExc_ValueError, "data block is cut short before its pair count");
        return -1;
    }
    uint64_t count = le32(b + 1);
    if (count > (uint64_t)(len - 5) / 8) {
        PyErr_Format(PyExc_ValueError, "%llu pairs announced, lengths are cut short",
                     (unsigned long long)count);
        return -1;
    }
    Py_ssize_t at = 5 + 8 * (Py_ssize_t)count;
    uint64_t total = 0;
    for (uint64_t i = 0; i < count; i++)
        total += (uint64_t)le32(b + 5 + 8 * i) + le32(b + 9 + 8 * i);
    if (total != (uint64_t)(len - at)) {
        PyErr_Format(PyExc_ValueError, "%llu pairs hold %zd data bytes, lengths say %llu",
                     (unsigned long long)count, len - at, (unsigned long long)total);
        return -1;
    }
    *n = (Py_ssize_t)count;
    *data_at = at;
    return 0;
}

static PyObject *last_key(PyObject *self, PyObject *arg) {
    Py_buffer pb;
    if (PyObject_GetBuffer(arg, &pb, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = pb.buf;
    Py_ssize_t n, at;
    PyObject *out = NULL;
    if (parse(b, pb.len, &n, &at) < 0) goto done;
    if (n == 0) { out = Py_NewRef(Py_None); goto done; }
    /* The last key starts where all but the last pair's key and cell end. */
    uint32_t klen = le32(b + 5 + 8 * (n - 1)), clen = le32(b + 9 + 8 * (n - 1));
    Py_ssize_t kat = pb.len - clen - klen;
    out = PyBytes_FromStringAndSize((const char *)b + kat, klen);
done:
    PyBuffer_Release(&pb);
    return out;
}

static PyObject *find(PyObject *self, PyObject *args) {
    Py_buffer pb, kb;
    if (!PyArg_ParseTuple(args, "y*y*", &pb, &kb)) return NULL;
    const unsigned char *b = pb.buf, *key = kb.buf;
    Py_ssize_t n, at;
    PyObject *out = NULL;
    Py_ssize_t stack[STACK_PAIRS + 1], *offs = stack;
    if (parse(b, pb.len, &n, &at) < 0) goto done;
    if (n > STACK_PAIRS) {
        offs = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
        if (!offs) { PyErr_NoMemory(); goto done; }
    }
    /* offs[i]: where pair i's key starts. parse() checked the lengths fit the payload. */
    Py_ssize_t pos = at;
    for (Py_ssize_t i = 0; i < n; i++) {
        offs[i] = pos;
        pos += (Py_ssize_t)le32(b + 5 + 8 * i) + le32(b + 9 + 8 * i);
    }
    Py_ssize_t lo = 0, hi = n, klen = kb.len;
    while (lo < hi) { /* first pair whose key >= key */
        Py_ssize_t mid = (lo + hi) / 2;
        Py_ssize_t ml = le32(b + 5 + 8 * mid);
        int c = memcmp(b + offs[mid], key, (size_t)(ml < klen ? ml : klen));
        if (c < 0 || (c == 0 && ml < klen)) lo = mid + 1;
        else hi = mid;
    }
    if (lo < n && (Py_ssize_t)le32(b + 5 + 8 * lo) == klen
            && memcmp(b + offs[lo], key, (size_t)klen) == 0) {
        out = PyBytes_FromStringAndSize((const char *)b + offs[lo] + klen,
                                        le32(b + 9 + 8 * lo));
    } else {
        out = Py_NewRef(Py_None);
    }
done:
    if (offs != stack) PyMem_Free(offs);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&kb);
    return out;
}

static void put_le(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* An exact int in [0, max] into *out: 1, 0 when it is not one (no error left set), -1 error. */
static int small_uint(PyObject *o, uint64_t max, uint64_t *out) {
    if (!PyLong_CheckExact(o)) return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return 0;
    }
    if (v > max) return 0;
    *out = v;
    return 1;
}

/* cells(ops) -> dict | None: format.encode_cells_py (the specification). */
static PyObject *cells(PyObject *self, PyObject *ops) {
    if (!PyList_CheckExact(ops)) Py_RETURN_NONE;
    PyObject *batch = PyDict_New();
    if (!batch) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ops);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i);
        if (!PyTuple_CheckExact(op) || PyTuple_GET_SIZE(op) != 5) goto general;
        PyObject *key = PyTuple_GET_ITEM(op, 0), *value = PyTuple_GET_ITEM(op, 1);
        if (!PyBytes_CheckExact(key) || (value != Py_None && !PyBytes_CheckExact(value)))
            goto general;
        uint64_t meta[3];
        const uint64_t max[3] = {UINT64_MAX, 0xffffffffu, UINT64_MAX};
        for (int j = 0; j < 3; j++) {
            int rc = small_uint(PyTuple_GET_ITEM(op, 2 + j), max[j], &meta[j]);
            if (rc < 0) goto fail;
            if (rc == 0) goto general;
        }
        Py_ssize_t vlen = value == Py_None ? 0 : PyBytes_GET_SIZE(value);
        int has_meta = meta[0] || meta[1] || meta[2];
        Py_ssize_t head = has_meta ? 21 : 1;
        PyObject *cell = PyBytes_FromStringAndSize(NULL, head + vlen);
        if (!cell) goto fail;
        unsigned char *p = (unsigned char *)PyBytes_AS_STRING(cell);
        if (has_meta) {
            p[0] = (unsigned char)(0x02 | (value == Py_None ? 0x01 : 0));
            put_le(p + 1, meta[0], 8);
            put_le(p + 9, meta[1], 4);
            put_le(p + 13, meta[2], 8);
        } else {
            p[0] = value == Py_None ? 0x01 : 0x00;
        }
        if (vlen) memcpy(p + head, PyBytes_AS_STRING(value), (size_t)vlen);
        int rc = PyDict_SetItem(batch, key, cell);
        Py_DECREF(cell);
        if (rc < 0) goto fail;
    }
    return batch;
general:
    Py_DECREF(batch);
    Py_RETURN_NONE;
fail:
    Py_DECREF(batch);
    return NULL;
}

static PyMethodDef methods[] = {
    {"last_key", last_key, METH_O,
     "last_key(payload) -> the data block's last key (None if empty); ValueError if malformed"},
    {"cells", cells, METH_O,
     "cells(ops) -> {key: cell} of write ops (key, value, epoch, author, commit_ts), or None"},
    {"find", find, METH_VARARGS,
     "find(payload, key) -> the cell of key in the data block, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_block", "C accelerator for point reads in LSM data blocks.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__block(void) { return PyModule_Create(&module); }
