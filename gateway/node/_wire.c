/* Optional C accelerator for the node's wire paths (gateway.node.state.wire, the specification of
 * every function here; the peer codec and the appliers' feed have their own C files,
 * _peer_codec.c and _feed.c, as they have their own Python modules).
 *
 * insert_rows(data, pos, end, prefix, head, mid, tail, epoch, author, commit_ts)
 *
 * Walks the InsertRecord fields (INSERT_STATEMENT_RECORDS_KEY) of one serialized
 * InsertStatement from data[pos] to data[end] and returns a list of store operations (key, row,
 * epoch, author, commit_ts):
 *
 *   key = prefix + key_part(v) for every key value v (INSERT_RECORD_KEY_VALUES)
 *   row = head + (ROW_KEY_VALUES_KEY + len + v for every key value) + mid
 *              + (ROW_VALUES_KEY + len + v for every after value) + tail
 *
 * exactly what gateway.node.state.wire.insert_rows_py builds (the specification). Field keys and
 * numbers are the names of gateway/v1/wire_tags.h (generated from the .proto files). Returns
 * None when the bytes need the general path: another field in a record, a key value that is
 * null or not exactly one value field, a varint or length running past the record.
 * Never reads outside data[pos:end] (which must lie inside data).
 *
 * parse_txn(data): the header fields of a transaction entry payload
 * (gateway.node.state.state_machine._parse_txn_py).
 *
 * meta_parts(keys, sid, tid, epoch, author, commit_ts, index) -> (gtid, tail, result): one
 * transaction's serialized Gtid, Row fields 6-10 and WriteResult (gateway.node.state.wire.meta_parts,
 * the specification); keys holds the 11 one-byte field keys in the order of _META_KEYS there.
 *
 * encode_txn(keys, sid, tid, epoch, author, start_ns, commit_ns, statements, idem) and
 * frame(key, parts): the leader's transaction entry payload and the framing of its serialized
 * statements (gateway.node.state.wire.encode_transaction_wire_py, frame_statements_py).
 *
 * frame_writes(keys, data, batch): the statements of every write of a serialized
 * WriteBatchRequest (or of one WriteRequest) framed as a transaction's statements field
 * (gateway.node.state.wire.frame_writes_py); frame_writes_flagged(keys, data, batch) also
 * names the writes that carry conditions (frame_writes_flagged_py).
 *
 * txn_head(keys, data): the admission header of a transaction entry whole in one segment
 * (gateway.node.state.wire.txn_head_py; _txnhead.h, shared with _feed.c).
 *
 * header_span(keys, data, start, end): the walk of an insert statement's header shared by the
 * leader's wire check and the apply fast path (gateway.node.state.wire.insert_header_span_py).
 *
 * check_records(raw, pos, end, kcodes, vcodes) -> bool: the leader's per-record check of an
 * insert statement of a known shape -- each value's case and, for DOUBLE, UUID, DATE, TIME
 * and DATETIME columns, its type's rule (gateway.node.base.validation._check_records_py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../core/_buf.h"
#include "../core/_protowire.h"
#include "../v1/wire_tags.h"
#include "_keyvalues.h"
#include "_txnhead.h"

static PyObject *insert_rows(PyObject *self, PyObject *args) {
    Py_buffer data, prefix, head, mid, tail;
    Py_ssize_t pos, end;
    PyObject *epoch, *author, *commit_ts;
    if (!PyArg_ParseTuple(args, "y*nny*y*y*y*OOO", &data, &pos, &end, &prefix, &head, &mid,
                          &tail, &epoch, &author, &commit_ts))
        return NULL;
    PyObject *out = NULL, *result = NULL;
    Buf kb = {0}, kv = {0}, vals = {0};
    const unsigned char *d = data.buf;
    if (pos < 0 || end > data.len || pos > end) {
        PyErr_SetString(PyExc_ValueError, "insert_rows: range outside the data");
        goto done;
    }
    out = PyList_New(0);
    if (!out) goto done;
    while (pos < end) {
        uint64_t ln;
        if (d[pos] != INSERT_STATEMENT_RECORDS_KEY) goto general;
        Py_ssize_t p = pos + 1;
        if (read_varint(d, &p, end, &ln) < 0 || ln > (uint64_t)(end - p)) goto general;
        Py_ssize_t r_end = p + (Py_ssize_t)ln;
        kb.len = kv.len = vals.len = 0;
        if (buf_put(&kb, prefix.buf, prefix.len) < 0) goto done;
        while (p < r_end) {
            unsigned char tag = d[p];
            Py_ssize_t f = p + 1, v_start;
            uint64_t vl;
            if (read_varint(d, &f, r_end, &vl) < 0 || vl > (uint64_t)(r_end - f)) goto general;
            v_start = f;
            Py_ssize_t v_end = v_start + (Py_ssize_t)vl;
            if (tag == INSERT_RECORD_KEY_VALUES_KEY) {
                int r = key_part(d, v_start, v_end, &kb);
                if (r < 0) goto done;
                if (r == 0) goto general;
                unsigned char t = ROW_KEY_VALUES_KEY;
                if (buf_put(&kv, &t, 1) < 0 || buf_put(&kv, d + p + 1, v_end - p - 1) < 0)
                    goto done;
            } else if (tag == INSERT_RECORD_AFTER_VALUES_KEY) {
                unsigned char t = ROW_VALUES_KEY;
                if (buf_put(&vals, &t, 1) < 0 || buf_put(&vals, d + p + 1, v_end - p - 1) < 0)
                    goto done;
            } else {
                goto general;
            }
            p = v_end;
        }
        Py_ssize_t rlen = head.len + kv.len + mid.len + vals.len + tail.len;
        PyObject *key = PyBytes_FromStringAndSize(kb.buf, kb.len);
        PyObject *row = PyBytes_FromStringAndSize(NULL, rlen);
        if (!key || !row) { Py_XDECREF(key); Py_XDECREF(row); goto done; }
        char *w = PyBytes_AS_STRING(row);
        memcpy(w, head.buf, (size_t)head.len); w += head.len;
        if (kv.len) { memcpy(w, kv.buf, (size_t)kv.len); w += kv.len; }
        memcpy(w, mid.buf, (size_t)mid.len); w += mid.len;
        if (vals.len) { memcpy(w, vals.buf, (size_t)vals.len); w += vals.len; }
        memcpy(w, tail.buf, (size_t)tail.len);
        PyObject *op = PyTuple_Pack(5, key, row, epoch, author, commit_ts);
        Py_DECREF(key);
        Py_DECREF(row);
        if (!op) goto done;
        int bad = PyList_Append(out, op);
        Py_DECREF(op);
        if (bad < 0) goto done;
        pos = r_end;
    }
    result = out;
    out = NULL;
    goto done;
general:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    Py_XDECREF(out);
    PyMem_Free(kb.buf);
    PyMem_Free(kv.buf);
    PyMem_Free(vals.buf);
    PyBuffer_Release(&data);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&head);
    PyBuffer_Release(&mid);
    PyBuffer_Release(&tail);
    return result;
}


/* check_records(raw, pos, end, kcodes, vcodes) -> bool: see
 * gateway.node.base.validation._check_records_py (the specification). */
