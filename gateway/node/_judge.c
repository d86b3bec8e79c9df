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

#include "../core/_protowire.h"
#include "_slots.h"

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

/* message_fields(data) -> [(key, payload)] or None: the top-level fields of a serialized
 * message (gateway.node.state.conflict_wire.parts_py, the specification): a one-byte key and
 * the field's payload -- a length-delimited field's without its length, a varint's its bytes,
 * a fixed64's or fixed32's its 8 or 4 bytes. None when a key takes more than one byte, the
 * wire type is another, a varint takes more than 10 bytes or is 2**64 or more, or a field
 * runs past the end. */
typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
} Span;

/* The field at d[*pos] (message_fields' rules): 1 and its key and payload span, 0 at the
 * end, -1 when it does not walk. */
static int next_field(const unsigned char *d, Py_ssize_t n, Py_ssize_t *pos,
                      unsigned char *key, Span *payload) {
    if (*pos >= n) return 0;
    unsigned char k = d[(*pos)++];
    Py_ssize_t start = *pos;
    uint64_t v;
    if (k & 0x80) return -1;
    if ((k & 7) == 2) {
        if (read_varint(d, pos, n, &v) < 0 || v > (uint64_t)(n - *pos)) return -1;
        start = *pos;
        *pos += (Py_ssize_t)v;
    } else if (skip_field(d, pos, n, k) < 0) {
        return -1;
    }
    *key = k;
    payload->p = d + start;
    payload->n = *pos - start;
    return 1;
}

static PyObject *message_fields(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "message_fields takes bytes");
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg), pos = 0;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    unsigned char key;
    Span f;
    int got;
    while ((got = next_field(d, n, &pos, &key, &f)) == 1) {
        PyObject *t = Py_BuildValue("(iy#)", (int)key, (const char *)f.p, f.n);
        if (!t) {
            Py_DECREF(out);
            return NULL;
        }
        if (PyList_Append(out, t) < 0) {
            Py_DECREF(t);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(t);
    }
    if (got < 0) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

/* refresh_record(table, row) -> (head, record) or None: the refresh of a stored row
 * (gateway.node.state.conflict_wire.refresh_parts_py, the specification): head = table as
 * InsertStatement field 1, the Row's key fields (2) as field 2, its fields (4) as field 3;
 * record = the Row's key values (3) as InsertRecord field 1, its values (5) as field 2; each
 * group in the row's order, lengths written as minimal varints; other fields left out. None
 * when the row does not walk (message_fields' rules). */
static int varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* key, then len as a minimal varint: a length-delimited field's prefix */
static unsigned char *put_len(unsigned char *o, unsigned char key, Py_ssize_t len) {
    uint64_t v = (uint64_t)len;
    *o++ = key;
    while (v >= 0x80) {
        *o++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *o++ = (unsigned char)v;
    return o;
}

static unsigned char *put_ld(unsigned char *o, unsigned char key, const unsigned char *p,
                             Py_ssize_t len) {
    o = put_len(o, key, len);
    memcpy(o, p, (size_t)len);
    return o + len;
}

/* records_without(body, drop) -> (bytes, kept_any) or None: the serialized statement body
 * `body` (an insert, update or delete: records are field 4) without the records whose
 * numbers (counted from 0 among the records) are in `drop`, a list of ints in ascending
 * order, and whether any record is left; every other field as it was, a length-delimited
 * one's length written again as the minimal varint. None when the body does not walk
 * (message_fields' rules). conflict_wire.records_without_py is the specification. */
static PyObject *records_without(PyObject *self, PyObject *args) {
    PyObject *body, *drop;
    if (!PyArg_ParseTuple(args, "O!O!", &PyBytes_Type, &body, &PyList_Type, &drop))
        return NULL;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(body);
    Py_ssize_t n = PyBytes_GET_SIZE(body), nd = PyList_GET_SIZE(drop), di = 0, pos = 0;
    for (Py_ssize_t i = 0; i < nd; i++) { /* ints, ascending */
        Py_ssize_t v = PyLong_AsSsize_t(PyList_GET_ITEM(drop, i));
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (i > 0 && v <= PyLong_AsSsize_t(PyList_GET_ITEM(drop, i - 1))) {
            PyErr_SetString(PyExc_ValueError, "records_without: drop must be ascending");
            return NULL;
        }
        if (v < 0) di = i + 1; /* no record has a negative number */
    }
    /* a length's minimal varint is never longer than the one it replaces: n bytes suffice */
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (!out) return NULL;
    unsigned char *o0 = (unsigned char *)PyBytes_AS_STRING(out), *o = o0;
    unsigned char key;
    Span f;
    int got, kept_any = 0;
    Py_ssize_t r_no = -1;
    while ((got = next_field(d, n, &pos, &key, &f)) == 1) {
        if (key == 0x22) {
            r_no++;
            if (di < nd && PyLong_AsSsize_t(PyList_GET_ITEM(drop, di)) == r_no) {
                di++;
                continue;
            }
            kept_any = 1;
        }
        if ((key & 7) == 2) {
            o = put_ld(o, key, f.p, f.n);
        } else {
            *o++ = key;
            memcpy(o, f.p, (size_t)f.n);
            o += f.n;
        }
    }
    if (got < 0) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&out, o - o0) < 0) return NULL;
    return Py_BuildValue("(NO)", out, kept_any ? Py_True : Py_False);
}

