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
 * decode(payload) -> (keys, cells)
 *     The data block's pairs, after the checks last_key makes; ValueError when malformed.
 *     format.decode_block_py is the specification.
 *
 * find(payload, key) -> bytes | None
 *     The cell stored for `key` in the block, or None: a binary search over the keys, no list
 *     of keys or cells built. ValueError when the payload is malformed; never reads outside
 *     it. format._find_cell_py is the specification.
 *
 * find_many(index_keys, blocks, payload, keys, idxs, found) -> [(i, cell), ...]
 *     SSTableReader.lookup of keys[i] for each i of idxs (ascending; keys sorted) not in the
 *     set `found`, in order, the keys found (cell not None) added to `found`: the block of
 *     each key is the first whose last key (index_keys, a list of bytes) is >= it, its
 *     payload blocks[b] (a dict) or payload(b); each block's pairs are located once for all
 *     its keys. sstable_reader._find_many_py is the specification. ValueError when a payload
 *     is malformed (as find).
 *
 * cells(ops) -> dict | None
 *     The cells of a list of write ops (key, value, epoch, author, commit_ts) keyed by key
 *     (value None: a delete), a later op of a key replacing an earlier one; None when an op
 *     is anything else, which the store's general loop takes. format.encode_cells_py is the
 *     specification.
 *
 * encode_blocks(keys, cells, start, per_block, block_bytes, offset, limit)
 *     -> (data, stop, last_keys, offsets, lengths, payload_bytes)
 *     The data blocks an SSTable writer makes of the sorted pairs keys[start:], as the stuffed
 *     records it writes: chunks of per_block pairs from `start` (a multiple of per_block), a
 *     chunk whose payload exceeds 2 * block_bytes halved until it does not or is one pair;
 *     stops after the chunk that brings the pairs taken to `limit` bytes (keys, cells and 8
 *     bytes of lengths each: `data` is at least as long), or at the end. The blocks are
 *     made without the GIL when the pairs taken hold at least 64 KiB (the flush and the
 *     compaction threads then leave the interpreter to the event loop); the pairs taken are
 *     held meanwhile, so a list changed by another thread cannot free them. `stop` is where
 *     the next call starts (len(keys) when done); `last_keys` the last key of every block,
 *     `offsets` (native u64) where each record starts, counting `data` from file offset
 *     `offset`, `lengths` (native u32) each record's stuffed size without its separator,
 *     `payload_bytes` the blocks' payload sizes summed. TypeError unless keys and cells are
 *     equally long lists of bytes. sstable_writer.SSTableWriter's Python loop (add /
 *     _add_block) is the specification: the bytes are identical.
 *
 * decode_blocks(mapped, offsets, lengths, index_keys, i, target) -> (keys, cells, next) | int
 *     The pairs of data blocks i, i+1, ... of a table (offsets u64 and lengths u32 arrays of
 *     its index, index_keys its last keys), until at least `target` pairs or the last block;
 *     `next` the block after them. Each block is checked as SSTableReader.payload checks it
 *     (within the file, the record's CRC, its structure, its last key against the index); the
 *     index of the first block that fails is returned instead, for the caller to raise its
 *     error.
 *
 * frame_values(cells, key, have, limit, size, max_bytes[, shape_fields, shape])
 *     -> (framed, have, size, stopped, shape)
 *     The live cells' values framed as the length-delimited protobuf field of one-byte key
 *     `key` and joined, stopping at `limit` values or past `max_bytes`; with shape_fields,
 *     each value's records of those fields left out when they are the shared `shape`
 *     (format.frame_values_py is the specification: same bytes, same counts, same codes).
 *     TypeError unless cells is a list of bytes; ValueError for an empty cell.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_buf.h"
#include "../_protowire.h"
#include "../_stuffing.h"

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

/* offs[i]: where pair i's key starts, for the n pairs of a block whose data starts at `at`
 * (parse() checked the lengths fit the payload). */
static void pair_offsets(const unsigned char *b, Py_ssize_t n, Py_ssize_t at, Py_ssize_t *offs) {
    Py_ssize_t pos = at;
    for (Py_ssize_t i = 0; i < n; i++) {
        offs[i] = pos;
        pos += (Py_ssize_t)le32(b + 5 + 8 * i) + le32(b + 9 + 8 * i);
    }
}

/* The pair whose key is key[0:klen] (a binary search, keys as Python orders bytes), or -1. */
static Py_ssize_t search_pairs(const unsigned char *b, Py_ssize_t n, const Py_ssize_t *offs,
                               const unsigned char *key, Py_ssize_t klen) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) { /* first pair whose key >= key */
        Py_ssize_t mid = (lo + hi) / 2;
        Py_ssize_t ml = le32(b + 5 + 8 * mid);
        int c = memcmp(b + offs[mid], key, (size_t)(ml < klen ? ml : klen));
        if (c < 0 || (c == 0 && ml < klen)) lo = mid + 1;
        else hi = mid;
    }
    if (lo < n && (Py_ssize_t)le32(b + 5 + 8 * lo) == klen
            && memcmp(b + offs[lo], key, (size_t)klen) == 0)
        return lo;
    return -1;
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
    pair_offsets(b, n, at, offs);
    Py_ssize_t p = search_pairs(b, n, offs, key, kb.len);
    out = p < 0 ? Py_NewRef(Py_None)
                : PyBytes_FromStringAndSize((const char *)b + offs[p] + kb.len,
                                            le32(b + 9 + 8 * p));
