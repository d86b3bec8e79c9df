/*
 * The store-key encoding and the wire check of one serialized gateway.v1.Value, shared by the
 * accelerators that read key values from request bytes: gateway.node._wire (inserts, the
 * leader's check of records) and gateway.node.api._read_wire (a read batch's keys). Their
 * specifications are in gateway.node.state.wire: key_part, single_field_end, column_code and
 * value_ok_py. Header-only, every function static inline.
 */
#ifndef GATEWAY_KEYVALUES_H
#define GATEWAY_KEYVALUES_H

#include <Python.h>
#include <stdint.h>

#include "../core/_buf.h"
#include "../core/_protowire.h"
#include "../v1/wire_tags.h"


static inline int put_u64be(Buf *kb, unsigned char type, uint64_t v) {
    unsigned char out[9];
    out[0] = type;
    for (int i = 0; i < 8; i++) out[1 + i] = (unsigned char)(v >> (56 - 8 * i));
    return buf_put(kb, out, 9);
}

/* The store-key encoding of the serialized Value data[s:e] into kb, for exactly one non-null
 * value field (gateway.node.state.wire.key_part): 1 done, 0 general path, -1 error set. */
static inline int key_part(const unsigned char *data, Py_ssize_t s, Py_ssize_t e, Buf *kb) {
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

/* Whether data[pos:end] is exactly one field whose tag byte is tag (wire types 0, 1, 2). */
static inline int single_field(const unsigned char *data, Py_ssize_t pos, Py_ssize_t end,
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

/* Column codes beyond plain tag bytes (gateway.node.state.wire.CODE_*, column_code). */
#define CODE_UUID 0x81
#define CODE_DATE 0x82
#define CODE_TIME 0x83
#define CODE_DATETIME 0x84

static inline unsigned char tag_of_code(unsigned char code) {
    switch (code) {
    case CODE_UUID: return VALUE_BYTES_VALUE_KEY;
    case CODE_DATE: case CODE_TIME: case CODE_DATETIME: return VALUE_STRING_VALUE_KEY;
    default: return code;
    }
}

/* n ASCII digits at s as a number, or -1. */
static inline int digits(const unsigned char *s, int n) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* YYYY-MM-DD, a real date with year >= 1 (gateway.core.logrules.date_problem). */
static inline int valid_date(const unsigned char *s, Py_ssize_t n) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (n != 10 || s[4] != '-' || s[7] != '-') return 0;
    int y = digits(s, 4), m = digits(s + 5, 2), d = digits(s + 8, 2);
    if (y < 1 || m < 1 || m > 12 || d < 1) return 0;
    int leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    return d <= (m == 2 && leap ? 29 : days[m - 1]);
}

/* hh:mm:ss[.f{1,9}], hours 00-23 (gateway.core.logrules.time_problem). */
static inline int valid_time(const unsigned char *s, Py_ssize_t n) {
    if (n < 8 || s[2] != ':' || s[5] != ':') return 0;
    int h = digits(s, 2), m = digits(s + 3, 2), sec = digits(s + 6, 2);
    if (h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 59) return 0;
    if (n == 8) return 1;
    if (s[8] != '.' || n < 10 || n > 18) return 0;
    return digits(s + 9, (int)(n - 9)) >= 0;
}

/* Whether the one value field data[v:v_end], whose tag matches code, satisfies the rule of
 * code (gateway.node.state.wire.value_ok_py). */
static inline int value_ok(const unsigned char *d, Py_ssize_t v, Py_ssize_t v_end, unsigned char code,
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

#endif /* GATEWAY_KEYVALUES_H */