static PyObject *check_records(PyObject *self, PyObject *args) {
    Py_buffer raw, kt, vt;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "y*nny*y*", &raw, &pos, &end, &kt, &vt)) return NULL;
    const unsigned char *d = raw.buf, *kcodes = kt.buf, *vcodes = vt.buf;
    Py_ssize_t nk = kt.len, nv = vt.len;
    int ok = 1;
    if (pos < 0 || end > raw.len || pos > end) {
        PyBuffer_Release(&raw);
        PyBuffer_Release(&kt);
        PyBuffer_Release(&vt);
        PyErr_SetString(PyExc_ValueError, "check_records: range outside the data");
        return NULL;
    }
    while (ok && pos < end) {
        uint64_t ln;
        Py_ssize_t r = pos + 1;
        if (d[pos] != INSERT_STATEMENT_RECORDS_KEY || read_varint(d, &r, end, &ln) < 0
            || ln > (uint64_t)(end - r)) {
            ok = 0;
            break;
        }
        Py_ssize_t r_end = r + (Py_ssize_t)ln, i = 0;
        while (r < r_end) {
            unsigned char tag = d[r], code;
            Py_ssize_t v = r + 1;
            uint64_t vl;
            if (read_varint(d, &v, r_end, &vl) < 0 || vl > (uint64_t)(r_end - v) || vl == 0) {
                ok = 0;
                break;
            }
            Py_ssize_t v_end = v + (Py_ssize_t)vl;
            unsigned char got = d[v];
            if (i < nk) {
                code = kcodes[i];
                if (tag != INSERT_RECORD_KEY_VALUES_KEY || got != tag_of_code(code)) {
                    ok = 0;
                    break;
                }
            } else if (i < nk + nv) {
                code = vcodes[i - nk];
                if (tag != INSERT_RECORD_AFTER_VALUES_KEY
                    || (got != tag_of_code(code) && got != VALUE_NULL_VALUE_KEY)) {
                    ok = 0;
                    break;
                }
            } else {
                ok = 0;
                break;
            }
            if (!single_field(d, v, v_end, got)) { ok = 0; break; }
            if (got != VALUE_NULL_VALUE_KEY && !value_ok(d, v, v_end, code, i < nk)) { ok = 0; break; }
            i++;
            r = v_end;
        }
        if (ok && i != nk + nv) ok = 0;
        pos = r_end;
    }
    PyBuffer_Release(&raw);
    PyBuffer_Release(&kt);
    PyBuffer_Release(&vt);
    return PyBool_FromLong(ok);
}