done:
    if (offs != stack) PyMem_Free(offs);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&kb);
    return out;
}

/* bytes a < bytes b, as Python orders them */
static int bytes_lt(const char *a, Py_ssize_t an, const char *b, Py_ssize_t bn) {
    int c = memcmp(a, b, (size_t)(an < bn ? an : bn));
    return c < 0 || (c == 0 && an < bn);
}

static PyObject *find_many(PyObject *self, PyObject *args) {
    PyObject *index_keys, *blocks, *payload_fn, *keys, *idxs, *found;
    if (!PyArg_ParseTuple(args, "O!O!OO!O!O!", &PyList_Type, &index_keys, &PyDict_Type, &blocks,
                          &payload_fn, &PyList_Type, &keys, &PyList_Type, &idxs, &PySet_Type,
                          &found))
        return NULL;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    PyObject *pay = NULL; /* the current block's payload (a new reference) */
    PyObject *io = NULL, *k = NULL; /* the index and key at hand, held: payload() runs code */
    Py_ssize_t cur = -1, n = 0, at = 0, cap = 0, *offs = NULL;
    const unsigned char *b = NULL;
    for (Py_ssize_t x = 0; x < PyList_GET_SIZE(idxs); x++) {
        Py_CLEAR(io);
        Py_CLEAR(k);
        io = Py_NewRef(PyList_GET_ITEM(idxs, x));
        Py_ssize_t i = PyLong_AsSsize_t(io);
        if (i == -1 && PyErr_Occurred()) goto error;
        if (i < 0 || i >= PyList_GET_SIZE(keys)) {
            PyErr_SetString(PyExc_IndexError, "find_many: an index past the keys");
            goto error;
        }
        int seen = PySet_Contains(found, io);
        if (seen < 0) goto error;
        if (seen) continue;
        k = Py_NewRef(PyList_GET_ITEM(keys, i));
        if (!PyBytes_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "find_many: keys must be bytes");
            goto error;
        }
        const char *kd = PyBytes_AS_STRING(k);
        Py_ssize_t kl = PyBytes_GET_SIZE(k);
        /* bisect_left(index_keys, k): the first block whose last key >= k */
        Py_ssize_t nb = PyList_GET_SIZE(index_keys), lo = 0, hi = nb;
        while (lo < hi) {
            Py_ssize_t mid = (lo + hi) / 2;
            PyObject *ik = PyList_GET_ITEM(index_keys, mid);
            if (!PyBytes_Check(ik)) {
                PyErr_SetString(PyExc_TypeError, "find_many: index keys must be bytes");
                goto error;
            }
            if (bytes_lt(PyBytes_AS_STRING(ik), PyBytes_GET_SIZE(ik), kd, kl)) lo = mid + 1;
            else hi = mid;
        }
        if (lo == nb) continue;
        if (lo != cur) {
            Py_CLEAR(pay);
            PyObject *bi = PyLong_FromSsize_t(lo);
            if (!bi) goto error;
            PyObject *p = PyDict_GetItemWithError(blocks, bi);
            if (p != NULL) {
                pay = Py_NewRef(p);
            } else if (PyErr_Occurred()) {
                Py_DECREF(bi);
                goto error;
            } else {
                pay = PyObject_CallOneArg(payload_fn, bi);
            }
            Py_DECREF(bi);
            if (!pay) goto error;
            if (!PyBytes_Check(pay)) {
                PyErr_SetString(PyExc_TypeError, "find_many: a payload is not bytes");
                goto error;
            }
            b = (const unsigned char *)PyBytes_AS_STRING(pay);
            if (parse(b, PyBytes_GET_SIZE(pay), &n, &at) < 0) goto error;
            if (n + 1 > cap) {
                Py_ssize_t *o = PyMem_Realloc(offs, sizeof(Py_ssize_t) * (size_t)(n + 1));
                if (!o) {
                    PyErr_NoMemory();
                    goto error;
                }
                offs = o;
                cap = n + 1;
            }
            pair_offsets(b, n, at, offs);
            cur = lo;
        }
        Py_ssize_t l = search_pairs(b, n, offs, (const unsigned char *)kd, kl);
        if (l >= 0) {
            PyObject *cell = PyBytes_FromStringAndSize((const char *)b + offs[l] + kl,
                                                       le32(b + 9 + 8 * l));
            PyObject *t = cell ? PyTuple_Pack(2, k, cell) : NULL;
            Py_XDECREF(cell);
            if (!t || PyList_Append(out, t) < 0 || PySet_Add(found, io) < 0) {
                Py_XDECREF(t);
                goto error;
            }
            Py_DECREF(t);
        }
    }
    Py_XDECREF(io);
    Py_XDECREF(k);
    Py_XDECREF(pay);
    PyMem_Free(offs);
    return out;
