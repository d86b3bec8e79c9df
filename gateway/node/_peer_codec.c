/* Optional C accelerator for the peer stream's codec (gateway.node.peers.peer_codec, the
 * specification; split out of _wire.c so each C file mirrors one Python module).
 *
 * encode_batch / decode_batch: the peer stream's MessageBatch written from and read into the
 * Raft core's Message and Entry objects. The field keys come from the caller (peer_codec's
 * _KEYS, built from gateway.v1.wire_tags) in the order of the enum below.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../core/_protowire.h"

/* Attribute names of the Raft core's Message and Entry, interned at module init. */
static PyObject *s_type, *s_to, *s_from_, *s_term, *s_log_term, *s_index, *s_entries,
    *s_commit, *s_chunk, *s_reject, *s_reject_hint, *s_context, *s_lease, *s_data;

/* keys: RaftEntry term, index, type, data (0-3); RaftMessage type, to, from, term, log_term,
 * index, entries, commit, chunk, reject, reject_hint, context, lease (4-16); MessageBatch
 * from, from_api, messages, from_peer (17-20). */
#define PEER_KEYS 21
enum { E_TERM, E_INDEX, E_TYPE, E_DATA, M_TYPE, M_TO, M_FROM, M_TERM, M_LOG_TERM, M_INDEX,
       M_ENTRIES, M_COMMIT, M_CHUNK, M_REJECT, M_REJECT_HINT, M_CONTEXT, M_LEASE, B_FROM,
       B_FROM_API, B_MESSAGES, B_FROM_PEER };


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
        /* e owned while its attributes are read: a property may change the list */
        PyObject *e = Py_NewRef(PyList_GET_ITEM(entries, i));
        EntryF *ef = &f->ents[i];
        if (attr_u64(e, s_term, UINT64_MAX, &ef->term) < 0 ||
            attr_u64(e, s_index, UINT64_MAX, &ef->index) < 0 ||
            attr_u64(e, s_type, 0xffffffffu, &ef->type) < 0) {
            Py_DECREF(e);
            Py_DECREF(entries);
            return -1;
        }
        PyObject *data = PyObject_GetAttr(e, s_data);
        Py_DECREF(e);
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
 * (gateway.node.peers.peer_codec.encode_batch_py, the specification): the MessageBatch's bytes, or
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
        /* owned while its attributes are read: a property may change the list */
        PyObject *msg = Py_NewRef(PyList_GET_ITEM(msgs, i));
        int rc = gather_message(msg, &fs[i]);
        Py_DECREF(msg);
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
 * (gateway.node.peers.peer_codec.decode_batch_py, the specification): None when the bytes need
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
    {"encode_batch", encode_batch, METH_VARARGS,
     "encode_batch(keys, sender, from_api, from_peer, messages, frame_tag=-1) -> bytes or "
     "None (the transport frame holding the batch when frame_tag is given)"},
    {"decode_batch", decode_batch, METH_VARARGS,
     "decode_batch(keys, data, msg_cls, mtypes, entry_cls, etypes) -> (sender, from_api, "
     "from_peer, messages) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_peer_codec", "C accelerator for the peer stream's codec.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__peer_codec(void) {
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