/* parse_txn(data) -> (sid, tid, epoch, author, commit_ts, [(start, end), ...], idem) | None:
 * see gateway.node.state.state_machine._parse_txn_py (the specification). */
static PyObject *parse_txn(PyObject *self, PyObject *arg) {
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *d = buf.buf;
    Py_ssize_t n = buf.len, pos = 1;
    uint64_t sid = 0, tid = 0, epoch = 0, author = 0, commit_ts = 0, v;
    Py_ssize_t idem_start = -1, idem_end = -1;
    PyObject *stmts = PyList_New(0), *result = NULL, *idem = NULL;
    if (!stmts) goto done;
    if (n < 1) goto general;
    while (pos < n) {
        unsigned char tag = d[pos++];
        switch (tag & 7) {
        case 0:
            if (read_varint(d, &pos, n, &v) < 0) goto general;
            if (tag == TRANSACTION_EPOCH_KEY) epoch = v;
            else if (tag == TRANSACTION_AUTHOR_KEY) author = v;
            else if (tag != TRANSACTION_SEGMENT_ID_KEY && tag != TRANSACTION_END_SEGMENT_KEY)
                goto general;
            break;
        case 2: {
            if (read_varint(d, &pos, n, &v) < 0 || v > (uint64_t)(n - pos)) goto general;
            Py_ssize_t end = pos + (Py_ssize_t)v;
            if (tag == TRANSACTION_STATEMENTS_KEY) {
                PyObject *span = Py_BuildValue("(nn)", pos, end);
                if (!span) goto done;
                int bad = PyList_Append(stmts, span);
                Py_DECREF(span);
                if (bad < 0) goto done;
            } else if (tag == TRANSACTION_GTID_KEY) {
                Py_ssize_t p = pos;
                while (p < end) {
                    unsigned char t = d[p++];
                    if (read_varint(d, &p, end, &v) < 0) goto general;
                    if (t == GTID_SERVER_ID_KEY) sid = v;
                    else if (t == GTID_TRANS_ID_KEY) tid = v;
                    else goto general;
                }
            } else if (tag == TRANSACTION_IDEMPOTENCY_KEY_KEY) {
                idem_start = pos;
                idem_end = end;
            } else {
                goto general;
            }
            pos = end;
            break;
        }
        case 1:
            if (n - pos < 8) goto general;
            if (tag == TRANSACTION_COMMIT_TIMESTAMP_NS_KEY) {
                commit_ts = 0;
                for (int i = 7; i >= 0; i--) commit_ts = (commit_ts << 8) | d[pos + i];
            } else if (tag != TRANSACTION_START_TIMESTAMP_NS_KEY) {
                goto general;
            }
            pos += 8;
            break;
        default:
            goto general;
        }
    }
    if (idem_start >= 0) {
        idem = PyUnicode_DecodeUTF8((const char *)d + idem_start, idem_end - idem_start, NULL);
        if (!idem) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto done;
            PyErr_Clear();
            goto general;
        }
    } else {
        idem = PyUnicode_FromStringAndSize("", 0);
        if (!idem) goto done;
    }
    result = Py_BuildValue("(KKKKKOO)", (unsigned long long)sid, (unsigned long long)tid,
                           (unsigned long long)epoch, (unsigned long long)author,
                           (unsigned long long)commit_ts, stmts, idem);
    goto done;
general:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    Py_XDECREF(stmts);
    Py_XDECREF(idem);
    PyBuffer_Release(&buf);
    return result;
}

/* The n Python ints o[i] as unsigned 64-bit numbers: 0, or -1 with OverflowError below 0 or
 * above 2**64-1 (never a wrap). */
static int u64_args(PyObject **o, unsigned long long *v, int n) {
    for (int i = 0; i < n; i++) {
        v[i] = PyLong_AsUnsignedLongLong(o[i]);
        if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* A serialized Gtid (fields server_id, trans_id with keys ksid, ktid; 0 = absent) into g (at
 * least 22 bytes); its length. */
static Py_ssize_t put_gtid(unsigned char *g, unsigned char ksid, unsigned char ktid,
                           unsigned long long sid, unsigned long long tid) {
    Py_ssize_t gl = 0;
    if (sid) { g[gl++] = ksid; gl += put_varint(g + gl, sid); }
    if (tid) { g[gl++] = ktid; gl += put_varint(g + gl, tid); }
    return gl;
}

static PyObject *meta_parts(PyObject *self, PyObject *args) {
    const unsigned char *k;
    Py_ssize_t klen;
    PyObject *o[6];
    unsigned long long v[6];
    if (!PyArg_ParseTuple(args, "y#OOOOOO", &k, &klen, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]))
        return NULL;
    if (u64_args(o, v, 6) < 0) return NULL;
    unsigned long long sid = v[0], tid = v[1], epoch = v[2], author = v[3], ts = v[4],
                       index = v[5];
    if (klen != 11) {
        PyErr_SetString(PyExc_ValueError, "meta_parts: expected 11 one-byte field keys");
        return NULL;
    }
    unsigned char g[24], ev[10], av[10], iv[10], tsb[8], t[80], r[64];
    Py_ssize_t tl = 0, rl = 0;
    Py_ssize_t el = epoch ? put_varint(ev, epoch) : 0;
    Py_ssize_t al = author ? put_varint(av, author) : 0;
    Py_ssize_t il = index ? put_varint(iv, index) : 0;
    Py_ssize_t gl = put_gtid(g, k[0], k[1], sid, tid);
    for (int i = 0; i < 8; i++) tsb[i] = (unsigned char)(ts >> (8 * i));
    if (epoch) { t[tl++] = k[2]; memcpy(t + tl, ev, (size_t)el); tl += el; }
    if (author) { t[tl++] = k[3]; memcpy(t + tl, av, (size_t)al); tl += al; }
    t[tl++] = k[4];
    t[tl++] = (unsigned char)gl;  /* at most 22 bytes: one length byte */
    memcpy(t + tl, g, (size_t)gl); tl += gl;
    if (ts) { t[tl++] = k[5]; memcpy(t + tl, tsb, 8); tl += 8; }
    if (index) { t[tl++] = k[6]; memcpy(t + tl, iv, (size_t)il); tl += il; }
    r[rl++] = k[7];
    r[rl++] = (unsigned char)gl;
    memcpy(r + rl, g, (size_t)gl); rl += gl;
    if (epoch) { r[rl++] = k[8]; memcpy(r + rl, ev, (size_t)el); rl += el; }
    if (ts) { r[rl++] = k[9]; memcpy(r + rl, tsb, 8); rl += 8; }
    if (index) { r[rl++] = k[10]; memcpy(r + rl, iv, (size_t)il); rl += il; }
    return Py_BuildValue("(y#y#y#)", (const char *)g, gl, (const char *)t, tl,
                         (const char *)r, rl);
}

/* encode_txn(keys, sid, tid, epoch, author, start_ns, commit_ns, statements, idem) -> bytes:
 * a transaction entry payload, exactly gateway.node.state.wire.encode_transaction_wire_py's bytes
 * (the specification). `keys` holds the type tag then the 10 one-byte field keys in the order
 * of _TXN_KEYS there; `statements` is already framed as field 6; `idem` is UTF-8 bytes. */
static PyObject *encode_txn(PyObject *self, PyObject *args) {
    const unsigned char *k, *idem;
    Py_buffer stm;
    Py_ssize_t klen, ilen;
    PyObject *o[6];
    unsigned long long v[6];
    if (!PyArg_ParseTuple(args, "y#OOOOOOy*y#", &k, &klen, &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &stm, &idem, &ilen))
        return NULL;
    PyObject *result = NULL;
    if (u64_args(o, v, 6) < 0) goto done;
    if (klen != 11) {
        PyErr_SetString(PyExc_ValueError, "encode_txn: expected a type tag and 10 field keys");
        goto done;
    }
    unsigned long long sid = v[0], tid = v[1], epoch = v[2], author = v[3], start = v[4],
                       commit = v[5];
    unsigned char g[24], head[96];
    Py_ssize_t hl = 0, gl = put_gtid(g, k[2], k[3], sid, tid);
    head[hl++] = k[0];
    head[hl++] = k[1];
    head[hl++] = (unsigned char)gl;  /* at most 22 bytes: one length byte */
    memcpy(head + hl, g, (size_t)gl); hl += gl;
    if (epoch) { head[hl++] = k[4]; hl += put_varint(head + hl, epoch); }
    if (author) { head[hl++] = k[5]; hl += put_varint(head + hl, author); }
    if (start) {
        head[hl++] = k[6];
        for (int i = 0; i < 8; i++) head[hl++] = (unsigned char)(start >> (8 * i));
    }
    if (commit) {
        head[hl++] = k[7];
        for (int i = 0; i < 8; i++) head[hl++] = (unsigned char)(commit >> (8 * i));
    }
    unsigned char tail[16];
    Py_ssize_t tl = 0;
    tail[tl++] = k[8]; tail[tl++] = 1;   /* segment_id = 1 */
    tail[tl++] = k[9]; tail[tl++] = 1;   /* end_segment = true */
    if (ilen) { tail[tl++] = k[10]; tl += put_varint(tail + tl, (uint64_t)ilen); }
    result = PyBytes_FromStringAndSize(NULL, hl + stm.len + tl + ilen);
    if (!result) goto done;
    char *out = PyBytes_AS_STRING(result);
    memcpy(out, head, (size_t)hl);
    memcpy(out + hl, stm.buf, (size_t)stm.len);
    memcpy(out + hl + stm.len, tail, (size_t)tl);
    if (ilen) memcpy(out + hl + stm.len + tl, idem, (size_t)ilen);
done:
    PyBuffer_Release(&stm);
    return result;
}

/* frame(key, parts) -> bytes: key + varint(len(p)) + p for every bytes p of the list `parts`,
 * concatenated (gateway.node.state.wire.frame_statements_py's framing). */
static PyObject *frame(PyObject *self, PyObject *args) {
    const unsigned char *k;
    Py_ssize_t klen;
    PyObject *parts;
    if (!PyArg_ParseTuple(args, "y#O!", &k, &klen, &PyList_Type, &parts)) return NULL;
    if (klen != 1) {
        PyErr_SetString(PyExc_ValueError, "frame: expected a one-byte field key");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(parts), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(parts, i);
        if (!PyBytes_Check(p)) {
            PyErr_SetString(PyExc_TypeError, "frame: parts must be bytes");
            return NULL;
        }
        total += 1 + 10 + PyBytes_GET_SIZE(p);
    }
    Buf b = {NULL, 0, 0};
    if (buf_reserve(&b, total ? total : 1) < 0) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(parts, i);
        Py_ssize_t len = PyBytes_GET_SIZE(p);
        b.buf[b.len++] = (char)k[0];
        b.len += put_varint((unsigned char *)b.buf + b.len, (uint64_t)len);
        memcpy(b.buf + b.len, PyBytes_AS_STRING(p), (size_t)len);
        b.len += len;
    }
    PyObject *result = PyBytes_FromStringAndSize(b.buf, b.len);
    PyMem_Free(b.buf);
    return result;
}