error:
    Py_XDECREF(io);
    Py_XDECREF(k);
    Py_XDECREF(pay);
    PyMem_Free(offs);
    Py_DECREF(out);
    return NULL;
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

/* ------------------------------------------------------------------ runs of blocks */

typedef struct {
    const char *p;
    size_t len;
} span_t;

typedef struct {
    const span_t *keys, *cells;    /* the pairs of this call, from its start */
    size_t block_bytes;
    uint64_t offset;               /* file offset of out.buf[0] */
    Buf out, scratch, offs, lens, last;  /* raw (PyMem_Raw*): grown without the GIL */
    uint64_t payload_bytes;
} enc_t;

/* emit_block's failures, raised by the caller once it holds the GIL again. */
#define ENC_NOMEM (-1)
#define ENC_TOO_LARGE (-2)

static size_t payload_size(const enc_t *e, Py_ssize_t i, Py_ssize_t j) {
    size_t total = 5 + 8 * (size_t)(j - i);
    for (Py_ssize_t k = i; k < j; k++) total += e->keys[k].len + e->cells[k].len;
    return total;
}

/* One block of pairs [i, j) (indices from the call's start), halved while too big
 * (SSTableWriter._add_block). Touches no Python object: runs without the GIL. */
static int emit_block(enc_t *e, Py_ssize_t i, Py_ssize_t j) {
    size_t plen = payload_size(e, i, j);
    if (plen > 2 * e->block_bytes && j - i > 1) {
        Py_ssize_t half = (j - i) / 2;
        int rc = emit_block(e, i, i + half);
        return rc < 0 ? rc : emit_block(e, i + half, j);
    }
    if (plen > 0xFFFFFFFFu - 64 - 2 * (plen / MAX_REMAINING_RUN)) /* its length is a u32 */
        return ENC_TOO_LARGE;
    e->scratch.len = 0;
    if (buf_reserve_raw(&e->scratch, (Py_ssize_t)(plen + HEADER_SIZE)) < 0) return ENC_NOMEM;
    uint8_t *p = (uint8_t *)e->scratch.buf + HEADER_SIZE;
    Py_ssize_t count = j - i;
    p[0] = TAG_BLOCK;
    put_le(p + 1, (uint64_t)count, 4);
    uint8_t *lens = p + 5, *data = p + 5 + 8 * count;
    for (Py_ssize_t k = i; k < j; k++) {
        size_t kl = e->keys[k].len, cl = e->cells[k].len;
        put_le(lens, kl, 4);
        put_le(lens + 4, cl, 4);
        lens += 8;
        memcpy(data, e->keys[k].p, kl);
        data += kl;
        memcpy(data, e->cells[k].p, cl);
        data += cl;
    }
    if (buf_reserve_raw(&e->out, (Py_ssize_t)(stuffed_bound(plen + HEADER_SIZE) + 2)) < 0)
        return ENC_NOMEM;
    size_t w = encode_in_place((uint8_t *)e->out.buf + e->out.len, (uint8_t *)e->scratch.buf,
                               plen, 0);
    uint64_t at = e->offset + (uint64_t)e->out.len;
    uint32_t rec_len = (uint32_t)(w - 2);
    Py_ssize_t last = j - 1;
    if (buf_put_raw(&e->offs, &at, 8) < 0 || buf_put_raw(&e->lens, &rec_len, 4) < 0
            || buf_put_raw(&e->last, &last, sizeof last) < 0)
        return ENC_NOMEM;
    e->out.len += (Py_ssize_t)w;
    e->payload_bytes += plen;
    return 0;
}

