/* Optional C accelerator for the node's apply fast path (gateway.node.state_machine).
 *
 * insert_rows(data, pos, end, prefix, head, mid, tail, epoch, author, commit_ts)
 *
 * Walks the InsertRecord fields (tag 0x22) of one serialized InsertStatement from data[pos]
 * to data[end] and returns a list of store operations (key, row, epoch, author, commit_ts):
 *
 *   key = prefix + key_part(v) for every key value v (field 1 of the record)
 *   row = head + (0x1a + len + v for every key value) + mid
 *              + (0x2a + len + v for every after value, field 2) + tail
 *
 * exactly what gateway.node.state_machine._insert_rows_py builds (the specification). Returns
 * None when the bytes need the general path: another field in a record, a key value that is
 * null or not exactly one value field, a varint or length running past the record.
 * Never reads outside data[pos:end] (which must lie inside data).
 *
 * parse_txn(data): the header fields of a transaction entry payload
 * (gateway.node.state_machine._parse_txn_py).
 *
 * meta_parts(keys, sid, tid, epoch, author, commit_ts, index) -> (gtid, tail, result): one
 * transaction's serialized Gtid, Row fields 6-10 and WriteResult (gateway.node.wire.meta_parts,
 * the specification); keys holds the 11 one-byte field keys in the order of _META_KEYS there.
 *
 * encode_txn(keys, sid, tid, epoch, author, start_ns, commit_ns, statements, idem) and
 * frame(key, parts): the leader's transaction entry payload and the framing of its serialized
 * statements (gateway.node.wire.encode_transaction_wire_py, frame_statements_py).
 *
 * frame_writes(keys, data, batch): the statements of every write of a serialized
 * WriteBatchRequest (or of one WriteRequest) framed as a transaction's statements field
 * (gateway.node.wire.frame_writes_py).
 *
 * txn_head(keys, data): the admission header of a transaction entry whole in one segment
 * (gateway.node.wire.txn_head_py); feed_entries(keys, unit_tag, ents, skipped, entry_cls):
 * the appliers' CommittedEntry objects of a read of the committed log, whole transactions
 * with that header and their bytes (gateway.node.feed.CommittedLogSource._entry).
 *
 * encode_batch / decode_batch: the peer stream's MessageBatch written from and read into the
 * Raft core's Message and Entry objects (gateway.node.peer_codec).
 *
 * header_span(keys, data, start, end): the walk of an insert statement's header shared by the
 * leader's wire check and the apply fast path (gateway.node.wire.insert_header_span_py).
 *
 * check_records(raw, pos, end, kcodes, vcodes) -> bool: the leader's per-record check of an
 * insert statement of a known shape -- each value's case and, for DOUBLE, UUID, DATE, TIME
 * and DATETIME columns, its type's rule (gateway.node.validation._check_records_py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "../core/_buf.h"
#include "../core/_protowire.h"
#include "../v1/wire_tags.h"

static int put_u64be(Buf *kb, unsigned char type, uint64_t v) {
    unsigned char out[9];
    out[0] = type;
    for (int i = 0; i < 8; i++) out[1 + i] = (unsigned char)(v >> (56 - 8 * i));
    return buf_put(kb, out, 9);
}

/* The store-key encoding of the serialized Value data[s:e] into kb, for exactly one non-null
 * value field (gateway.node.state_machine._key_part): 1 done, 0 general path, -1 error set. */
static int key_part(const unsigned char *data, Py_ssize_t s, Py_ssize_t e, Buf *kb) {
    if (e <= s) return 0;
    unsigned char tag = data[s];
    Py_ssize_t p = s + 1;
    uint64_t v;
    const uint64_t bias = (uint64_t)1 << 63;
    /* string, decimal (text), bytes */
    if (tag == VALUE_STRING_VALUE_KEY || tag == VALUE_DECIMAL_VALUE_KEY
        || tag == VALUE_BYTES_VALUE_KEY) {
        if (read_varint(data, &p, e, &v) < 0 || v != (uint64_t)(e - p)) return 0;
        if (buf_reserve(kb, 1 + 2 * (e - p) + 2) < 0) return -1;
        kb->buf[kb->len++] = tag == VALUE_BYTES_VALUE_KEY ? 0x07 : 0x06;
        for (Py_ssize_t i = p; i < e; i++) {
            kb->buf[kb->len++] = (char)data[i];
            if (data[i] == 0) kb->buf[kb->len++] = (char)0xff;
        }
        kb->buf[kb->len++] = 0x00;
        kb->buf[kb->len++] = 0x01;
        return 1;
    }
    /* int (zigzag), uint, bool */
    if (tag == VALUE_INT_VALUE_KEY || tag == VALUE_UINT_VALUE_KEY || tag == VALUE_BOOL_VALUE_KEY) {
        if (read_varint(data, &p, e, &v) < 0 || p != e) return 0;
        if (tag == VALUE_INT_VALUE_KEY)
            return put_u64be(kb, 0x03, ((v >> 1) ^ (uint64_t)(-(int64_t)(v & 1))) + bias) < 0
                       ? -1 : 1;
        if (tag == VALUE_UINT_VALUE_KEY) return put_u64be(kb, 0x04, v) < 0 ? -1 : 1;
        unsigned char out[2] = {0x02, v ? 1 : 0};
        return buf_put(kb, out, 2) < 0 ? -1 : 1;
    }
    /* double, timestamp_ns (sfixed64) */
    if ((tag == VALUE_DOUBLE_VALUE_KEY || tag == VALUE_TIMESTAMP_NS_KEY) && p + 8 == e) {
        uint64_t bits = read_fixed64(data + p);
        if (tag == VALUE_TIMESTAMP_NS_KEY) return put_u64be(kb, 0x08, bits + bias) < 0 ? -1 : 1;
        bits = (bits >> 63) ? ~bits : (bits | bias);
        return put_u64be(kb, 0x05, bits) < 0 ? -1 : 1;
    }
    return 0;
}

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