/* One serialized WriteRequest d[p:end] framed: every statements field retagged `out`; *has
 * set to 1 when it holds a field with key `cond` (-1: none looked for). */
static PyObject *frame_write(const unsigned char *d, Py_ssize_t p, Py_ssize_t end,
                             unsigned char stmts, unsigned char out, int cond, int *has) {
    Buf b = {NULL, 0, 0};
    if (buf_reserve(&b, end - p + 1) < 0) return NULL;
    while (p < end) {
        uint64_t tag;
        if (read_varint(d, &p, end, &tag) < 0) goto bad;
        Py_ssize_t after = p;
        if (skip_field(d, &after, end, tag) < 0) goto bad;
        if (tag == stmts) {
            b.buf[b.len++] = (char)out;
            memcpy(b.buf + b.len, d + p, (size_t)(after - p));
            b.len += after - p;
        } else if (cond >= 0 && tag == (uint64_t)cond) {
            *has = 1;
        }
        p = after;
    }
    PyObject *r = PyBytes_FromStringAndSize(b.buf, b.len);
    PyMem_Free(b.buf);
    return r;
bad:
    PyMem_Free(b.buf);
    PyErr_SetString(PyExc_ValueError, "frame_writes: not a well-formed WriteRequest");
    return NULL;
}