/* Calls whose pairs hold at least this many bytes encode without the GIL. */
#define ENCODE_RELEASE_AT (64 << 10)

/* pairs_bytes(keys, cells) -> sum of len(k) + len(c) over the pairs (two lists of bytes of
 * one length): what SSTableWriter.add sizes its blocks by, without a Python loop. */
static PyObject *pairs_bytes(PyObject *self, PyObject *args) {
    PyObject *keys, *cells;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &keys, &PyList_Type, &cells)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(cells) != n) {
        PyErr_SetString(PyExc_TypeError, "keys and cells differ in length");
        return NULL;
    }
    size_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *kk = PyList_GET_ITEM(keys, k), *cc = PyList_GET_ITEM(cells, k);
        if (!PyBytes_Check(kk) || !PyBytes_Check(cc)) {
            PyErr_Format(PyExc_TypeError, "pair %zd is not two bytes objects", k);
            return NULL;
        }
        total += (size_t)PyBytes_GET_SIZE(kk) + (size_t)PyBytes_GET_SIZE(cc);
    }
    return PyLong_FromSize_t(total);
}

static PyObject *encode_blocks(PyObject *self, PyObject *args) {
    PyObject *keys, *cells;
    Py_ssize_t start, per_block, block_bytes, limit;
    unsigned long long offset;
    if (!PyArg_ParseTuple(args, "O!O!nnnKn", &PyList_Type, &keys, &PyList_Type, &cells, &start,
                          &per_block, &block_bytes, &offset, &limit))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(cells) != n) {
        PyErr_SetString(PyExc_TypeError, "keys and cells differ in length");
        return NULL;
    }
    if (start < 0 || start > n || per_block < 1 || block_bytes < 1) {
        PyErr_SetString(PyExc_ValueError, "start, per_block or block_bytes out of range");
        return NULL;
    }
    /* This call's pairs: whole chunks of per_block from start until their payloads reach
     * limit bytes (the records are at least as large), or the end. */
    Py_ssize_t stop = start;
    size_t bytes = 0;
    while (stop < n && bytes < (size_t)(limit > 0 ? limit : 0)) {
        Py_ssize_t j = n - stop > per_block ? stop + per_block : n;
        for (Py_ssize_t k = stop; k < j; k++) {
            PyObject *kk = PyList_GET_ITEM(keys, k), *cc = PyList_GET_ITEM(cells, k);
            if (!PyBytes_Check(kk) || !PyBytes_Check(cc)) {
                PyErr_Format(PyExc_TypeError, "pair %zd is not two bytes objects", k);
                return NULL;
            }
            bytes += 8 + (size_t)PyBytes_GET_SIZE(kk) + (size_t)PyBytes_GET_SIZE(cc);
        }
        stop = j;
    }
    Py_ssize_t m = stop - start;
    /* The pairs' objects, held until the end (a list changed by another thread meanwhile
     * cannot free them), and their bytes. */
    PyObject **held = PyMem_RawMalloc((size_t)(2 * m + 1) * sizeof *held);
    span_t *spans = PyMem_RawMalloc((size_t)(2 * m + 1) * sizeof *spans);
    if (!held || !spans) {
        PyMem_RawFree(held);
        PyMem_RawFree(spans);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < m; k++) {
        PyObject *kk = PyList_GET_ITEM(keys, start + k), *cc = PyList_GET_ITEM(cells, start + k);
        held[2 * k] = Py_NewRef(kk);
        held[2 * k + 1] = Py_NewRef(cc);
        spans[k] = (span_t){PyBytes_AS_STRING(kk), (size_t)PyBytes_GET_SIZE(kk)};
        spans[m + k] = (span_t){PyBytes_AS_STRING(cc), (size_t)PyBytes_GET_SIZE(cc)};
    }
    enc_t e = {0};
    e.keys = spans;
    e.cells = spans + m;
    e.block_bytes = (size_t)block_bytes;
    e.offset = offset;
    PyObject *result = NULL, *last_keys = NULL;
    int rc = 0;
    PyThreadState *ts = bytes >= ENCODE_RELEASE_AT ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t i = 0; i < m && rc == 0; i += per_block)
        rc = emit_block(&e, i, m - i > per_block ? i + per_block : m);
    if (ts != NULL) PyEval_RestoreThread(ts);
    if (rc == ENC_NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == ENC_TOO_LARGE) {
        PyErr_SetString(PyExc_OverflowError, "data block too large for the index");
        goto done;
    }
    Py_ssize_t nlast = e.last.len / (Py_ssize_t)sizeof(Py_ssize_t);
    last_keys = PyList_New(nlast);
    if (!last_keys) goto done;
    for (Py_ssize_t b = 0; b < nlast; b++) {
        Py_ssize_t k = ((Py_ssize_t *)e.last.buf)[b];
        PyList_SET_ITEM(last_keys, b, Py_NewRef(held[2 * k]));
    }
    result = Py_BuildValue("(y#nOy#y#K)", e.out.buf, e.out.len, stop, last_keys, e.offs.buf,
                           e.offs.len, e.lens.buf, e.lens.len,
                           (unsigned long long)e.payload_bytes);