/* the Row field key -> (0 head / 1 record, its new key, its group in the output order) */
static int refresh_slot(unsigned char key, unsigned char *to, int *group) {
    switch (key) {
    case 0x12: *to = 0x12; *group = 0; return 1; /* key_fields -> InsertStatement 2 */
    case 0x22: *to = 0x1a; *group = 1; return 1; /* fields -> InsertStatement 3 */
    case 0x1a: *to = 0x0a; *group = 2; return 1; /* key_values -> InsertRecord 1 */
    case 0x2a: *to = 0x12; *group = 3; return 1; /* values -> InsertRecord 2 */
    default: return 0;
    }
}

/* The refresh of stored row d[:n] with the serialized table; 1 with *head and *rec new
 * references, 0 when the row does not walk, -1 with an exception set. */
static int refresh_pair(const unsigned char *table, Py_ssize_t tlen, const unsigned char *d,
                        Py_ssize_t n, PyObject **head_out, PyObject **rec_out) {
    Py_ssize_t size[4] = {0, 0, 0, 0};
    for (int pass = 0; pass < 2; pass++) {
        PyObject *head = NULL, *rec = NULL;
        unsigned char *out[4] = {NULL, NULL, NULL, NULL};
        if (pass == 1) {
            Py_ssize_t hsize = 1 + varint_size((uint64_t)tlen) + tlen + size[0] + size[1];
            head = PyBytes_FromStringAndSize(NULL, hsize);
            rec = PyBytes_FromStringAndSize(NULL, size[2] + size[3]);
            if (!head || !rec) {
                Py_XDECREF(head);
                Py_XDECREF(rec);
                return -1;
            }
            unsigned char *h = (unsigned char *)PyBytes_AS_STRING(head);
            unsigned char *r = (unsigned char *)PyBytes_AS_STRING(rec);
            out[0] = put_ld(h, 0x0a, table, tlen);
            out[1] = out[0] + size[0];
            out[2] = r;
            out[3] = r + size[2];
        }
        Py_ssize_t pos = 0;
        unsigned char key;
        Span f;
        int got;
        while ((got = next_field(d, n, &pos, &key, &f)) == 1) {
            unsigned char to;
            int group;
            if (refresh_slot(key, &to, &group)) {
                if (pass == 0)
                    size[group] += 1 + varint_size((uint64_t)f.n) + f.n;
                else
                    out[group] = put_ld(out[group], to, f.p, f.n);
            }
        }
        if (got < 0) {
            Py_XDECREF(head);
            Py_XDECREF(rec);
            return 0;
        }
        if (pass == 1) {
            *head_out = head;
            *rec_out = rec;
            return 1;
        }
    }
    return 0; /* not reached */
}

static PyObject *refresh_record(PyObject *self, PyObject *args) {
    const unsigned char *table, *d;
    Py_ssize_t tlen, n;
    PyObject *head, *rec;
    if (!PyArg_ParseTuple(args, "y#y#", &table, &tlen, &d, &n)) return NULL;
    int got = refresh_pair(table, tlen, d, n, &head, &rec);
    if (got < 0) return NULL;
    if (got == 0) Py_RETURN_NONE;
    return Py_BuildValue("(NN)", head, rec);
}

/* refresh_run(tables, raws, stmts) -> int or None: the refreshes of rows raws[i] (bytes, or
 * None for a row absent here) of tables tables[i] (serialized TableMetadata; two lists of
 * the same length) added to stmts, a list of (head, [records]) tuples, as
 * conflict_wire.refresh_run_py adds them (the specification): each row's (head, record) by
 * refresh_record, the record appended to the last statement's list when that statement has
 * the same head, else a new (head, [record]) appended. Returns 1 when the first refresh
 * joined the statement stmts ended with (0 otherwise); None, with stmts possibly changed,
 * when a row is None or does not walk. */
