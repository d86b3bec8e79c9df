/* Protobuf wire-format reading (and varint writing) shared by the C accelerators
 * (gateway/core/_columns.c, gateway/core/_recordstream.c, gateway/node/_wire.c, _judge.c, ...).
 * Header-only: every function is static inline. */
#ifndef GATEWAY_PROTOWIRE_H
#define GATEWAY_PROTOWIRE_H

#include <Python.h>
#include <stdint.h>

/* A base-128 varint at data[*p] (before end) into *out, *p moved past it; -1 if it runs past
 * end or exceeds 64 bits. */
static inline int read_varint(const unsigned char *data, Py_ssize_t *p, Py_ssize_t end,
                              uint64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    while (*p < end) {
        unsigned char c = data[(*p)++];
        if (shift == 63 && c > 1) return -1;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) { *out = v; return 0; }
        shift += 7;
        if (shift > 63) return -1;
    }
    return -1;
}

/* v as a base-128 varint at out (room for 10 bytes); the bytes written. */
static inline Py_ssize_t put_varint(unsigned char *out, uint64_t v) {
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        out[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return n;
}

/* The bytes put_varint writes for v (1-10). */
static inline Py_ssize_t varint_len(uint64_t v) {
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* The little-endian 64-bit value at data[0..8) (a fixed64, sfixed64 or double field's bits);
 * the caller checks the 8 bytes are there. */
static inline uint64_t read_fixed64(const unsigned char *data) {
    uint64_t bits = 0;
    for (int i = 7; i >= 0; i--) bits = (bits << 8) | data[i];
    return bits;
}

/* Skips the field whose tag (already read) is `tag`, *p moved past it: 0, or -1 when it runs
 * past end or has a wire type these readers do not take (groups). */
static inline int skip_field(const unsigned char *d, Py_ssize_t *p, Py_ssize_t end,
                             uint64_t tag) {
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

#endif