done:
    Py_XDECREF(last_keys);
    for (Py_ssize_t k = 0; k < 2 * m; k++) Py_DECREF(held[k]);
    PyMem_RawFree(held);
    PyMem_RawFree(spans);
    PyMem_RawFree(e.out.buf);
    PyMem_RawFree(e.scratch.buf);
    PyMem_RawFree(e.offs.buf);
    PyMem_RawFree(e.lens.buf);
    PyMem_RawFree(e.last.buf);
    return result;
}

/* The n pairs of a parsed block payload p (data from `at`) as two new lists of exactly n
 * items, *keys and *cells: 0, or -1 with an error set (and neither list). */
static int pair_lists(const uint8_t *p, Py_ssize_t n, Py_ssize_t at, PyObject **keys,
                      PyObject **cells) {
    PyObject *ks = PyList_New(n), *cs = PyList_New(n);
    if (ks == NULL || cs == NULL) goto fail;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t kl = le32(p + 5 + 8 * k), cl = le32(p + 9 + 8 * k);
        PyObject *key = PyBytes_FromStringAndSize((const char *)p + at, kl);
        if (key == NULL) goto fail;
        PyList_SET_ITEM(ks, k, key);
        PyObject *cell = PyBytes_FromStringAndSize((const char *)p + at + kl, cl);
        if (cell == NULL) goto fail;
        PyList_SET_ITEM(cs, k, cell);
        at += kl + cl;
    }
    *keys = ks;
    *cells = cs;
    return 0;
fail:
    Py_XDECREF(ks);
    Py_XDECREF(cs);
    return -1;
}

/* Appends block `b` (payload p[0..len)) to keys and cells if it passes the reader's checks:
 * 1 appended, 0 failed a check, -1 error. */
