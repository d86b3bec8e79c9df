/* Optional C accelerator of a read batch's wire paths (gateway.node.api.read_wire, the
 * specification of every function here; the tests run both).
 *
 * batch_table(data) -> bytes | None: the one table every ReadKey of the serialized
 * ReadBatchRequest data is of, when each holds a value and the request has no other field
 * (batch_table_py).
 *
 * batch_keys(data, prefix, kcodes) -> list[bytes] | None: the store key of every ReadKey,
 * prefix + its encoding, when every key is plain and valid for the key columns of codes kcodes;
 * None for the general path (batch_keys_py).
 *
 * batch_response(rows, applied_index, limit) -> bytes | None: the serialized ReadBatchResponse
 * of rows (each bytes, a serialized Row, or None: not found); None when it would pass limit
 * bytes, where read_batch_response_py raises naming the key.
 *
 * Field keys are the names of gateway/v1/wire_tags.h (generated from the .proto files). Never
 * reads outside the buffers given.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../../core/_buf.h"
#include "../../core/_protowire.h"
#include "../../v1/wire_tags.h"
#include "../_keyvalues.h"

/* The length-delimited field whose tag byte is at d[*pos]: its payload's bounds, *pos past it.
 * 0, or -1 when it runs past end. */
static int len_field(const unsigned char *d, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t *s,
                     Py_ssize_t *e) {
    Py_ssize_t p = *pos + 1;
    uint64_t ln;
    if (read_varint(d, &p, end, &ln) < 0 || ln > (uint64_t)(end - p)) return -1;
    *s = p;
    *e = p + (Py_ssize_t)ln;
    *pos = *e;
    return 0;
}

/* Walks the request: calls field(ctx, tag, d, s, e) on the payload d[s:e] of every table and
 * key field (read_wire._request_fields); 1 when the whole request walked and every call
 * answered 1, 0 for the general path, -1 error set. */
typedef int (*field_fn)(void *ctx, unsigned char tag, const unsigned char *d, Py_ssize_t s,
                        Py_ssize_t e);

static int walk(const unsigned char *d, Py_ssize_t n, field_fn field, void *ctx) {
    Py_ssize_t pos = 0;
    while (pos < n) {
        unsigned char tag = d[pos];
        if (tag == READ_BATCH_REQUEST_CONSISTENCY_KEY) {
            uint64_t v;
            pos++;
            if (read_varint(d, &pos, n, &v) < 0) return 0;
            continue;
        }
        if (tag != READ_BATCH_REQUEST_KEYS_KEY && tag != READ_BATCH_REQUEST_TABLE_KEY) return 0;
        Py_ssize_t s, e;
        if (len_field(d, &pos, n, &s, &e) < 0) return 0;
        int r = field(ctx, tag, d, s, e);
        if (r != 1) return r;
    }
    return 1;
}

typedef struct {
    const unsigned char *request_table, *common;
    Py_ssize_t request_len, common_len;
} TableCtx;

/* batch_table_py's reading of one ReadKey: its table (its own, else the request's) must be
 * the keys' common one, and it must hold a value. */
static int key_table(void *vctx, unsigned char tag, const unsigned char *d, Py_ssize_t p,
                     Py_ssize_t end) {
    TableCtx *ctx = vctx;
    if (tag != READ_BATCH_REQUEST_KEYS_KEY) return 1;
    const unsigned char *table = NULL;
    Py_ssize_t table_len = 0;
    int values = 0;
    while (p < end) {
        unsigned char t = d[p];
        Py_ssize_t s, e;
        if (t != READ_KEY_KEY_KEY && t != READ_KEY_TABLE_KEY) return 0;
        if (len_field(d, &p, end, &s, &e) < 0) return 0;
        if (t == READ_KEY_TABLE_KEY) {
            table = d + s;
            table_len = e - s;
        } else {
            values++;
        }
    }
    if (table_len == 0) {
        table = ctx->request_table;
        table_len = ctx->request_len;
    }
    if (!values || table_len == 0) return 0;
    if (ctx->common == NULL) {
        ctx->common = table;
        ctx->common_len = table_len;
        return 1;
    }
    return table_len == ctx->common_len && memcmp(table, ctx->common, (size_t)table_len) == 0;
}

/* batch_table_py's first pass: the request's last table field into ctx. */
static int request_table(void *vctx, unsigned char tag, const unsigned char *d, Py_ssize_t s,
                         Py_ssize_t e) {
    TableCtx *ctx = vctx;
    if (tag == READ_BATCH_REQUEST_TABLE_KEY) {
        ctx->request_table = d + s;
        ctx->request_len = e - s;
    }
    return 1;
}

static PyObject *batch_table(PyObject *self, PyObject *arg) {
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    TableCtx ctx = {NULL, NULL, 0, 0};
    PyObject *result;
    if (walk(data.buf, data.len, request_table, &ctx) == 1
        && walk(data.buf, data.len, key_table, &ctx) == 1 && ctx.common != NULL)
        result = PyBytes_FromStringAndSize((const char *)ctx.common, ctx.common_len);
    else
        result = Py_NewRef(Py_None);
    PyBuffer_Release(&data);
    return result;
}

