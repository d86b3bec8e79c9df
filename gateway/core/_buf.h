/*
 * A growable byte buffer on PyMem for the C accelerators that build output of unknown size
 * (gateway.node._wire, gateway.core.lsm._block). Start from {NULL, 0, 0}; free ``buf`` with
 * PyMem_Free. buf_reserve/buf_put return 0, or -1 with MemoryError set; buf_reserve_raw /
 * buf_put_raw (below) are for code that runs without the GIL.
 */
#ifndef GATEWAY_BUF_H
#define GATEWAY_BUF_H

#include <Python.h>
#include <string.h>

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Buf;

/* Room for `extra` more bytes, grown by doubling with `grow` (PyMem_Realloc or
 * PyMem_RawRealloc): 0, or -1 with no exception set. */
static inline int buf_grow(Buf *b, Py_ssize_t extra, void *(*grow)(void *, size_t)) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *p = grow(b->buf, (size_t)cap);
    if (!p) return -1;
    b->buf = p;
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (buf_grow(b, extra, PyMem_Realloc) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static inline int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->buf + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

/* The same for code that runs without the GIL: PyMem_RawRealloc, and no exception set on
 * failure (the caller raises MemoryError once it holds the GIL again). Free with PyMem_RawFree.
 * A Buf is grown by one family only. */
static inline int buf_reserve_raw(Buf *b, Py_ssize_t extra) {
    return buf_grow(b, extra, PyMem_RawRealloc);
}

static inline int buf_put_raw(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve_raw(b, n) < 0) return -1;
    memcpy(b->buf + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

#endif /* GATEWAY_BUF_H */