/* Appends write `i`'s frame to `out`, and `i` to `flagged` when it holds a conditions field
 * (flagged NULL: not looked for). -1 on error. */
static int add_write(PyObject *out, PyObject *flagged, Py_ssize_t i, const unsigned char *d,
                     Py_ssize_t p, Py_ssize_t end, const unsigned char *k) {
    int has = 0;
    PyObject *one = frame_write(d, p, end, k[1], k[2], flagged ? k[3] : -1, &has);
    if (!one) return -1;
    int rc = PyList_Append(out, one);
    Py_DECREF(one);
    if (rc < 0) return -1;
    if (has) {
        PyObject *at = PyLong_FromSsize_t(i);
        if (!at) return -1;
        rc = PyList_Append(flagged, at);
        Py_DECREF(at);
    }
    return rc;
}

/* frame_writes and frame_writes_flagged: `flag` says whether keys[3] (WriteRequest.conditions)
 * is looked for; then the result is (frames, indices of the writes holding it). */
static PyObject *frame_writes_impl(PyObject *args, int flag) {
    const unsigned char *k;
    Py_buffer data;
    Py_ssize_t klen;
    int batch;
    if (!PyArg_ParseTuple(args, "y#y*p", &k, &klen, &data, &batch)) return NULL;
    PyObject *out = NULL, *flagged = NULL, *result = NULL;
    if (klen != (flag ? 4 : 3)) {
        PyErr_Format(PyExc_ValueError, "frame_writes: expected %d one-byte field keys",
                     flag ? 4 : 3);
        goto done;
    }
    const unsigned char *d = data.buf;
    Py_ssize_t n = data.len;
    out = PyList_New(0);
    if (!out) goto done;
    if (flag && !(flagged = PyList_New(0))) goto done;
    if (!batch) {
        if (add_write(out, flagged, 0, d, 0, n, k) < 0) goto done;
    } else {
        Py_ssize_t p = 0, i = 0;
        while (p < n) {
            uint64_t tag, ln;
            if (read_varint(d, &p, n, &tag) < 0) goto bad;
            Py_ssize_t after = p;
            if (skip_field(d, &after, n, tag) < 0) goto bad;
            if (tag == k[0]) {
                Py_ssize_t body = p;
                if (read_varint(d, &body, after, &ln) < 0) goto bad;
                if (add_write(out, flagged, i++, d, body, after, k) < 0) goto done;
            }
            p = after;
        }
    }
    result = flag ? PyTuple_Pack(2, out, flagged) : Py_NewRef(out);
    goto done;
bad:
    PyErr_SetString(PyExc_ValueError, "frame_writes: not a well-formed WriteBatchRequest");
done:
    Py_XDECREF(out);
    Py_XDECREF(flagged);
    PyBuffer_Release(&data);
    return result;
}