static int take_block(const uint8_t *p, Py_ssize_t len, PyObject *index_key, PyObject *keys,
                      PyObject *cells) {
    Py_ssize_t n, at;
    if (parse(p, len, &n, &at) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (n == 0) return 0;
    uint32_t lk = le32(p + 5 + 8 * (n - 1)), lc = le32(p + 9 + 8 * (n - 1));
    if (!PyBytes_Check(index_key) || PyBytes_GET_SIZE(index_key) != (Py_ssize_t)lk
            || memcmp(PyBytes_AS_STRING(index_key), p + len - lc - lk, lk) != 0)
        return 0;
    PyObject *ks, *cs;
    if (pair_lists(p, n, at, &ks, &cs) < 0) return -1;
    Py_ssize_t kn = PyList_GET_SIZE(keys), cn = PyList_GET_SIZE(cells);
    int rc = PyList_SetSlice(keys, kn, kn, ks) < 0 || PyList_SetSlice(cells, cn, cn, cs) < 0;
    Py_DECREF(ks);
    Py_DECREF(cs);
    return rc ? -1 : 1;
}

static PyObject *decode_blocks(PyObject *self, PyObject *args) {
    PyObject *mapped, *offsets_obj, *lengths_obj, *index_keys;
    Py_ssize_t i, target;
    if (!PyArg_ParseTuple(args, "OOOO!nn", &mapped, &offsets_obj, &lengths_obj, &PyList_Type,
                          &index_keys, &i, &target))
        return NULL;
    Py_buffer mb, ob, lb;
    if (PyObject_GetBuffer(mapped, &mb, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(offsets_obj, &ob, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&mb);
        return NULL;
    }
    if (PyObject_GetBuffer(lengths_obj, &lb, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&mb);
        PyBuffer_Release(&ob);
        return NULL;
    }
    PyObject *result = NULL, *keys = NULL, *cells = NULL;
    Buf scratch = {NULL, 0, 0};
    Py_ssize_t nblocks = PyList_GET_SIZE(index_keys);
    if (ob.len / 8 < nblocks || lb.len / 4 < nblocks || i < 0) {
        PyErr_SetString(PyExc_ValueError, "index arrays shorter than the index keys");
        goto done;
    }
    keys = PyList_New(0);
    cells = PyList_New(0);
    if (!keys || !cells) goto done;
    const uint8_t *base = mb.buf;
    while (i < nblocks) {
        uint64_t off;
        uint32_t len;
        memcpy(&off, (const uint8_t *)ob.buf + 8 * i, 8);
        memcpy(&len, (const uint8_t *)lb.buf + 4 * i, 4);
        if (off > (uint64_t)mb.len || len > (uint64_t)mb.len - off) goto bad;
        scratch.len = 0;
        if (buf_reserve(&scratch, (Py_ssize_t)len) < 0) goto done;
        const uint8_t *payload;
        uint32_t gen;
        Py_ssize_t plen = record_payload(base + off, len, (uint8_t *)scratch.buf, &payload,
                                         &gen);
        if (plen < 0) goto bad;
        int rc = take_block(payload, plen, PyList_GET_ITEM(index_keys, i), keys, cells);
        if (rc < 0) goto done;
        if (rc == 0) goto bad;
        i++;
        if (PyList_GET_SIZE(keys) >= target) break;
    }
    result = Py_BuildValue("(OOn)", keys, cells, i);
    goto done;
bad:
    result = PyLong_FromSsize_t(i);
done:
    Py_XDECREF(keys);
    Py_XDECREF(cells);
    PyMem_Free(scratch.buf);
    PyBuffer_Release(&mb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&lb);
    return result;
}

/* The value a cell stores at *v (*vlen bytes); 0 for a tombstone, -1 (ValueError set) for an
 * empty cell. As format.frame_values_py reads it: flags 0 -> after the flags byte; tombstone
 * flag -> none; else after the 21 metadata bytes (nothing when the cell is shorter). */
static int cell_value(PyObject *cell, const char **v, Py_ssize_t *vlen) {
    Py_ssize_t n = PyBytes_GET_SIZE(cell);
    const char *c = PyBytes_AS_STRING(cell);
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "an empty cell (a cell holds at least its flags byte)");
        return -1;
    }
    unsigned char flags = (unsigned char)c[0];
    Py_ssize_t at = flags == 0 ? 1 : 21;
    if (flags != 0 && (flags & 0x01)) return 0;
    if (at > n) at = n;
    *v = c + at;
    *vlen = n - at;
    return 1;
}

/* Whether field number f is one of fields[0..nf). */
static inline int in_fields(uint64_t f, const unsigned char *fields, Py_ssize_t nf) {
    for (Py_ssize_t i = 0; i < nf; i++)
        if (fields[i] == f) return 1;
    return 0;
}

/* At most this many runs of a value's records are kept apart from its shape; a value of
 * more runs (records of the shape's fields scattered through it) is framed whole. */
#define MAX_RUNS 8

/* Walks the top-level records of message v[0..n). The records whose field is in fields are
 * its shape: *own_len bytes, copied to own when it is not NULL, and *has_first tells whether
 * one is of field fields[0]; when cmp is not NULL, *same tells whether they are, in wire
 * order, exactly cmp[0..cmp_len). The other records are described in runs[] as *nruns
 * (offset, length) pairs of adjacent records (at most MAX_RUNS; *nruns is MAX_RUNS + 1 when
 * there are more). -1 when v is not a well-formed message at its top level
 * (format._split_records answers None). */