typedef struct {
    const unsigned char *kcodes;
    Py_ssize_t nk;
    const char *prefix;
    Py_ssize_t prefix_len;
    Buf kb;
    PyObject *out;
} KeysCtx;

/* batch_keys_py's reading of one ReadKey: its store key appended to ctx->out. */
static int store_key(void *vctx, unsigned char tag, const unsigned char *d, Py_ssize_t p,
                     Py_ssize_t end) {
    KeysCtx *ctx = vctx;
    if (tag != READ_BATCH_REQUEST_KEYS_KEY) return 1;
    Py_ssize_t i = 0;
    ctx->kb.len = 0;
    if (buf_put(&ctx->kb, ctx->prefix, ctx->prefix_len) < 0) return -1;
    while (p < end) {
        unsigned char t = d[p];
        Py_ssize_t v, v_end;
        if (t != READ_KEY_KEY_KEY && t != READ_KEY_TABLE_KEY) return 0;
        if (len_field(d, &p, end, &v, &v_end) < 0) return 0;
        if (t == READ_KEY_TABLE_KEY) continue; /* read by batch_table */
        if (i >= ctx->nk || v_end == v) return 0;
        unsigned char code = ctx->kcodes[i], got = d[v];
        if (got != tag_of_code(code) || !single_field(d, v, v_end, got)
            || !value_ok(d, v, v_end, code, 1))
            return 0;
        int r = key_part(d, v, v_end, &ctx->kb);
        if (r != 1) return r;
        i++;
    }
    if (i != ctx->nk) return 0;
    PyObject *k = PyBytes_FromStringAndSize(ctx->kb.buf, ctx->kb.len);
    if (k == NULL) return -1;
    int r = PyList_Append(ctx->out, k);
    Py_DECREF(k);
    return r < 0 ? -1 : 1;
}

static PyObject *batch_keys(PyObject *self, PyObject *args) {
    Py_buffer data, prefix, kcodes;
    if (!PyArg_ParseTuple(args, "y*y*y*", &data, &prefix, &kcodes)) return NULL;
    KeysCtx ctx = {kcodes.buf, kcodes.len, prefix.buf, prefix.len, {NULL, 0, 0}, PyList_New(0)};
    PyObject *result = NULL;
    if (ctx.out != NULL) {
        int r = walk(data.buf, data.len, store_key, &ctx);
        if (r == 1) {
            result = ctx.out;
            ctx.out = NULL;
        } else if (r == 0) {
            result = Py_NewRef(Py_None);
        }
    }
    Py_XDECREF(ctx.out);
    PyMem_Free(ctx.kb.buf);
    PyBuffer_Release(&data);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&kcodes);
    return result;
}

static PyObject *batch_response(PyObject *self, PyObject *args) {
    PyObject *rows;
    unsigned long long index;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "OKn", &rows, &index, &limit)) return NULL;
    PyObject *seq = PySequence_Fast(rows, "batch_response: rows must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    /* First the size, checking the limit where read_batch_response_py does: at each found row
     * (the missing rows' 2 bytes count towards it). */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = items[i];
        if (row == Py_None) {
            total += 2;
            continue;
        }
        if (!PyBytes_Check(row)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "batch_response: a row must be bytes or None");
            return NULL;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(row);
        Py_ssize_t inner = 3 + varint_len((uint64_t)len) + len;
        Py_ssize_t part = 1 + varint_len((uint64_t)inner) + inner;
        total += part;
        if (total > limit) {
            Py_DECREF(seq);
            Py_RETURN_NONE;
        }
    }
    if (index) total += 1 + varint_len(index);
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = items[i];
        *o++ = READ_BATCH_RESPONSE_RESULTS_KEY;
        if (row == Py_None) {
            *o++ = 0;
            continue;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(row);
        Py_ssize_t inner = 3 + varint_len((uint64_t)len) + len;
        o += put_varint(o, (uint64_t)inner);
        *o++ = READ_BATCH_RESULT_FOUND_KEY;
        *o++ = 1;
        *o++ = READ_BATCH_RESULT_ROW_KEY;
        o += put_varint(o, (uint64_t)len);
        memcpy(o, PyBytes_AS_STRING(row), (size_t)len);
        o += len;
    }
    if (index) {
        *o++ = READ_BATCH_RESPONSE_APPLIED_INDEX_KEY;
        o += put_varint(o, index);
    }
    Py_DECREF(seq);
    return out;
}

static PyMethodDef methods[] = {
    {"batch_table", batch_table, METH_O,
     "The one table of a read batch request's keys, or None (read_wire.batch_table_py)."},
    {"batch_keys", batch_keys, METH_VARARGS,
     "The store keys of a plain read batch request (read_wire.batch_keys_py)."},
    {"batch_response", batch_response, METH_VARARGS,
     "A serialized ReadBatchResponse, or None past the limit (read_wire.read_batch_response_py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_read_wire",
                                    "C twin of gateway.node.api.read_wire.", -1, methods};

PyMODINIT_FUNC PyInit__read_wire(void) { return PyModule_Create(&module); }