static PyObject *refresh_run(PyObject *self, PyObject *args) {
    PyObject *tables, *raws, *stmts;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &tables, &PyList_Type, &raws,
                          &PyList_Type, &stmts))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(raws);
    if (PyList_GET_SIZE(tables) != n) {
        PyErr_SetString(PyExc_ValueError, "refresh_run: tables and raws differ in length");
        return NULL;
    }
    int joined_first = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(tables, i), *r = PyList_GET_ITEM(raws, i);
        if (r == Py_None) Py_RETURN_NONE;
        if (!PyBytes_Check(t) || !PyBytes_Check(r)) {
            PyErr_SetString(PyExc_TypeError, "refresh_run: tables and rows are bytes");
            return NULL;
        }
        PyObject *head, *rec;
        int got = refresh_pair((const unsigned char *)PyBytes_AS_STRING(t), PyBytes_GET_SIZE(t),
                               (const unsigned char *)PyBytes_AS_STRING(r), PyBytes_GET_SIZE(r),
                               &head, &rec);
        if (got < 0) return NULL;
        if (got == 0) Py_RETURN_NONE;
        Py_ssize_t m = PyList_GET_SIZE(stmts);
        PyObject *last = m ? PyList_GET_ITEM(stmts, m - 1) : NULL;
        int same = 0;
        if (last != NULL) {
            if (!PyTuple_Check(last) || PyTuple_GET_SIZE(last) != 2 ||
                !PyList_Check(PyTuple_GET_ITEM(last, 1))) {
                Py_DECREF(head);
                Py_DECREF(rec);
                PyErr_SetString(PyExc_TypeError, "refresh_run: a statement is (head, list)");
                return NULL;
            }
            same = PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 0), head, Py_EQ);
            if (same < 0) {
                Py_DECREF(head);
                Py_DECREF(rec);
                return NULL;
            }
        }
        int rc;
        if (same) {
            if (i == 0) joined_first = 1;
            rc = PyList_Append(PyTuple_GET_ITEM(last, 1), rec);
            Py_DECREF(head);
            Py_DECREF(rec);
        } else {
            PyObject *pair = Py_BuildValue("(N[N])", head, rec);
            if (pair == NULL) return NULL;
            rc = PyList_Append(stmts, pair);
            Py_DECREF(pair);
        }
        if (rc < 0) return NULL;
    }
    return PyLong_FromLong(joined_first);
}

/* exception_record(record, akey, nkeys, nvals, stored, fkey, picks, me, origin, epoch,
 *                  count, op, cause, transid, null) -> bytes or None
 *
 * The record of one $EX row as ExceptionRows.add assembles it once it has its plan
 * (gateway.node.state.conflict_wire, the specification): me, LD(0x0a, 0x20 varint(origin)),
 * epoch, LD(0x0a, 0x20 varint(count)), op, cause, transid (each copied as given), then each
 * key value (field 0x0a) of the serialized change `record` as LD(0x12, value), then per pick
 * LD(0x12, value): picks is 6 bytes per column -- source (0 the record's after values,
 * those of field `akey`; 1 the stored row's values, field 0x2a of `stored`; 2 `null`), the
 * Value key its column type takes, the index there (u32 little-endian). None (never an
 * error) whenever the specification could answer otherwise or the input is not what it
 * takes: a message that does not walk (message_fields' rules), a number of key values other
 * than nkeys or (akey != 0) of after values other than nvals, stored's fields (field 0x22)
 * not exactly `fkey` (a tuple of bytes; None with stored None), its values not as many, an
 * index out of range, an empty value or one whose first byte is neither 0x08 (null) nor
 * its column's key, origin or count not an int below 2**64. */
/* adds LD(key, payload of len) to *size; -1 on overflow */
static int add_ld_size(Py_ssize_t *size, Py_ssize_t len) {
    Py_ssize_t add = 1 + varint_size((uint64_t)len);
    if (len > PY_SSIZE_T_MAX - add || *size > PY_SSIZE_T_MAX - add - len) return -1;
    *size += add + len;
    return 0;
}