static int split_records(const unsigned char *v, Py_ssize_t n, const unsigned char *fields,
                         Py_ssize_t nf, unsigned char *own, Py_ssize_t *own_len, int *has_first,
                         const unsigned char *cmp, Py_ssize_t cmp_len, int *same,
                         Py_ssize_t *runs, int *nruns) {
    Py_ssize_t p = 0, o = 0;
    int eq = 1, nr = 0, in_run = 0;
    *has_first = 0;
    while (p < n) {
        Py_ssize_t at = p;
        uint64_t tag;
        if (read_varint(v, &p, n, &tag) < 0 || skip_field(v, &p, n, tag) < 0) return -1;
        uint64_t f = tag >> 3;
        if (!in_fields(f, fields, nf)) {
            if (in_run) {
                runs[2 * (nr - 1) + 1] += p - at;
            } else if (nr < MAX_RUNS) {
                runs[2 * nr] = at;
                runs[2 * nr + 1] = p - at;
                nr++;
                in_run = 1;
            } else {
                nr = MAX_RUNS + 1;  /* too scattered: stays whole */
            }
            continue;
        }
        in_run = 0;
        if (f == fields[0]) *has_first = 1;
        Py_ssize_t len = p - at;
        if (cmp != NULL && eq && (o + len > cmp_len || memcmp(cmp + o, v + at, (size_t)len) != 0))
            eq = 0;
        if (own != NULL) memcpy(own + o, v + at, (size_t)len);
        o += len;
    }
    *own_len = o;
    *nruns = nr;
    if (cmp != NULL) *same = eq && o == cmp_len;
    return 0;
}

enum { FRAMED_ALL = 0, FRAMED_STOPPED = 1, FRAMED_UNSHARED = 2 };

static PyObject *frame_values(PyObject *self, PyObject *args) {
    PyObject *cells, *shape = Py_None;
    Py_buffer kb, fb = {0};
    long long have, limit, size, max_bytes;
    if (!PyArg_ParseTuple(args, "O!y*LLLL|y*O", &PyList_Type, &cells, &kb, &have, &limit,
                          &size, &max_bytes, &fb, &shape))
        return NULL;
    PyObject *result = NULL, *framed = NULL;
    Py_INCREF(shape);
    if (kb.len != 1) {
        PyErr_SetString(PyExc_ValueError, "key must be one byte");
        goto done;
    }
    if (shape != Py_None && !PyBytes_Check(shape)) {
        PyErr_SetString(PyExc_TypeError, "shape must be bytes or None");
        goto done;
    }
    const unsigned char *fields = fb.buf;
    Py_ssize_t nf = fb.obj != NULL ? fb.len : 0;
    unsigned char key = ((const unsigned char *)kb.buf)[0];
    Py_ssize_t n = PyList_GET_SIZE(cells), bound = 0;
    /* One pass: the output is at most every cell framed whole (1 + 10 + its length). */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *cell = PyList_GET_ITEM(cells, i);
        if (!PyBytes_Check(cell)) {
            PyErr_SetString(PyExc_TypeError, "cells must be a list of bytes");
            goto done;
        }
        bound += 11 + PyBytes_GET_SIZE(cell);
    }
    framed = PyBytes_FromStringAndSize(NULL, bound);
    if (framed == NULL) goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(framed), *o = out;
    int stopped = FRAMED_ALL;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *v;
        Py_ssize_t vlen;
        int live = cell_value(PyList_GET_ITEM(cells, i), &v, &vlen);
        if (live < 0) goto done;
        if (!live) continue;
        size += (long long)vlen + 6;
        if (have == limit || (have && size > max_bytes)) {
            stopped = FRAMED_STOPPED;
            break;
        }
        const unsigned char *uv = (const unsigned char *)v;
        if (nf > 0) {
            Py_ssize_t own_len, runs[2 * MAX_RUNS];
            int has_first, same = 0, nruns;
            if (shape == Py_None) {
                if (split_records(uv, vlen, fields, nf, NULL, &own_len, &has_first, NULL, 0,
                                  &same, runs, &nruns) < 0) {
                    stopped = FRAMED_UNSHARED;
                    break;
                }
                PyObject *own = PyBytes_FromStringAndSize(NULL, own_len);
                if (own == NULL) goto done;
                split_records(uv, vlen, fields, nf, (unsigned char *)PyBytes_AS_STRING(own),
                              &own_len, &has_first, NULL, 0, &same, runs, &nruns);
                Py_SETREF(shape, own);
                same = 1;
            } else if (split_records(uv, vlen, fields, nf, NULL, &own_len, &has_first,
                                     (const unsigned char *)PyBytes_AS_STRING(shape),
                                     PyBytes_GET_SIZE(shape), &same, runs, &nruns) < 0) {
                stopped = FRAMED_UNSHARED;
                break;
            }
            if (!same && !has_first) {
                stopped = FRAMED_UNSHARED;
                break;
            }
            if (same && own_len > 0) {  /* framed without its shape: the rest */
                *o++ = key;
                o += put_varint(o, (uint64_t)(vlen - own_len));
                if (nruns <= MAX_RUNS) {
                    for (int r = 0; r < nruns; r++) {
                        memcpy(o, uv + runs[2 * r], (size_t)runs[2 * r + 1]);
                        o += runs[2 * r + 1];
                    }
                } else {  /* scattered: record by record */
                    Py_ssize_t p = 0;
                    while (p < vlen) {
                        Py_ssize_t at = p;
                        uint64_t tag = 0;
                        read_varint(uv, &p, vlen, &tag);
                        skip_field(uv, &p, vlen, tag);
                        if (in_fields(tag >> 3, fields, nf)) continue;
                        memcpy(o, uv + at, (size_t)(p - at));
                        o += p - at;
                    }
                }
                have++;
                continue;
            }
        }
        *o++ = key;
        o += put_varint(o, (uint64_t)vlen);
        memcpy(o, v, (size_t)vlen);
        o += vlen;
        have++;
    }
    if (stopped == FRAMED_UNSHARED) o = out;
    if (_PyBytes_Resize(&framed, o - out) < 0) goto done;
    result = Py_BuildValue("NLLiO", framed, have, size, stopped, shape);
    framed = NULL;