/* Whether data[pos:end] is exactly one field whose tag byte is tag (wire types 0, 1, 2). */
static int single_field(const unsigned char *data, Py_ssize_t pos, Py_ssize_t end,
                        unsigned char tag) {
    Py_ssize_t p = pos + 1;
    uint64_t v;
    switch (tag & 7) {
    case 0:
        return read_varint(data, &p, end, &v) == 0 && p == end;
    case 2:
        return read_varint(data, &p, end, &v) == 0 && v == (uint64_t)(end - p);
    case 1:
        return end - p == 8;
    default:
        return 0;
    }
}

/* Column codes of check_records beyond plain tag bytes (gateway.node.validation.CODE_*). */
#define CODE_UUID 0x81
#define CODE_DATE 0x82
#define CODE_TIME 0x83
#define CODE_DATETIME 0x84

static unsigned char tag_of_code(unsigned char code) {
    switch (code) {
    case CODE_UUID: return VALUE_BYTES_VALUE_KEY;
    case CODE_DATE: case CODE_TIME: case CODE_DATETIME: return VALUE_STRING_VALUE_KEY;
    default: return code;
    }
}

/* n ASCII digits at s as a number, or -1. */
static int digits(const unsigned char *s, int n) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* YYYY-MM-DD, a real date with year >= 1 (gateway.core.logrules.date_problem). */
static int valid_date(const unsigned char *s, Py_ssize_t n) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (n != 10 || s[4] != '-' || s[7] != '-') return 0;
    int y = digits(s, 4), m = digits(s + 5, 2), d = digits(s + 8, 2);
    if (y < 1 || m < 1 || m > 12 || d < 1) return 0;
    int leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    return d <= (m == 2 && leap ? 29 : days[m - 1]);
}

/* hh:mm:ss[.f{1,9}], hours 00-23 (gateway.core.logrules.time_problem). */
static int valid_time(const unsigned char *s, Py_ssize_t n) {
    if (n < 8 || s[2] != ':' || s[5] != ':') return 0;
    int h = digits(s, 2), m = digits(s + 3, 2), sec = digits(s + 6, 2);
    if (h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 59) return 0;
    if (n == 8) return 1;
    if (s[8] != '.' || n < 10 || n > 18) return 0;
    return digits(s + 9, (int)(n - 9)) >= 0;
}

/* Whether the one value field data[v:v_end], whose tag matches code, satisfies the rule of
 * code (gateway.node.validation._value_ok_py). */
static int value_ok(const unsigned char *d, Py_ssize_t v, Py_ssize_t v_end, unsigned char code,
                    int key) {
    if (code == VALUE_DOUBLE_VALUE_KEY) {
        uint64_t bits = read_fixed64(d + v + 1);
        const uint64_t exp = (uint64_t)0x7FF << 52, mant = ((uint64_t)1 << 52) - 1;
        if ((bits & exp) == exp && (bits & mant)) return 0; /* NaN */
        return !(key && bits == (uint64_t)1 << 63);          /* -0.0 as a key */
    }
    if (code == CODE_UUID) return v_end - v == 18;
    if (code != CODE_DATE && code != CODE_TIME && code != CODE_DATETIME) return 1;
    Py_ssize_t p = v + 1;
    uint64_t ln;
    if (read_varint(d, &p, v_end, &ln) < 0) return 0;
    const unsigned char *s = d + p;
    Py_ssize_t n = v_end - p;
    if (code == CODE_DATE) return valid_date(s, n);
    if (code == CODE_TIME) return valid_time(s, n);
    return n >= 19 && s[10] == 'T' && valid_date(s, 10) && valid_time(s + 11, n - 11);
}