static unsigned char *put_uint_value(unsigned char *o, uint64_t v) {
    /* LD(0x0a, 0x20 varint(v)): a record's key value holding Value.uint_value */
    *o++ = 0x0a;
    *o++ = (unsigned char)(1 + varint_size(v));
    *o++ = 0x20;
    while (v >= 0x80) {
        *o++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *o++ = (unsigned char)v;
    return o;
}

/* exception_record's work once its arguments are read: the record as a new bytes object,
 * Py_None (a new reference) when the specification must decide, NULL on an error. The
 * stored row is sd[0:slen] when has_stored (else absent, and fkey must be None). */
static PyObject *build_exception(const unsigned char *rec, Py_ssize_t rlen, int akey,
                                 Py_ssize_t nkeys, Py_ssize_t nvals, int has_stored,
                                 const unsigned char *sd, Py_ssize_t slen, PyObject *fkey,
                                 const unsigned char *picks, Py_ssize_t plen,
                                 const unsigned char *me, Py_ssize_t melen, uint64_t origin,
                                 const unsigned char *ep, Py_ssize_t eplen, uint64_t count,
                                 const unsigned char *op, Py_ssize_t oplen,
                                 const unsigned char *cause, Py_ssize_t clen,
                                 const unsigned char *tid, Py_ssize_t tlen,
                                 const unsigned char *null, Py_ssize_t nlen) {
    if (nkeys < 0 || nvals < 0 || akey < 0 || akey > 0x7f || plen % 6 != 0
        || nkeys > rlen || nvals > rlen || rlen > PY_SSIZE_T_MAX / 64)
        Py_RETURN_NONE; /* each value takes at least two bytes of the record */
    Py_ssize_t nfk = 0;
    if (!has_stored) {
        sd = NULL;
        if (fkey != Py_None) Py_RETURN_NONE;
    } else {
        if (!PyTuple_Check(fkey)) Py_RETURN_NONE;
        nfk = PyTuple_GET_SIZE(fkey);
        if (nfk > slen || slen > PY_SSIZE_T_MAX / 64) Py_RETURN_NONE;
    }
    Span *spans = PyMem_Malloc(sizeof(Span) * (size_t)(nkeys + nvals + nfk + 1));
    if (!spans) return PyErr_NoMemory();
    Span *kv = spans, *av = spans + nkeys, *sv = spans + nkeys + nvals;
    PyObject *out = NULL;
    Py_ssize_t nk = 0, na = 0, nf = 0, ns = 0, pos = 0;
    unsigned char key;
    Span f;
    int got;
    while ((got = next_field(rec, rlen, &pos, &key, &f)) == 1) {
        if (key == 0x0a) {
            if (nk == nkeys) goto none;
            kv[nk++] = f;
        } else if (akey != 0 && key == akey) {
            if (na == nvals) goto none;
            av[na++] = f;
        }
    }
    if (got < 0 || nk != nkeys || (akey != 0 && na != nvals)) goto none;
    if (sd != NULL) {
        pos = 0;
        while ((got = next_field(sd, slen, &pos, &key, &f)) == 1) {
            if (key == 0x22) {
                if (nf == nfk) goto none;
                PyObject *want = PyTuple_GET_ITEM(fkey, nf);
                if (!PyBytes_Check(want) || PyBytes_GET_SIZE(want) != f.n
                    || memcmp(PyBytes_AS_STRING(want), f.p, (size_t)f.n) != 0)
                    goto none;
                nf++;
            } else if (key == 0x2a) {
                if (ns == nfk) goto none;
                sv[ns++] = f;
            }
        }
        if (got < 0 || nf != nfk || ns != nfk) goto none;
    }
    Py_ssize_t npicks = plen / 6;
    /* size: the copied parts, the two uint values, then every value */
    Py_ssize_t size = 0;
    Py_ssize_t fixed[5] = {melen, eplen, oplen, clen, tlen};
    for (int i = 0; i < 5; i++) {
        if (size > PY_SSIZE_T_MAX - 64 - fixed[i]) goto none;
        size += fixed[i];
    }
    size += 3 + varint_size(origin) + 3 + varint_size(count); /* LD(0x0a, 0x20 varint) */
    for (Py_ssize_t i = 0; i < nk; i++)
        if (add_ld_size(&size, kv[i].n) < 0) goto none;
    for (Py_ssize_t i = 0; i < npicks; i++) {
        const unsigned char *pk = picks + 6 * i;
        uint32_t j = (uint32_t)pk[2] | ((uint32_t)pk[3] << 8) | ((uint32_t)pk[4] << 16)
                     | ((uint32_t)pk[5] << 24);
        Span v;
        if (pk[0] == 0) {
            if (akey == 0 || (Py_ssize_t)j >= na) goto none;
            v = av[j];
        } else if (pk[0] == 1) {
            if ((Py_ssize_t)j >= ns) goto none;
            v = sv[j];
        } else if (pk[0] == 2) {
            v.p = null;
            v.n = nlen;
        } else {
            goto none;
        }
        if (v.n == 0 || (v.p[0] != 0x08 && v.p[0] != pk[1])) goto none;
        if (add_ld_size(&size, v.n) < 0) goto none;
    }
    out = PyBytes_FromStringAndSize(NULL, size);
    if (!out) {
        PyMem_Free(spans);
        return NULL;
    }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(o, me, (size_t)melen);
    o = put_uint_value(o + melen, origin);
    memcpy(o, ep, (size_t)eplen);
    o = put_uint_value(o + eplen, count);
    memcpy(o, op, (size_t)oplen);
    o += oplen;
    memcpy(o, cause, (size_t)clen);
    o += clen;
    memcpy(o, tid, (size_t)tlen);
    o += tlen;
    for (Py_ssize_t i = 0; i < nk; i++) o = put_ld(o, 0x12, kv[i].p, kv[i].n);
    for (Py_ssize_t i = 0; i < npicks; i++) {
        const unsigned char *pk = picks + 6 * i;
        uint32_t j = (uint32_t)pk[2] | ((uint32_t)pk[3] << 8) | ((uint32_t)pk[4] << 16)
                     | ((uint32_t)pk[5] << 24);
        if (pk[0] == 0)
            o = put_ld(o, 0x12, av[j].p, av[j].n);
        else if (pk[0] == 1)
            o = put_ld(o, 0x12, sv[j].p, sv[j].n);
        else
            o = put_ld(o, 0x12, null, nlen);
    }
    PyMem_Free(spans);
    return out;
none:
    PyMem_Free(spans);
    Py_RETURN_NONE;
}


static PyObject *exception_record(PyObject *self, PyObject *args) {
    const unsigned char *rec, *picks, *me, *ep, *op, *cause, *tid, *null;
    Py_ssize_t rlen, plen, melen, eplen, oplen, clen, tlen, nlen, nkeys, nvals;
    int akey;
    PyObject *stored, *fkey, *origin_o, *count_o;
    if (!PyArg_ParseTuple(args, "y#innOOy#y#Oy#Oy#y#y#y#", &rec, &rlen, &akey, &nkeys, &nvals,
                          &stored, &fkey, &picks, &plen, &me, &melen, &origin_o, &ep, &eplen,
                          &count_o, &op, &oplen, &cause, &clen, &tid, &tlen, &null, &nlen))
        return NULL;
    if (!PyLong_Check(origin_o) || !PyLong_Check(count_o)) Py_RETURN_NONE;
    uint64_t origin = (uint64_t)PyLong_AsUnsignedLongLong(origin_o);
    if (origin == (uint64_t)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    uint64_t count = (uint64_t)PyLong_AsUnsignedLongLong(count_o);
    if (count == (uint64_t)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (stored != Py_None && !PyBytes_Check(stored)) Py_RETURN_NONE;
    int has = stored != Py_None;
    return build_exception(rec, rlen, akey, nkeys, nvals, has,
                           has ? (const unsigned char *)PyBytes_AS_STRING(stored) : NULL,
                           has ? PyBytes_GET_SIZE(stored) : 0, fkey, picks, plen, me, melen,
                           origin, ep, eplen, count, op, oplen, cause, clen, tid, tlen, null,
                           nlen);
}

/* Where kv_type keeps its __slots__ "_records" and "_r" (slot_offsets_of). */
static int kv_offsets(PyTypeObject *cls, Py_ssize_t off[2]) {
    static const char *const names[2] = {"_records", "_r"};
    return slot_offsets_of((PyObject *)cls, names, 2, off);
}

/* kv_type(records, r): filled slot by slot when kv_offsets found them, else called. */
static PyObject *key_values(PyTypeObject *cls, int slots, const Py_ssize_t off[2],
                            PyObject *records, Py_ssize_t r) {
    PyObject *n = PyLong_FromSsize_t(r);
    if (!n) return NULL;
    if (!slots) {
        PyObject *o = PyObject_CallFunctionObjArgs((PyObject *)cls, records, n, NULL);
        Py_DECREF(n);
        return o;
    }
    PyObject *o = cls->tp_alloc(cls, 0);
    if (!o) {
        Py_DECREF(n);
        return NULL;
    }
    Py_INCREF(records);
    *(PyObject **)((char *)o + off[0]) = records;
    *(PyObject **)((char *)o + off[1]) = n;
    return o;
}

/* The value of a store cell `c` as conflict_wire.read_row reads it (lsm.format.value_of; None:
 * no cell): 1 and its span; 2 and an empty span for a cell shorter than its metadata (value_of
 * gives b"" for it); 0 for None or a tombstone; -1 when c is not bytes or is empty. */
static int cell_value(PyObject *c, const unsigned char **v, Py_ssize_t *n) {
    if (c == Py_None) return 0;
    if (!PyBytes_Check(c) || PyBytes_GET_SIZE(c) < 1) return -1;
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(c);
    Py_ssize_t cn = PyBytes_GET_SIZE(c);
    if (d[0] == 0) {
        *v = d + 1;
        *n = cn - 1;
        return 1;
    }
    if (d[0] & FLAG_TOMBSTONE) return 0;
    if (cn < 21) {
        *v = d + cn;
        *n = 0;
        return 2;
    }
    *v = d + 21;
    *n = cn - 21;
    return 1;
}

/* exception_run(verdicts, flags, i, end, first, body, rkeys, overlay, cells, akey, nkeys,
 *               nvals, last_absent, last_stored, me, origin, epoch, count, op, causes,
 *               transid, null, statements, gone, s_no, seen, refresh, table, key_fields,
 *               records, kv_type)
 *     -> (i, count, conflicts, first_conflict)
 *
 * The rows not applied (flags[i] == 1) of one ruled statement -- rows first..end-1 of the
 * epoch, `body` its serialized InsertStatement / UpdateStatement / DeleteStatement, whose
 * records (field 4) are the rows in order -- from row i on, as the loop of
 * epoch_judge._judged_wire (the specification) takes them while each row's exception record
 * is ExceptionRows.add's fast path (exception_record with the shape's last plan):
 *   - row i joins `gone` as (s_no, i - first);
 *   - with a cause (bits 1-3 of verdicts[i]) its $EX record is built with the plan
 *     last_stored = (fkey, head, packed) when the row existed (bit 7; the stored Row is
 *     overlay[key] when key is in `overlay`, else value_of(cells[key])), else last_absent,
 *     numbered count + 1, the cause's text causes[cause], and appended to `statements` (a
 *     list of (head, [records]): joining the last when its head is equal);
 *   - with the refresh bit (4), unless its key is in `seen` (it then joins it), `refresh`
 *     gets (key, table, key_fields, kv_type(records, i - first)): kv_type a class whose
 *     __slots__ "_records" and "_r" are filled as its __init__ would (it is called when they
 *     are not plain slots).
 * It stops before the first row it cannot take that way -- no plan, exception_record's
 * None, a key in neither overlay nor cells, a record missing -- leaving that row untouched,
 * and returns its index (the caller takes it), or the first row not applied at or past
 * `end`, or -1 when no row is left. count: the records numbered so far; conflicts: the rows
 * with a cause taken; first_conflict: the first of them (-1: none). */
static PyObject *exception_run(PyObject *self, PyObject *args) {
    const unsigned char *verd, *flags, *bd, *me, *ep, *op, *tid, *null;
    Py_ssize_t vlen, flen, blen, melen, eplen, oplen, tlen, nlen, i, end, first, nkeys, nvals,
        s_no;
    int akey;
    PyObject *rkeys, *overlay, *cells, *last_absent, *last_stored, *origin_o, *count_o,
        *causes, *statements, *gone, *seen, *refresh, *table, *key_fields, *records, *kv_type;
    if (!PyArg_ParseTuple(args, "y#y#nnny#O!O!O!innOOy#Oy#Oy#O!y#y#O!O!nO!O!OOOO!", &verd,
                          &vlen, &flags, &flen, &i, &end, &first, &bd, &blen, &PyList_Type,
                          &rkeys, &PyDict_Type, &overlay, &PyDict_Type, &cells, &akey, &nkeys,
                          &nvals, &last_absent, &last_stored, &me, &melen, &origin_o, &ep,
                          &eplen, &count_o, &op, &oplen, &PyTuple_Type, &causes, &tid, &tlen,
                          &null, &nlen, &PyList_Type, &statements, &PySet_Type, &gone, &s_no,
                          &PySet_Type, &seen, &PyList_Type, &refresh, &table, &key_fields,
                          &records, &PyType_Type, &kv_type))
        return NULL;
    Py_ssize_t kv_off[2];
    int kv_slots = kv_offsets((PyTypeObject *)kv_type, kv_off);
    uint64_t origin = (uint64_t)PyLong_AsUnsignedLongLong(origin_o);
    if (origin == (uint64_t)-1 && PyErr_Occurred()) return NULL;
    uint64_t count = (uint64_t)PyLong_AsUnsignedLongLong(count_o);
    if (count == (uint64_t)-1 && PyErr_Occurred()) return NULL;
    Py_ssize_t nk = PyList_GET_SIZE(rkeys);
    if (flen != vlen || end > vlen || end > nk || first < 0 || first > end || i < 0
        || PyTuple_GET_SIZE(causes) != 4) {
        PyErr_SetString(PyExc_ValueError, "exception_run: inconsistent arguments");
        return NULL;
    }
    const unsigned char *plans[2] = {NULL, NULL};
    Py_ssize_t plens[2] = {0, 0};
    PyObject *fkeys[2] = {NULL, NULL}, *heads[2] = {NULL, NULL};
    PyObject *lasts[2] = {last_absent, last_stored};
    for (int k = 0; k < 2; k++) {
        PyObject *l = lasts[k];
        if (l == Py_None) continue;
        if (!PyTuple_Check(l) || PyTuple_GET_SIZE(l) != 3
            || !PyBytes_Check(PyTuple_GET_ITEM(l, 2))) {
            PyErr_SetString(PyExc_TypeError, "a last plan is (fkey, head, packed)");
            return NULL;
        }
        fkeys[k] = PyTuple_GET_ITEM(l, 0);
        heads[k] = PyTuple_GET_ITEM(l, 1);
        plans[k] = (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(l, 2));
        plens[k] = PyBytes_GET_SIZE(PyTuple_GET_ITEM(l, 2));
    }
    /* the statement's records, in order */
    Py_ssize_t want = end - first, nrec = 0, pos = 0;
    Span *recs = PyMem_Malloc(sizeof(Span) * (size_t)(want + 1));
    if (!recs) return PyErr_NoMemory();
    unsigned char key;
    Span f;
    int got;
    while (nrec < want && (got = next_field(bd, blen, &pos, &key, &f)) == 1)
        if (key == 0x22) recs[nrec++] = f;
    Py_ssize_t conflicts = 0, first_conflict = -1;
    PyObject *res = NULL;
    while (i >= 0 && i < end) {
        unsigned char v = verd[i];
        int cause = (v >> 1) & 7;
        Py_ssize_t r = i - first;
        PyObject *k = PyList_GET_ITEM(rkeys, i);
        if (r < 0 || r >= nrec) break;
        if (cause) {
            if (cause > 3) break;
            int has = (v & 128) != 0;
            const unsigned char *sd = NULL;
            Py_ssize_t slen = 0;
            if (has) {
                PyObject *row = PyDict_GetItemWithError(overlay, k);
                if (row == NULL) {
                    if (PyErr_Occurred()) goto error;
                    PyObject *c = PyDict_GetItemWithError(cells, k);
                    if (c == NULL) {
                        if (PyErr_Occurred()) goto error;
                        break; /* not read here: the caller reads it */
                    }
                    int got = cell_value(c, &sd, &slen);
                    if (got < 0 || got == 2) break; /* not a cell, or cut short: Python's */
                    has = got;
                } else if (row == Py_None) {
                    has = 0;
                } else {
                    if (!PyBytes_Check(row)) break;
                    sd = (const unsigned char *)PyBytes_AS_STRING(row);
                    slen = PyBytes_GET_SIZE(row);
                }
            }
            if (plans[has] == NULL) break;
            PyObject *ctext = PyTuple_GET_ITEM(causes, cause);
            if (!PyBytes_Check(ctext)) break;
            PyObject *rec = build_exception(
                recs[r].p, recs[r].n, akey, nkeys, nvals, has, sd, slen, fkeys[has],
                plans[has], plens[has], me, melen, origin, ep, eplen, count + 1, op, oplen,
                (const unsigned char *)PyBytes_AS_STRING(ctext), PyBytes_GET_SIZE(ctext), tid,
                tlen, null, nlen);
            if (rec == NULL) goto error;
            if (rec == Py_None) {
                Py_DECREF(rec);
                break;
            }
            /* _append: joins the last statement when its head is the same */
            Py_ssize_t ns = PyList_GET_SIZE(statements);
            int same = 0;
            if (ns > 0) {
                PyObject *last = PyList_GET_ITEM(statements, ns - 1);
                if (!PyTuple_Check(last) || PyTuple_GET_SIZE(last) != 2
                    || !PyBytes_Check(PyTuple_GET_ITEM(last, 0)) || !PyBytes_Check(heads[has])
                    || !PyList_Check(PyTuple_GET_ITEM(last, 1))) {
                    Py_DECREF(rec);
                    PyErr_SetString(PyExc_TypeError,
                                    "statements holds (head, [records]), heads are bytes");
                    goto error;
                }
                same = PyObject_RichCompareBool(PyTuple_GET_ITEM(last, 0), heads[has], Py_EQ);
                if (same < 0 || (same && PyList_Append(PyTuple_GET_ITEM(last, 1), rec) < 0)) {
                    Py_DECREF(rec);
                    goto error;
                }
            }
            if (!same) {
                PyObject *lst = PyList_New(1);
                if (!lst) {
                    Py_DECREF(rec);
                    goto error;
                }
                Py_INCREF(rec);
                PyList_SET_ITEM(lst, 0, rec);
                PyObject *t = PyTuple_Pack(2, heads[has], lst);
                Py_DECREF(lst);
                if (!t || PyList_Append(statements, t) < 0) {
                    Py_XDECREF(t);
                    Py_DECREF(rec);
                    goto error;
                }
                Py_DECREF(t);
            }
            Py_DECREF(rec);
            count++;
            conflicts++;
            if (first_conflict < 0) first_conflict = i;
        }
        PyObject *where = Py_BuildValue("(nn)", s_no, r);
        if (!where || PySet_Add(gone, where) < 0) {
            Py_XDECREF(where);
            goto error;
        }
        Py_DECREF(where);
        if (v & 16) {
            int in = PySet_Contains(seen, k);
            if (in < 0) goto error;
            if (!in) {
                PyObject *kv = key_values((PyTypeObject *)kv_type, kv_slots, kv_off, records, r);
                PyObject *t = kv ? PyTuple_Pack(4, k, table, key_fields, kv) : NULL;
                Py_XDECREF(kv);
                if (!t || PySet_Add(seen, k) < 0 || PyList_Append(refresh, t) < 0) {
                    Py_XDECREF(t);
                    goto error;
                }
                Py_DECREF(t);
            }
        }
        const unsigned char *nx = memchr(flags + i + 1, 1, (size_t)(flen - i - 1));
        i = nx ? (Py_ssize_t)(nx - flags) : -1;
    }
    res = Py_BuildValue("(nKnn)", i, (unsigned long long)count, conflicts, first_conflict);
error:
    PyMem_Free(recs);
    return res;
}

/* read_rows(keys, overlay, cells, get) -> [row, ...]
 *
 * conflict_wire.read_row of each key, in order (its specification): overlay[key] when key
 * is in the dict `overlay` (bytes or None), else, when key is in the dict `cells`, None for a
 * None or tombstone cell and the cell's value otherwise (the LSM cell format: a flags byte,
 * then the value, or with FLAG_META 20 bytes of metadata before it), else get(key). */
static PyObject *read_rows(PyObject *self, PyObject *args) {
    PyObject *keys, *overlay, *cells, *get;
    if (!PyArg_ParseTuple(args, "O!O!O!O", &PyList_Type, &keys, &PyDict_Type, &overlay,
                          &PyDict_Type, &cells, &get))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        PyObject *v = PyDict_GetItemWithError(overlay, k);
        if (v != NULL) {
            Py_INCREF(v);
        } else if (PyErr_Occurred()) {
            goto error;
        } else {
            PyObject *c = PyDict_GetItemWithError(cells, k);
            if (c == NULL) {
                if (PyErr_Occurred()) goto error;
                Py_INCREF(k); /* get may run any code: keep the key alive through it */
                v = PyObject_CallOneArg(get, k);
                Py_DECREF(k);
                if (v == NULL) goto error;
            } else {
                const unsigned char *cv = NULL;
                Py_ssize_t cn = 0;
                int got = cell_value(c, &cv, &cn);
                if (got < 0) {
                    PyErr_SetString(PyExc_ValueError, "read_rows: a cell is not a cell");
                    goto error;
                }
                v = got ? PyBytes_FromStringAndSize((const char *)cv, cn) : Py_NewRef(Py_None);
                if (v == NULL) goto error;
            }
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

/* statement_bytes(head, records) -> bytes: a serialized Statement holding the insert whose
 * fields 1-3 are serialized in `head` and whose records are the serialized InsertRecords in
 * `records` (a list of bytes): 0x0A, the insert's length, head, then per record 0x22, its
 * length, the record; lengths as minimal varints. statements_bytes(stmts) -> bytes: each
 * (head, records) of the list `stmts` so, each as a Transaction's statements field (0x32,
 * length, the statement), joined. conflict_wire.statement_bytes_py / statements_bytes_py
 * are the specification. */
static int insert_size(PyObject *head, PyObject *records, Py_ssize_t *body) {
    if (!PyBytes_Check(head) || !PyList_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "a statement is (bytes, list of bytes)");
        return -1;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(head);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *r = PyList_GET_ITEM(records, i);
        if (!PyBytes_Check(r)) {
            PyErr_SetString(PyExc_TypeError, "a record is bytes");
            return -1;
        }
        if (add_ld_size(&size, PyBytes_GET_SIZE(r)) < 0) goto overflow;
    }
    *body = size;
    return 0;
overflow:
    PyErr_SetString(PyExc_OverflowError, "statement too large");
    return -1;
}

static unsigned char *put_insert(unsigned char *o, PyObject *head, PyObject *records,
                                 Py_ssize_t body) {
    o = put_len(o, 0x0A, body);
    memcpy(o, PyBytes_AS_STRING(head), (size_t)PyBytes_GET_SIZE(head));
    o += PyBytes_GET_SIZE(head);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *r = PyList_GET_ITEM(records, i);
        o = put_ld(o, 0x22, (const unsigned char *)PyBytes_AS_STRING(r), PyBytes_GET_SIZE(r));
    }
    return o;
}

static PyObject *statement_bytes(PyObject *self, PyObject *args) {
    PyObject *head, *records;
    Py_ssize_t body, size = 0;
    if (!PyArg_ParseTuple(args, "OO", &head, &records)) return NULL;
    if (insert_size(head, records, &body) < 0) return NULL;
    if (add_ld_size(&size, body) < 0) {
        PyErr_SetString(PyExc_OverflowError, "statement too large");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    put_insert((unsigned char *)PyBytes_AS_STRING(out), head, records, body);
    return out;
}

static PyObject *statements_bytes(PyObject *self, PyObject *stmts) {
    if (!PyList_Check(stmts)) {
        PyErr_SetString(PyExc_TypeError, "statements_bytes takes a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(stmts), size = 0;
    Py_ssize_t *bodies = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
    if (bodies == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *st = PyList_GET_ITEM(stmts, i);
        Py_ssize_t inner = 0;
        if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) != 2) {
            PyErr_SetString(PyExc_TypeError, "a statement is (bytes, list of bytes)");
            goto error;
        }
        if (insert_size(PyTuple_GET_ITEM(st, 0), PyTuple_GET_ITEM(st, 1), &bodies[i]) < 0)
            goto error;
        if (add_ld_size(&inner, bodies[i]) < 0 || add_ld_size(&size, inner) < 0) {
            PyErr_SetString(PyExc_OverflowError, "statements too large");
            goto error;
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) goto error;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *st = PyList_GET_ITEM(stmts, i);
        Py_ssize_t inner = 1 + varint_size((uint64_t)bodies[i]) + bodies[i];
        o = put_len(o, 0x32, inner);
        o = put_insert(o, PyTuple_GET_ITEM(st, 0), PyTuple_GET_ITEM(st, 1), bodies[i]);
    }
    PyMem_Free(bodies);
    return out;
error:
    PyMem_Free(bodies);
    return NULL;
}

static PyMethodDef methods[] = {
    {"epoch_verdicts", epoch_verdicts, METH_VARARGS,
     "Verdicts of an epoch's ruled row changes under NDB$EPOCH / NDB$EPOCH2 (see the file)."},
    {"message_fields", message_fields, METH_O,
     "The top-level fields of a serialized message as (key, payload) (see the file)."},
    {"records_without", records_without, METH_VARARGS,
     "A statement body's bytes without some of its records (see the file)."},
    {"refresh_record", refresh_record, METH_VARARGS,
     "The refresh insert's head and record of a stored row (see the file)."},
    {"refresh_run", refresh_run, METH_VARARGS,
     "The refresh statements of stored rows added to a statement list (see the file)."},
    {"exception_record", exception_record, METH_VARARGS,
     "The record of one $EX row from the change's and the stored row's bytes (see the file)."},
    {"read_rows", read_rows, METH_VARARGS,
     "conflict_wire.read_row of each key (see the file)."},
    {"statement_bytes", statement_bytes, METH_VARARGS,
     "A serialized insert Statement from its head and records (see the file)."},
    {"statements_bytes", statements_bytes, METH_O,
     "Insert statements serialized as a Transaction's statements fields (see the file)."},
    {"exception_run", exception_run, METH_VARARGS,
     "The $EX records, gone rows and refreshes of a statement's rejected rows (see the file)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_judge", "C accelerator for gateway.node.state.epoch_judge.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__judge(void) { return PyModule_Create(&module); }