done:
    Py_XDECREF(framed);
    Py_DECREF(shape);
    PyBuffer_Release(&kb);
    if (fb.obj != NULL) PyBuffer_Release(&fb);
    return result;
}

static PyObject *decode(PyObject *self, PyObject *arg) {
    Py_buffer pb;
    if (PyObject_GetBuffer(arg, &pb, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = pb.buf;
    Py_ssize_t n, at;
    PyObject *keys = NULL, *cells = NULL, *out = NULL;
    if (parse(b, pb.len, &n, &at) < 0) goto done;
    if (pair_lists(b, n, at, &keys, &cells) < 0) goto done;
    out = PyTuple_Pack(2, keys, cells);
done:
    Py_XDECREF(keys);
    Py_XDECREF(cells);
    PyBuffer_Release(&pb);
    return out;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_O,
     "decode(payload) -> (keys, cells) of the data block; ValueError if malformed"},
    {"last_key", last_key, METH_O,
     "last_key(payload) -> the data block's last key (None if empty); ValueError if malformed"},
    {"cells", cells, METH_O,
     "cells(ops) -> {key: cell} of write ops (key, value, epoch, author, commit_ts), or None"},
    {"find", find, METH_VARARGS,
     "find(payload, key) -> the cell of key in the data block, or None"},
    {"find_many", find_many, METH_VARARGS,
     "find_many(index_keys, blocks, payload, keys, idxs, found) -> [(keys[i], cell), ...]"},
    {"pairs_bytes", pairs_bytes, METH_VARARGS,
     "pairs_bytes(keys, cells) -> the sum of the lengths of every key and cell"},
    {"encode_blocks", encode_blocks, METH_VARARGS,
     "encode_blocks(keys, cells, start, per_block, block_bytes, offset, limit) -> "
     "(data, stop, last_keys, offsets, lengths, payload_bytes)"},
    {"decode_blocks", decode_blocks, METH_VARARGS,
     "decode_blocks(mapped, offsets, lengths, index_keys, i, target) -> (keys, cells, next) | "
     "the index of a block that fails its checks"},
    {"frame_values", frame_values, METH_VARARGS,
     "frame_values(cells, key, have, limit, size, max_bytes[, shape_fields, shape]) -> "
     "(framed, have, size, stopped, shape)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_block", "C accelerator for LSM data blocks: point reads, cells, runs of blocks.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__block(void) {
    stuffing_init();
    return PyModule_Create(&module);
}