/* frame_writes(keys, data, batch) -> list of bytes (gateway.node.state.wire.frame_writes_py, the
 * specification). `keys`: the one-byte keys of WriteBatchRequest.writes,
 * WriteRequest.statements and Transaction.statements, in that order. */
static PyObject *frame_writes(PyObject *self, PyObject *args) {
    return frame_writes_impl(args, 0);
}

/* frame_writes_flagged(keys, data, batch) -> (list of bytes, list of int)
 * (gateway.node.state.wire.frame_writes_flagged_py, the specification): frame_writes with a
 * fourth key, WriteRequest.conditions; the second list holds the indices of the writes with
 * such a field. */
static PyObject *frame_writes_flagged(PyObject *self, PyObject *args) {
    return frame_writes_impl(args, 1);
}

/* header_span(keys, data, start, end) -> (body, first_record) | None: the walk of an insert
 * statement's header, as gateway.node.state.wire.insert_header_span_py (the specification; a varint
 * cut off by `end` or by the data is None here, where the specification raises IndexError,
 * which its callers take as None; so is an `end` past the data). `keys` holds the one-byte keys of Statement.insert and of
 * InsertStatement's table, key_fields, fields and records, in that order. */
static PyObject *header_span(PyObject *self, PyObject *args) {
    const unsigned char *k;
    Py_buffer data;
    Py_ssize_t klen, start, end;
    if (!PyArg_ParseTuple(args, "y#y*nn", &k, &klen, &data, &start, &end)) return NULL;
    PyObject *result = NULL;
    if (klen != 5) {
        PyErr_SetString(PyExc_ValueError, "header_span: expected 5 one-byte field keys");
        goto done;
    }
    const unsigned char *d = data.buf;
    if (end > data.len) goto none;  /* the specification's IndexError */
    if (start < 0 || start >= end || d[start] != k[0]) goto none;
    Py_ssize_t p = start + 1;
    uint64_t ln;
    if (read_varint(d, &p, end, &ln) < 0 || ln != (uint64_t)(end - p)) goto none;
    Py_ssize_t body = p;
    while (p < end && d[p] != k[4]) {
        if (d[p] != k[1] && d[p] != k[2] && d[p] != k[3]) goto none;
        p++;
        if (read_varint(d, &p, end, &ln) < 0 || ln > (uint64_t)(end - p)) goto none;
        p += (Py_ssize_t)ln;
    }
    result = Py_BuildValue("(nn)", body, p);
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&data);
    return result;
}

