/* The admission header of a transaction entry payload, shared by txn_head (_wire.c, for
 * gateway.node.state.wire) and feed_entries (_feed.c, for gateway.node.appliers.feed). Header-only: every
 * function is static inline. */
#ifndef GATEWAY_TXNHEAD_H
#define GATEWAY_TXNHEAD_H

#include <Python.h>
#include <stdint.h>

#include "../core/_protowire.h"

/* The admission header of the transaction entry payload d[0:n] (type tag first): 1 with
 * out = (sid, tid, commit_ts) when it holds a whole transaction in one segment, 0 for the
 * general path, -1 with an error set. keys: see txn_head. */
static inline int head_of(const unsigned char *k, const unsigned char *d, Py_ssize_t n,
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

static inline PyObject *head_tuple(const uint64_t h[3]) {
    return Py_BuildValue("(KKK)", (unsigned long long)h[0], (unsigned long long)h[1],
                         (unsigned long long)h[2]);
}

#endif