/* check_records(raw, pos, end, kcodes, vcodes) -> bool: see
 * gateway.node.validation._check_records_py (the specification). */
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
 * see gateway.node.state_machine._parse_txn_py (the specification). */
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
 * a transaction entry payload, exactly gateway.node.wire.encode_transaction_wire_py's bytes
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
 * concatenated (gateway.node.wire.frame_statements_py's framing). */
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

/* One serialized WriteRequest d[p:end] framed: every statements field retagged `out`. */
static PyObject *frame_write(const unsigned char *d, Py_ssize_t p, Py_ssize_t end,
                             unsigned char stmts, unsigned char out) {
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

/* frame_writes(keys, data, batch) -> list of bytes (gateway.node.wire.frame_writes_py, the
 * specification). `keys`: the one-byte keys of WriteBatchRequest.writes,
 * WriteRequest.statements and Transaction.statements, in that order. */
static PyObject *frame_writes(PyObject *self, PyObject *args) {
    const unsigned char *k;
    Py_buffer data;
    Py_ssize_t klen;
    int batch;
    if (!PyArg_ParseTuple(args, "y#y*p", &k, &klen, &data, &batch)) return NULL;
    PyObject *out = NULL;
    if (klen != 3) {
        PyErr_SetString(PyExc_ValueError, "frame_writes: expected 3 one-byte field keys");
        goto done;
    }
    const unsigned char *d = data.buf;
    Py_ssize_t n = data.len;
    out = PyList_New(0);
    if (!out) goto done;
    if (!batch) {
        PyObject *one = frame_write(d, 0, n, k[1], k[2]);
        if (!one || PyList_Append(out, one) < 0) { Py_XDECREF(one); Py_CLEAR(out); goto done; }
        Py_DECREF(one);
        goto done;
    }
    Py_ssize_t p = 0;
    while (p < n) {
        uint64_t tag, ln;
        if (read_varint(d, &p, n, &tag) < 0) goto bad;
        Py_ssize_t after = p;
        if (skip_field(d, &after, n, tag) < 0) goto bad;
        if (tag == k[0]) {
            Py_ssize_t body = p;
            if (read_varint(d, &body, after, &ln) < 0) goto bad;
            PyObject *one = frame_write(d, body, after, k[1], k[2]);
            if (!one || PyList_Append(out, one) < 0) { Py_XDECREF(one); Py_CLEAR(out); goto done; }
            Py_DECREF(one);
        }
        p = after;
    }
    goto done;
bad:
    Py_CLEAR(out);
    PyErr_SetString(PyExc_ValueError, "frame_writes: not a well-formed WriteBatchRequest");
done:
    PyBuffer_Release(&data);
    return out;
}

/* header_span(keys, data, start, end) -> (body, first_record) | None: the walk of an insert
 * statement's header, as gateway.node.wire.insert_header_span_py (the specification; a varint
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

/* The admission header of the transaction entry payload d[0:n] (type tag first): 1 with
 * out = (sid, tid, commit_ts) when it holds a whole transaction in one segment, 0 for the
 * general path, -1 with an error set. keys: see txn_head. */
static int head_of(const unsigned char *k, const unsigned char *d, Py_ssize_t n,
                   uint64_t out[3]) {
    Py_ssize_t pos = 1;
    uint64_t sid = 0, tid = 0, commit_ts = 0, segment = 0, v;
    int end_segment = 0;
    if (n < 1 || d[0] != k[0]) return 0;
    while (pos < n) {
        unsigned char tag = d[pos++];
        switch (tag & 7) {
        case 0:
            if (read_varint(d, &pos, n, &v) < 0) return 0;
            if (tag == k[9]) segment = v;
            else if (tag == k[10]) end_segment = v != 0;
            else if (tag != k[4] && tag != k[5]) return 0;
            break;
        case 2: {
            if (read_varint(d, &pos, n, &v) < 0 || v > (uint64_t)(n - pos)) return 0;
            Py_ssize_t end = pos + (Py_ssize_t)v;
            if (tag == k[1]) {
                Py_ssize_t p = pos;
                while (p < end) {
                    unsigned char t = d[p++];
                    if (read_varint(d, &p, end, &v) < 0) return 0;
                    if (t == k[2]) sid = v;
                    else if (t == k[3]) tid = v;
                    else return 0;
                }
            } else if (tag == k[11]) {
                PyObject *text = PyUnicode_DecodeUTF8((const char *)d + pos, end - pos, NULL);
                if (!text) {
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
                    PyErr_Clear();
                    return 0;
                }
                Py_DECREF(text);
            } else if (tag != k[8]) {
                return 0;
            }
            pos = end;
            break;
        }
        case 1:
            if (n - pos < 8) return 0;
            if (tag == k[7]) commit_ts = read_fixed64(d + pos);
            else if (tag != k[6]) return 0;
            pos += 8;
            break;
        default:
            return 0;
        }
    }
    if (segment != 1 || !end_segment) return 0;
    out[0] = sid;
    out[1] = tid;
    out[2] = commit_ts;
    return 1;
}

static PyObject *head_tuple(const uint64_t h[3]) {
    return Py_BuildValue("(KKK)", (unsigned long long)h[0], (unsigned long long)h[1],
                         (unsigned long long)h[2]);
}

/* txn_head(keys, data) -> (sid, tid, commit_ts) | None: the admission header of a transaction
 * entry payload whole in one segment (gateway.node.wire.txn_head_py, the specification).
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

/* Attribute names, interned at module init (feed_entries and the peer stream's codec). */
static PyObject *s_type, *s_to, *s_from_, *s_term, *s_log_term, *s_index, *s_entries,
    *s_commit, *s_chunk, *s_reject, *s_reject_hint, *s_context, *s_lease, *s_data;

/* Where entry_cls keeps its __slots__ "index", "_transaction", "replicated", "wire", "head"
 * (offsets into an instance), so feed_entries fills new instances as __init__ would without
 * calling it (~0.25 us less per entry than a call into the class); 0 when entry_cls is not
 * such a class (then it is called). */
static int slot_offsets(PyObject *cls, Py_ssize_t off[5]) {
    static const char *names[5] = {"index", "_transaction", "replicated", "wire", "head"};
    if (!PyType_Check(cls)) return 0;
    for (int i = 0; i < 5; i++) {
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
 * entries of the committed log entries ents (gateway.node.feed.CommittedLogSource._entry, the
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
        PyObject *e = PyList_GET_ITEM(ents, i);
        PyObject *index = PyObject_GetAttr(e, s_index);
        if (!index) goto done;
        PyObject *made = NULL;
        PyObject *type = PyObject_GetAttr(e, s_type);
        PyObject *data = type ? PyObject_GetAttr(e, s_data) : NULL;
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

/* ---- the peer stream's MessageBatch (gateway.node.peer_codec) ------------------------------ */

/* keys: RaftEntry term, index, type, data (0-3); RaftMessage type, to, from, term, log_term,
 * index, entries, commit, chunk, reject, reject_hint, context, lease (4-16); MessageBatch
 * from, from_api, messages, from_peer (17-20). */
#define PEER_KEYS 21
enum { E_TERM, E_INDEX, E_TYPE, E_DATA, M_TYPE, M_TO, M_FROM, M_TERM, M_LOG_TERM, M_INDEX,
       M_ENTRIES, M_COMMIT, M_CHUNK, M_REJECT, M_REJECT_HINT, M_CONTEXT, M_LEASE, B_FROM,
       B_FROM_API, B_MESSAGES, B_FROM_PEER };


static int varint_len(uint64_t v) {
    int n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

/* An int attribute of o as uint64 (max: the field's largest value); -1 with an error set. */
static int attr_u64(PyObject *o, PyObject *name, uint64_t max, uint64_t *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    if (x > max) {
        PyErr_SetString(PyExc_ValueError, "encode_batch: a uint32 field out of range");
        return -1;
    }
    *out = x;
    return 0;
}

/* A Message's fields read once (gather_message), so that its encoded size is known before
 * it is written (message_size) and it is written straight into the final object
 * (write_message): the batch -- or the whole transport frame -- is built in one allocation,
 * each entry's data copied once. */
typedef struct {
    uint64_t term, index, type;
    PyObject *data; /* bytes, owned */
} EntryF;

typedef struct {
    uint64_t hdr[6], commit, hint, lease;
    int reject;
    PyObject *ctx; /* bytes, owned */
    EntryF *ents;
    Py_ssize_t n;
} MsgF;

static void msgf_clear(MsgF *f) {
    for (Py_ssize_t i = 0; i < f->n; i++) Py_XDECREF(f->ents[i].data);
    PyMem_Free(f->ents);
    Py_XDECREF(f->ctx);
    f->ents = NULL;
    f->ctx = NULL;
    f->n = 0;
}

/* Read one Message's fields into f (zeroed by the caller): 1 done, 0 not this fast path (a
 * chunk, data or context that is not bytes), -1 error. f holds references until msgf_clear. */
static int gather_message(PyObject *msg, MsgF *f) {
    PyObject *names1[] = {s_type, s_to, s_from_, s_term, s_log_term, s_index};
    for (int i = 0; i < 6; i++)
        if (attr_u64(msg, names1[i], i == 0 ? 0xffffffffu : UINT64_MAX, &f->hdr[i]) < 0)
            return -1;
    PyObject *chunk = PyObject_GetAttr(msg, s_chunk);
    if (!chunk) return -1;
    int has_chunk = chunk != Py_None;
    Py_DECREF(chunk);
    if (has_chunk) return 0;
    PyObject *entries = PyObject_GetAttr(msg, s_entries);
    if (!entries) return -1;
    if (!PyList_Check(entries)) { Py_DECREF(entries); return 0; }
    Py_ssize_t n = PyList_GET_SIZE(entries);
    if (n) {
        f->ents = PyMem_Calloc((size_t)n, sizeof(EntryF));
        if (!f->ents) { Py_DECREF(entries); PyErr_NoMemory(); return -1; }
    }
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(entries); i++) {
        PyObject *e = PyList_GET_ITEM(entries, i);
        EntryF *ef = &f->ents[i];
        if (attr_u64(e, s_term, UINT64_MAX, &ef->term) < 0 ||
            attr_u64(e, s_index, UINT64_MAX, &ef->index) < 0 ||
            attr_u64(e, s_type, 0xffffffffu, &ef->type) < 0) { Py_DECREF(entries); return -1; }
        PyObject *data = PyObject_GetAttr(e, s_data);
        if (!data) { Py_DECREF(entries); return -1; }
        ef->data = data;
        f->n = i + 1;
        if (!PyBytes_Check(data)) { Py_DECREF(entries); return 0; }
    }
    Py_DECREF(entries);
    if (attr_u64(msg, s_commit, UINT64_MAX, &f->commit) < 0) return -1;
    PyObject *rej = PyObject_GetAttr(msg, s_reject);
    if (!rej) return -1;
    f->reject = PyObject_IsTrue(rej);
    Py_DECREF(rej);
    if (f->reject < 0) return -1;
    if (attr_u64(msg, s_reject_hint, UINT64_MAX, &f->hint) < 0) return -1;
    PyObject *ctx = PyObject_GetAttr(msg, s_context);
    if (!ctx) return -1;
    f->ctx = ctx;
    if (!PyBytes_Check(ctx)) return 0;
    if (attr_u64(msg, s_lease, UINT64_MAX, &f->lease) < 0) return -1;
    return 1;
}

static uint64_t key_varint_size(uint64_t v) { return v ? 1 + (uint64_t)varint_len(v) : 0; }

static uint64_t entry_size(const EntryF *e) {
    uint64_t dn = (uint64_t)PyBytes_GET_SIZE(e->data);
    return key_varint_size(e->term) + key_varint_size(e->index) + key_varint_size(e->type)
        + (dn ? 1 + (uint64_t)varint_len(dn) + dn : 0);
}

/* The size of the RaftMessage write_message writes for f. */
static uint64_t message_size(const MsgF *f) {
    uint64_t size = 0;
    for (int i = 0; i < 6; i++) size += key_varint_size(f->hdr[i]);
    for (Py_ssize_t i = 0; i < f->n; i++) {
        uint64_t es = entry_size(&f->ents[i]);
        size += 1 + (uint64_t)varint_len(es) + es;
    }
    size += key_varint_size(f->commit) + (f->reject ? 2 : 0) + key_varint_size(f->hint);
    uint64_t cn = (uint64_t)PyBytes_GET_SIZE(f->ctx);
    size += cn ? 1 + (uint64_t)varint_len(cn) + cn : 0;
    return size + key_varint_size(f->lease);
}

static unsigned char *put_kv(unsigned char *o, unsigned char key, uint64_t v) {
    if (!v) return o;
    *o++ = key;
    return o + put_varint(o, v);
}

static unsigned char *put_kb(unsigned char *o, unsigned char key, const char *p, uint64_t n) {
    *o++ = key;
    o += put_varint(o, n);
    memcpy(o, p, (size_t)n);
    return o + n;
}

/* Write f's RaftMessage fields at o (message_size(f) bytes); returns the end. */
static unsigned char *write_message(const unsigned char *k, const MsgF *f, unsigned char *o) {
    static const int order1[] = {M_TYPE, M_TO, M_FROM, M_TERM, M_LOG_TERM, M_INDEX};
    for (int i = 0; i < 6; i++) o = put_kv(o, k[order1[i]], f->hdr[i]);
    for (Py_ssize_t i = 0; i < f->n; i++) {
        const EntryF *e = &f->ents[i];
        *o++ = k[M_ENTRIES];
        o += put_varint(o, entry_size(e));
        o = put_kv(o, k[E_TERM], e->term);
        o = put_kv(o, k[E_INDEX], e->index);
        o = put_kv(o, k[E_TYPE], e->type);
        Py_ssize_t dn = PyBytes_GET_SIZE(e->data);
        if (dn) o = put_kb(o, k[E_DATA], PyBytes_AS_STRING(e->data), (uint64_t)dn);
    }
    o = put_kv(o, k[M_COMMIT], f->commit);
    if (f->reject) o = put_kv(o, k[M_REJECT], 1);
    o = put_kv(o, k[M_REJECT_HINT], f->hint);
    Py_ssize_t cn = PyBytes_GET_SIZE(f->ctx);
    if (cn) o = put_kb(o, k[M_CONTEXT], PyBytes_AS_STRING(f->ctx), (uint64_t)cn);
    return put_kv(o, k[M_LEASE], f->lease);
}

/* The transport frame's length field (gateway.core.frame.encode_length) for n into o (up to
 * 5 bytes); returns its size. */
static int frame_length(unsigned char *o, uint64_t n) {
    if (n >= 2 && n <= 255) { o[0] = (unsigned char)n; return 1; }
    if (n <= 0xFFFF) {
        o[0] = 0;
        o[1] = (unsigned char)n;
        o[2] = (unsigned char)(n >> 8);
        return 3;
    }
    o[0] = 1;
    for (int i = 0; i < 4; i++) o[1 + i] = (unsigned char)(n >> (8 * i));
    return 5;
}

static PyObject *zlib_crc32 = NULL;

/* encode_batch(keys, sender, from_api, from_peer, messages, frame_tag=-1) -> bytes | None
 * (gateway.node.peer_codec.encode_batch_py, the specification): the MessageBatch's bytes, or
 * with frame_tag 0..255 the transport frame holding them (gateway.core.frame.encode_frame:
 * length, tag, batch, CRC-32), built in one allocation of the exact size. None when a
 * message needs the general path (a snapshot chunk, data or context that is not bytes). */
static PyObject *encode_batch(PyObject *self, PyObject *args) {
    const unsigned char *k;
    Py_ssize_t klen, api_n, peer_n;
    unsigned long long sender;
    const char *api, *peer;
    PyObject *msgs;
    int tag = -1;
    if (!PyArg_ParseTuple(args, "y#Ks#s#O!|i", &k, &klen, &sender, &api, &api_n, &peer,
                          &peer_n, &PyList_Type, &msgs, &tag))
        return NULL;
    if (klen != PEER_KEYS) {
        PyErr_SetString(PyExc_ValueError, "encode_batch: expected 21 one-byte field keys");
        return NULL;
    }
    if (tag > 255) {
        PyErr_SetString(PyExc_ValueError, "encode_batch: frame tag outside 0..255");
        return NULL;
    }
    Py_ssize_t nm = PyList_GET_SIZE(msgs);
    MsgF *fs = PyMem_Calloc((size_t)(nm ? nm : 1), sizeof(MsgF));
    uint64_t *sizes = PyMem_Calloc((size_t)(nm ? nm : 1), sizeof(uint64_t));
    PyObject *result = NULL;
    Py_ssize_t gathered = 0;
    if (!fs || !sizes) { PyErr_NoMemory(); goto done; }
    uint64_t total = key_varint_size(sender)
        + (api_n ? 1 + (uint64_t)varint_len((uint64_t)api_n) + (uint64_t)api_n : 0)
        + (peer_n ? 1 + (uint64_t)varint_len((uint64_t)peer_n) + (uint64_t)peer_n : 0);
    for (Py_ssize_t i = 0; i < nm; i++) {
        if (i >= PyList_GET_SIZE(msgs)) { result = Py_NewRef(Py_None); goto done; }
        gathered = i + 1;
        int rc = gather_message(PyList_GET_ITEM(msgs, i), &fs[i]);
        if (rc < 0) goto done;
        if (rc == 0) { result = Py_NewRef(Py_None); goto done; }
        sizes[i] = message_size(&fs[i]);
        total += 1 + (uint64_t)varint_len(sizes[i]) + sizes[i];
    }
    unsigned char head[6];
    int hn = 0;
    if (tag >= 0) {
        if (total > 0x7FFFFFFFu) {
            PyErr_SetString(PyExc_ValueError, "encode_batch: frame longer than the limit");
            goto done;
        }
        hn = frame_length(head, total);
        head[hn++] = (unsigned char)tag;
    }
    uint64_t size = (uint64_t)hn + total + (tag >= 0 ? 4 : 0);
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!result) goto done;
    unsigned char *base = (unsigned char *)PyBytes_AS_STRING(result), *o = base;
    memcpy(o, head, (size_t)hn);
    o += hn;
    o = put_kv(o, k[B_FROM], sender);
    if (api_n) o = put_kb(o, k[B_FROM_API], api, (uint64_t)api_n);
    for (Py_ssize_t i = 0; i < nm; i++) {
        *o++ = k[B_MESSAGES];
        o += put_varint(o, sizes[i]);
        o = write_message(k, &fs[i], o);
    }
    if (peer_n) o = put_kb(o, k[B_FROM_PEER], peer, (uint64_t)peer_n);
    if ((uint64_t)(o - base) != (uint64_t)hn + total) {
        Py_CLEAR(result);
        PyErr_SetString(PyExc_SystemError, "encode_batch: size mismatch");
        goto done;
    }
    if (tag >= 0) {
        if (!zlib_crc32) {
            PyObject *zlib = PyImport_ImportModule("zlib");
            if (zlib) {
                zlib_crc32 = PyObject_GetAttrString(zlib, "crc32");
                Py_DECREF(zlib);
            }
            if (!zlib_crc32) { Py_CLEAR(result); goto done; }
        }
        PyObject *view = PyMemoryView_FromMemory((char *)base, (Py_ssize_t)(o - base),
                                                 PyBUF_READ);
        PyObject *crc = view ? PyObject_CallOneArg(zlib_crc32, view) : NULL;
        Py_XDECREF(view);
        unsigned long c = crc ? PyLong_AsUnsignedLong(crc) : 0;
        Py_XDECREF(crc);
        if (!crc || PyErr_Occurred()) { Py_CLEAR(result); goto done; }
        for (int i = 0; i < 4; i++) o[i] = (unsigned char)(c >> (8 * i));
    }
done:
    for (Py_ssize_t i = 0; i < gathered; i++) msgf_clear(&fs[i]);
    PyMem_Free(fs);
    PyMem_Free(sizes);
    return result;
}

/* One RaftEntry d[p:end] as entry_cls(term, index, type, data): NULL with no error set when
 * it is not this fast path (an unknown field, a malformed one). */
static PyObject *decode_entry_msg(const unsigned char *k, const unsigned char *d, Py_ssize_t p,
                                  Py_ssize_t end, PyObject *entry_cls, PyObject *etypes) {
    uint64_t term = 0, index = 0, type = 0, v;
    Py_ssize_t ds = 0, dn = 0;
    while (p < end) {
        unsigned char key = d[p++];
        if (key == k[E_DATA]) {
            if (read_varint(d, &p, end, &v) < 0 || v > (uint64_t)(end - p)) return NULL;
            ds = p;
            dn = (Py_ssize_t)v;
            p += dn;
            continue;
        }
        if (key != k[E_TERM] && key != k[E_INDEX] && key != k[E_TYPE]) return NULL;
        if (read_varint(d, &p, end, &v) < 0) return NULL;
        if (key == k[E_TERM]) term = v;
        else if (key == k[E_INDEX]) index = v;
        else type = v & 0xffffffffu;  /* uint32: protobuf keeps the low 32 bits */
    }
    PyObject *a[4];
    a[0] = PyLong_FromUnsignedLongLong(term);
    a[1] = PyLong_FromUnsignedLongLong(index);
    a[2] = PyTuple_GET_ITEM(etypes, type ? 1 : 0);
    a[3] = PyBytes_FromStringAndSize((const char *)d + ds, dn);
    PyObject *e = NULL;
    if (a[0] && a[1] && a[3]) e = PyObject_Vectorcall(entry_cls, a, 4, NULL);
    Py_XDECREF(a[0]);
    Py_XDECREF(a[1]);
    Py_XDECREF(a[3]);
    return e;
}

/* One RaftMessage d[p:end] as msg_cls(...) (transport.from_proto's arguments); NULL with no
 * error set when it is not this fast path. */
static PyObject *decode_message(const unsigned char *k, const unsigned char *d, Py_ssize_t p,
                                Py_ssize_t end, PyObject *msg_cls, PyObject *mtypes,
                                PyObject *entry_cls, PyObject *etypes) {
    uint64_t f[17] = {0}, v;
    Py_ssize_t cs = 0, cn = 0;
    PyObject *entries = PyList_New(0);
    if (!entries) return NULL;
    while (p < end) {
        unsigned char key = d[p++];
        if (key == k[M_ENTRIES] || key == k[M_CONTEXT]) {
            if (read_varint(d, &p, end, &v) < 0 || v > (uint64_t)(end - p)) goto not_fast;
            if (key == k[M_CONTEXT]) {
                cs = p;
                cn = (Py_ssize_t)v;
            } else {
                PyObject *e = decode_entry_msg(k, d, p, p + (Py_ssize_t)v, entry_cls, etypes);
                if (!e) goto fail_or_not;
                int rc = PyList_Append(entries, e);
                Py_DECREF(e);
                if (rc < 0) goto fail;
            }
            p += (Py_ssize_t)v;
            continue;
        }
        int which = -1;
        for (int i = M_TYPE; i <= M_LEASE; i++)
            if (key == k[i] && i != M_ENTRIES && i != M_CONTEXT && i != M_CHUNK) which = i;
        if (which < 0) goto not_fast;  /* a chunk, an unknown field, another wire type */
        if (read_varint(d, &p, end, &v) < 0) goto not_fast;
        f[which] = v;
    }
    PyObject *t = PyLong_FromUnsignedLongLong(f[M_TYPE] & 0xffffffffu);
    if (!t) goto fail;
    PyObject *mtype = PyDict_GetItemWithError(mtypes, t);
    Py_DECREF(t);
    if (!mtype) goto fail_or_not;  /* a type this version does not know: the general path */
    PyObject *a[14];
    a[0] = mtype;
    a[1] = PyLong_FromUnsignedLongLong(f[M_TO]);
    a[2] = PyLong_FromUnsignedLongLong(f[M_FROM]);
    a[3] = PyLong_FromUnsignedLongLong(f[M_TERM]);
    a[4] = PyLong_FromUnsignedLongLong(f[M_LOG_TERM]);
    a[5] = PyLong_FromUnsignedLongLong(f[M_INDEX]);
    a[6] = entries;
    a[7] = PyLong_FromUnsignedLongLong(f[M_COMMIT]);
    a[8] = Py_None;
    a[9] = Py_None;
    a[10] = f[M_REJECT] ? Py_True : Py_False;
    a[11] = PyLong_FromUnsignedLongLong(f[M_REJECT_HINT]);
    a[12] = PyBytes_FromStringAndSize((const char *)d + cs, cn);
    a[13] = PyLong_FromUnsignedLongLong(f[M_LEASE]);
    PyObject *msg = NULL;
    int ok = 1;
    for (int i = 1; i < 14; i++) if (!a[i]) ok = 0;
    if (ok) msg = PyObject_Vectorcall(msg_cls, a, 14, NULL);
    for (int i = 1; i < 14; i++)
        if (i != 6 && i != 8 && i != 9 && i != 10) Py_XDECREF(a[i]);
    Py_DECREF(entries);
    return msg;
fail_or_not:
    if (PyErr_Occurred()) goto fail;
not_fast:
    Py_DECREF(entries);
    return NULL;
fail:
    Py_DECREF(entries);
    return NULL;
}

/* decode_batch(keys, data, msg_cls, mtypes, entry_cls, etypes)
 *   -> (sender, from_api, from_peer, [Message]) | None
 * (gateway.node.peer_codec.decode_batch_py, the specification): None when the bytes need
 * the general path -- a snapshot chunk, an unknown field, a message type not in `mtypes`,
 * text that is not UTF-8, anything malformed -- which then gives the result or the error. */
static PyObject *decode_batch(PyObject *self, PyObject *args) {
    const unsigned char *k;
    Py_ssize_t klen;
    Py_buffer data;
    PyObject *msg_cls, *mtypes, *entry_cls, *etypes;
    if (!PyArg_ParseTuple(args, "y#y*OO!OO!", &k, &klen, &data, &msg_cls, &PyDict_Type, &mtypes,
                          &entry_cls, &PyTuple_Type, &etypes))
        return NULL;
    PyObject *result = NULL, *msgs = NULL, *api = NULL, *peer = NULL;
    if (klen != PEER_KEYS || PyTuple_GET_SIZE(etypes) != 2) {
        PyErr_SetString(PyExc_ValueError, "decode_batch: expected 21 keys and 2 entry types");
        goto done;
    }
    const unsigned char *d = data.buf;
    Py_ssize_t p = 0, n = data.len;
    uint64_t sender = 0, v;
    msgs = PyList_New(0);
    if (!msgs) goto done;
    api = PyUnicode_FromStringAndSize("", 0);
    peer = PyUnicode_FromStringAndSize("", 0);
    if (!api || !peer) goto done;
    while (p < n) {
        unsigned char key = d[p++];
        if (key == k[B_FROM]) {
            if (read_varint(d, &p, n, &v) < 0) goto not_fast;
            sender = v;
            continue;
        }
        if (key != k[B_FROM_API] && key != k[B_MESSAGES] && key != k[B_FROM_PEER]) goto not_fast;
        if (read_varint(d, &p, n, &v) < 0 || v > (uint64_t)(n - p)) goto not_fast;
        Py_ssize_t len = (Py_ssize_t)v;
        if (key == k[B_MESSAGES]) {
            PyObject *m = decode_message(k, d, p, p + len, msg_cls, mtypes, entry_cls, etypes);
            if (!m) {
                if (PyErr_Occurred()) goto done;
                goto not_fast;
            }
            int rc = PyList_Append(msgs, m);
            Py_DECREF(m);
            if (rc < 0) goto done;
        } else {
            PyObject *text = PyUnicode_DecodeUTF8((const char *)d + p, len, NULL);
            if (!text) { PyErr_Clear(); goto not_fast; }
            if (key == k[B_FROM_API]) Py_SETREF(api, text);
            else Py_SETREF(peer, text);
        }
        p += len;
    }
    result = Py_BuildValue("(KOOO)", (unsigned long long)sender, api, peer, msgs);
    goto done;
not_fast:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(msgs);
    Py_XDECREF(api);
    Py_XDECREF(peer);
    PyBuffer_Release(&data);
    return result;
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
    {"feed_entries", feed_entries, METH_VARARGS,
     "feed_entries(keys, unit_tag, ents, skipped, entry_cls) -> (out, todo): the appliers' "
     "entries of committed log entries (gateway.node.feed)"},
    {"encode_batch", encode_batch, METH_VARARGS,
     "encode_batch(keys, sender, from_api, from_peer, messages, frame_tag=-1) -> bytes or "
     "None (the transport frame holding the batch when frame_tag is given)"},
    {"decode_batch", decode_batch, METH_VARARGS,
     "decode_batch(keys, data, msg_cls, mtypes, entry_cls, etypes) -> (sender, from_api, "
     "from_peer, messages) or None"},
    {"frame_writes", frame_writes, METH_VARARGS,
     "frame_writes(keys, data, batch) -> the statements of each write, framed"},
    {"header_span", header_span, METH_VARARGS,
     "header_span(keys, data, start, end) -> (body, first_record) or None"},
    {"parse_txn", parse_txn, METH_O,
     "parse_txn(data) -> (sid, tid, epoch, author, commit_ts, spans, idem) or None"},
    {"check_records", check_records, METH_VARARGS,
     "check_records(raw, pos, end, kcodes, vcodes) -> bool (see validation._check_records_py)"},
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
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_type, "type"}, {&s_to, "to"}, {&s_from_, "from_"}, {&s_term, "term"},
        {&s_log_term, "log_term"}, {&s_index, "index"}, {&s_entries, "entries"},
        {&s_commit, "commit"}, {&s_chunk, "chunk"}, {&s_reject, "reject"},
        {&s_reject_hint, "reject_hint"}, {&s_context, "context"}, {&s_lease, "lease"},
        {&s_data, "data"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (!*names[i].slot) return NULL;
    }
    return PyModule_Create(&module);
}