/* txn_head(keys, data) -> (sid, tid, commit_ts) | None: the admission header of a transaction
 * entry payload whole in one segment (gateway.node.state.wire.txn_head_py, the specification).
 * keys: the type tag, then the one-byte keys of Transaction.gtid, Gtid.server_id,
 * Gtid.trans_id, Transaction.epoch, author, start_timestamp_ns, commit_timestamp_ns,
 * statements, segment_id, end_segment, idempotency_key. */
static PyObject *txn_head(PyObject *self, PyObject *args) {
    const unsigned char *k;
    Py_ssize_t klen;
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y#y*", &k, &klen, &buf)) return NULL;
    PyObject *result = NULL;
    uint64_t h[3];
    if (klen != 12) {
        PyErr_SetString(PyExc_ValueError, "txn_head: expected a type tag and 11 field keys");
    } else {
        int got = head_of(k, buf.buf, buf.len, h);
        if (got > 0) result = head_tuple(h);
        else if (got == 0) result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&buf);
    return result;
}

/* put_pairs(d, rows): d[row[0]] = row[1] for every tuple row of the sequence rows (a row has
 * at least two items), in order; None. What an apply adds to its overlay for the rows it wrote
 * (wire.put_pairs_py is the specification). */
static PyObject *put_pairs(PyObject *self, PyObject *args) {
    PyObject *d, *seq;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &d, &seq)) return NULL;
    PyObject *rows = PySequence_Fast(seq, "put_pairs: the rows are not a sequence");
    if (!rows) return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(rows); i++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 2) {
            PyErr_Format(PyExc_TypeError, "put_pairs: row %zd is not a tuple of two or more", i);
            Py_DECREF(rows);
            return NULL;
        }
        Py_INCREF(row); /* a key's __hash__ may run code that drops it from the rows */
        int rc = PyDict_SetItem(d, PyTuple_GET_ITEM(row, 0), PyTuple_GET_ITEM(row, 1));
        Py_DECREF(row);
        if (rc < 0) {
            Py_DECREF(rows);
            return NULL;
        }
    }
    Py_DECREF(rows);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"meta_parts", meta_parts, METH_VARARGS,
     "meta_parts(keys, sid, tid, epoch, author, commit_ts, index) -> (gtid, tail, result)"},
    {"encode_txn", encode_txn, METH_VARARGS,
     "encode_txn(keys, sid, tid, epoch, author, start_ns, commit_ns, statements, idem) -> "
     "the transaction entry payload"},
    {"frame", frame, METH_VARARGS,
     "frame(key, parts) -> key + varint(len(p)) + p for every bytes p of parts, joined"},
    {"txn_head", txn_head, METH_VARARGS,
     "txn_head(keys, data) -> (sid, tid, commit_ts) of a whole transaction entry, or None"},
    {"frame_writes", frame_writes, METH_VARARGS,
     "frame_writes(keys, data, batch) -> the statements of each write, framed"},
    {"frame_writes_flagged", frame_writes_flagged, METH_VARARGS,
     "frame_writes_flagged(keys, data, batch) -> (frames, indices of writes with conditions)"},
    {"header_span", header_span, METH_VARARGS,
     "header_span(keys, data, start, end) -> (body, first_record) or None"},
    {"parse_txn", parse_txn, METH_O,
     "parse_txn(data) -> (sid, tid, epoch, author, commit_ts, spans, idem) or None"},
    {"check_records", check_records, METH_VARARGS,
     "check_records(raw, pos, end, kcodes, vcodes) -> bool (see validation._check_records_py)"},
    {"put_pairs", put_pairs, METH_VARARGS,
     "put_pairs(d, rows) -> None: d[row[0]] = row[1] for each tuple of the sequence rows"},
    {"insert_rows", insert_rows, METH_VARARGS,
     "insert_rows(data, pos, end, prefix, head, mid, tail, epoch, author, commit_ts) -> "
     "list of (key, row, epoch, author, commit_ts), or None for the general path"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wire", "C accelerator for the node's apply fast path.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__wire(void) {
    return PyModule_Create(&module);
}
