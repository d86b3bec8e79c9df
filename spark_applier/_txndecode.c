/*
 * C fast path of spark_applier.decode: gateway.v1.Transaction payloads -> Arrow column buffers.
 *
 * The pure-Python decoder in decode.py (class _Batch) is the specification. This module
 * decodes the protobuf wire format of the common transactions itself and appends their rows
 * to column buffers that decode.py wraps into pyarrow arrays with Array.from_buffers (no Python
 * object per cell). It never decides anything the Python decoder would decide differently:
 * whatever is outside its fast path -- a parse it is not sure of, a transaction the log model
 * rejects, a rollback, an SQL statement, an UPDATE that sets a key column -- makes add() undo
 * that transaction's rows and return FALLBACK, and decode.py hands the transaction to the
 * Python decoder, which produces the rows or the report entry with its exact message.
 *
 * What the fast path accepts (everything else is FALLBACK):
 *   - well-formed wire format of the known fields with their declared wire types; an unknown
 *     field, a wrong wire type, a truncated or over-long varint, a length past the end, a
 *     repeated occurrence of a singular message field or of a oneof: FALLBACK;
 *   - strings that are valid UTF-8 (upb rejects the others in proto3 -- a parse error);
 *   - statements INSERT, DELETE, UPDATE not setting a key column, ApplyStatus;
 *   - values of their column's case (CASE_OF_TYPE) or null; decimals in the plain syntax
 *     [+-]digits[.digits][e[+-]digits] (a subset of what decimal.Decimal accepts);
 *   - trans_id, epoch and commit timestamp below 2**63; segment_id below 2**31.
 *
 * Rows are appended with every column materialised (13 transaction columns, statement, op
 * number, op, schema, table, the three cell lists); the sql column is all null.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "../gateway/core/_protowire.h"
#include "../gateway/v1/wire_tags.h"

#define FALLBACK (-1) /* add(): hand the transaction to the Python decoder */
#define FILTERED (-2) /* add(): outside the GTID filter, nothing appended */

/* Internal status of the parsing functions. */
#define OK 0
#define FB 1    /* outside the fast path */
#define NOMEM 2 /* PyErr_NoMemory() is set */

/* Value cases = field numbers of gateway.v1.Value.kind; K_NONE: no case set. The arrays
 * below are indexed by case, so the numbers must run 1..9 in this order. */
enum { K_NONE = 0, K_NULL = VALUE_NULL_VALUE, K_BOOL = VALUE_BOOL_VALUE, K_INT = VALUE_INT_VALUE,
       K_UINT = VALUE_UINT_VALUE, K_DOUBLE = VALUE_DOUBLE_VALUE, K_DECIMAL = VALUE_DECIMAL_VALUE,
       K_STRING = VALUE_STRING_VALUE, K_BYTES = VALUE_BYTES_VALUE,
       K_TIMESTAMP = VALUE_TIMESTAMP_NS, K_COUNT };
_Static_assert(K_NULL == 1 && K_BOOL == 2 && K_INT == 3 && K_UINT == 4 && K_DOUBLE == 5 &&
	       K_DECIMAL == 6 && K_STRING == 7 && K_BYTES == 8 && K_TIMESTAMP == 9,
	       "gateway.v1.Value: case_of_type and slot_of_case assume fields 1..9 in order");

/* FieldType -> the Value case a column of that type holds (gateway.core.rowops.CASE_OF_TYPE;
 * tests/spark/test_cdecode.py checks they agree). 0: invalid type. */
#define MAX_TYPE 13
static const int case_of_type[MAX_TYPE + 1] = {
	0, K_BOOL, K_INT, K_UINT, K_DOUBLE, K_DECIMAL, K_STRING, K_BYTES,
	K_STRING, K_STRING, K_STRING, K_TIMESTAMP, K_BYTES, K_STRING,
};

/* Value case -> cell slot: 0 int_v, 1 double_v, 2 text_v, 3 bytes_v, 9 none (null). */
#define SLOT_NONE 9
static const uint8_t slot_of_case[K_COUNT] = {
	SLOT_NONE, SLOT_NONE, 0, 0, 0, 1, 2, 2, 3, 0,
};

/* ---------------------------------------------------------------- growable buffers */

typedef struct {
	uint8_t *p;
	size_t len, cap;
} Buf;

static int
buf_grow(Buf *b, size_t extra)
{
	size_t need = b->len + extra;
	if (need < b->len)
		return NOMEM;
	size_t cap = b->cap ? b->cap : 1024;
	while (cap < need) {
		if (cap > SIZE_MAX / 2) {
			cap = need;
			break;
		}
		cap *= 2;
	}
	uint8_t *p = PyMem_Realloc(b->p, cap);
	if (p == NULL)
		return NOMEM;
	b->p = p;
	b->cap = cap;
	return OK;
}

static inline int
buf_put(Buf *b, const void *src, size_t n)
{
	if (b->cap - b->len < n && buf_grow(b, n) != OK)
		return NOMEM;
	if (n)
		memcpy(b->p + b->len, src, n);
	b->len += n;
	return OK;
}

static inline int
put_i64(Buf *b, int64_t v)
{
	return buf_put(b, &v, 8);
}

static inline int
put_i32(Buf *b, int32_t v)
{
	return buf_put(b, &v, 4);
}

static inline int
put_u8(Buf *b, uint8_t v)
{
	return buf_put(b, &v, 1);
}

/* Append text to a string column (data + int32 end offset); FB if the batch's data would pass
 * what int32 offsets address. */
static inline int
put_str(Buf *off, Buf *data, const uint8_t *s, size_t n)
{
	if (data->len + n > INT32_MAX)
		return FB;
	if (buf_put(data, s, n) != OK)
		return NOMEM;
	return put_i32(off, (int32_t)data->len);
}

/* ---------------------------------------------------------------- column layout */

/* Row columns, in ARROW_SCHEMA order up to table. */
enum {
	R_LOG_INDEX, R_TERM, R_SEGMENT, R_POSITION, R_SERVER_ID, R_TRANS_ID, R_EPOCH, R_AUTHOR,
	R_COMMIT_TS, /* int64 */
	R_SEGMENT_ID, /* int32 */
	R_END_SEGMENT, R_ROLLBACK, /* one byte per row, bit-packed at flush */
	R_SEGMENT_STATEMENTS, R_STATEMENT, R_OP_NO, /* int32 */
	R_OP_OFF, R_OP_DATA, R_SCHEMA_OFF, R_SCHEMA_DATA, R_TABLE_OFF, R_TABLE_DATA,
	R_COUNT
};

/* The buffers of one list<cell> column. */
enum {
	C_LIST_OFF, C_NAME_OFF, C_NAME_DATA, C_TYPE, C_SLOT, C_INT, C_DOUBLE, C_TEXT_OFF,
	C_TEXT_DATA, C_BYTES_OFF, C_BYTES_DATA, C_COUNT
};

enum { L_KEY, L_VALUES, L_NEW_KEY, L_COUNT };

#define NBUF (R_COUNT + L_COUNT * C_COUNT)
#define CELL_BUF(list, which) (R_COUNT + (list) * C_COUNT + (which))

/* Offset buffers start with a 0 entry. */
static int
is_offsets(int i)
{
	if (i < R_COUNT)
		return i == R_OP_OFF || i == R_SCHEMA_OFF || i == R_TABLE_OFF;
	int c = (i - R_COUNT) % C_COUNT;
	return c == C_LIST_OFF || c == C_NAME_OFF || c == C_TEXT_OFF || c == C_BYTES_OFF;
}

/* A column of a statement: name and FieldType. */
typedef struct {
	const uint8_t *name;
	size_t nlen;
	int type;
} Col;

typedef struct {
	Col *v;
	size_t n, cap;
} Cols;

/* A decoded Value. */
typedef struct {
	int kase;
	uint64_t u; /* bool 0/1, int (two's complement), uint, timestamp */
	double d;
	const uint8_t *s; /* decimal, string, bytes */
	size_t n;
} Val;

/* Transaction-constant row columns. */
typedef struct {
	int64_t index, term, segment, position;
	uint64_t server_id, trans_id, epoch, author, commit_ts;
	uint64_t segment_id;
	int end_segment;
	int32_t statements;
} Meta;

typedef struct {
	PyObject_HEAD
	Buf b[NBUF];
	int64_t rows;
	Cols keys, vals;
	int has_filter;
	uint64_t f_server, f_first, f_last;
} Decoder;

/* ---------------------------------------------------------------- wire format */

typedef struct {
	const uint8_t *p, *end;
} Rd;

/* A varint of at most 10 bytes whose value fits 64 bits (FB otherwise): read_varint of
 * gateway/core/_protowire.h over the reader's window. */
static inline int
rd_varint(Rd *r, uint64_t *out)
{
	Py_ssize_t at = 0;
	if (read_varint(r->p, &at, r->end - r->p, out) < 0)
		return FB;
	r->p += at;
	return OK;
}

static inline int
rd_fixed64(Rd *r, uint64_t *out)
{
	if (r->end - r->p < 8)
		return FB;
	*out = read_fixed64(r->p);
	r->p += 8;
	return OK;
}

/* A field key: number >= 1 and wire type. */
static inline int
rd_tag(Rd *r, uint32_t *field, int *wt)
{
	uint64_t t;
	if (rd_varint(r, &t) != OK || t > UINT32_MAX || (t >> 3) == 0)
		return FB;
	*field = (uint32_t)(t >> 3);
	*wt = (int)(t & 7);
	return OK;
}

/* The bytes of a length-delimited field. */
static inline int
rd_bytes(Rd *r, const uint8_t **s, size_t *n)
{
	uint64_t len;
	if (rd_varint(r, &len) != OK || len > (uint64_t)(r->end - r->p))
		return FB;
	*s = r->p;
	*n = (size_t)len;
	r->p += len;
	return OK;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF), as upb checks. */
static int
utf8_ok(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t k;
		uint32_t cp;
		if (c >= 0xC2 && c <= 0xDF) {
			k = 1;
			cp = c & 0x1F;
		} else if (c >= 0xE0 && c <= 0xEF) {
			k = 2;
			cp = c & 0x0F;
		} else if (c >= 0xF0 && c <= 0xF4) {
			k = 3;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			uint8_t cc = s[i + j];
			if ((cc & 0xC0) != 0x80)
				return 0;
			cp = (cp << 6) | (cc & 0x3F);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return 0;
		i += k + 1;
	}
	return 1;
}

static inline int
rd_string(Rd *r, const uint8_t **s, size_t *n)
{
	if (rd_bytes(r, s, n) != OK || !utf8_ok(*s, *n))
		return FB;
	return OK;
}

/* [+-](digits[.digits*] | .digits)([eE][+-]digits{1,6})?: text decimal.Decimal accepts. */
static int
decimal_ok(const uint8_t *s, size_t n)
{
	size_t i = 0, digits = 0;
	if (i < n && (s[i] == '+' || s[i] == '-'))
		i++;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++, digits++;
	if (i < n && s[i] == '.') {
		i++;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++, digits++;
	}
	if (!digits)
		return 0;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		size_t e = 0;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++, e++;
		if (e == 0 || e > 6)
			return 0;
	}
	return i == n;
}

/* One gateway.v1.Value; exactly one case field (none: K_NONE). */
static int
parse_value(const uint8_t *p, size_t n, Val *v)
{
	Rd r = {p, p + n};
	v->kase = K_NONE;
	v->u = 0;
	v->d = 0.0;
	v->s = NULL;
	v->n = 0;
	while (r.p < r.end) {
		uint32_t f;
		int wt;
		uint64_t x;
		if (rd_tag(&r, &f, &wt) != OK || f >= K_COUNT || v->kase != K_NONE)
			return FB;
		switch (f) {
		case K_NULL:
		case K_BOOL:
		case K_INT:
		case K_UINT:
			if (wt != 0 || rd_varint(&r, &x) != OK)
				return FB;
			v->u = f == K_BOOL ? (x != 0) : f == K_INT ? (x >> 1) ^ (0 - (x & 1)) : x;
			break;
		case K_DOUBLE:
		case K_TIMESTAMP:
			if (wt != 1 || rd_fixed64(&r, &x) != OK)
				return FB;
			if (f == K_DOUBLE)
				memcpy(&v->d, &x, 8);
			else
				v->u = x;
			break;
		case K_DECIMAL:
		case K_STRING:
			if (wt != 2 || rd_string(&r, &v->s, &v->n) != OK)
				return FB;
			if (f == K_DECIMAL && !decimal_ok(v->s, v->n))
				return FB;
			break;
		case K_BYTES:
			if (wt != 2 || rd_bytes(&r, &v->s, &v->n) != OK)
				return FB;
			break;
		default:
			return FB;
		}
		v->kase = (int)f;
	}
	return OK;
}

/* One gateway.v1.FieldMetadata; with check_type, a type outside 1..13 is FB (the Python
 * decoder rejects it). */
static int
parse_field(const uint8_t *p, size_t n, Col *c, int check_type)
{
	Rd r = {p, p + n};
	int seen_name = 0, seen_type = 0;
	c->name = (const uint8_t *)"";
	c->nlen = 0;
	c->type = 0;
	while (r.p < r.end) {
		uint32_t f;
		int wt;
		uint64_t x;
		if (rd_tag(&r, &f, &wt) != OK)
			return FB;
		if (f == FIELD_METADATA_NAME && wt == 2 && !seen_name) {
			if (rd_string(&r, &c->name, &c->nlen) != OK)
				return FB;
			seen_name = 1;
		} else if (f == FIELD_METADATA_TYPE && wt == 0 && !seen_type) {
			if (rd_varint(&r, &x) != OK)
				return FB;
			c->type = x <= MAX_TYPE ? (int)x : -1;
			seen_type = 1;
		} else {
			return FB;
		}
	}
	if (check_type && (c->type < 1 || c->type > MAX_TYPE))
		return FB;
	return OK;
}

static int
cols_push(Cols *cs, const Col *c)
{
	if (cs->n == cs->cap) {
		size_t cap = cs->cap ? 2 * cs->cap : 16;
		Col *v = PyMem_Realloc(cs->v, cap * sizeof(Col));
		if (v == NULL)
			return NOMEM;
		cs->v = v;
		cs->cap = cap;
	}
	cs->v[cs->n++] = *c;
	return OK;
}

/* ---------------------------------------------------------------- appending rows */

/* A cell of column c holding v; FB if v is not of the column's case (null is fine). */
static int
put_cell(Decoder *d, int list, const Col *c, const Val *v)
{
	Buf *b = d->b + CELL_BUF(list, 0);
	int rc;
	if (v->kase != K_NULL && v->kase != case_of_type[c->type])
		return FB;
	uint8_t slot = slot_of_case[v->kase];
	if ((rc = put_str(b + C_NAME_OFF, b + C_NAME_DATA, c->name, c->nlen)) != OK)
		return rc;
	if (put_i32(b + C_TYPE, c->type) || put_u8(b + C_SLOT, slot) ||
	    put_i64(b + C_INT, slot == 0 ? (int64_t)v->u : 0) ||
	    buf_put(b + C_DOUBLE, &v->d, 8))
		return NOMEM;
	if ((rc = put_str(b + C_TEXT_OFF, b + C_TEXT_DATA, v->s, slot == 2 ? v->n : 0)) != OK)
		return rc;
	return put_str(b + C_BYTES_OFF, b + C_BYTES_DATA, v->s, slot == 3 ? v->n : 0);
}

/* End the current row of a cell list. */
static int
close_cells(Decoder *d, int list)
{
	Buf *b = d->b + CELL_BUF(list, 0);
	int64_t cells = (int64_t)(b[C_TYPE].len / 4);
	if (cells > INT32_MAX)
		return FB;
	return put_i32(b + C_LIST_OFF, (int32_t)cells) ? NOMEM : OK;
}

static const uint8_t OP_INSERT[] = "INSERT", OP_UPDATE[] = "UPDATE", OP_DELETE[] = "DELETE",
		     OP_UPSERT[] = "UPSERT", OP_SEGMENT[] = "SEGMENT";

/* The row columns of one row (its cells are added separately). */
static int
put_row(Decoder *d, const Meta *m, int32_t s_no, int32_t op_no, const uint8_t *op,
	const uint8_t *schema, size_t slen, const uint8_t *table, size_t tlen)
{
	Buf *b = d->b;
	int rc;
	if (put_i64(b + R_LOG_INDEX, m->index) || put_i64(b + R_TERM, m->term) ||
	    put_i64(b + R_SEGMENT, m->segment) || put_i64(b + R_POSITION, m->position) ||
	    put_i64(b + R_SERVER_ID, (int64_t)m->server_id) ||
	    put_i64(b + R_TRANS_ID, (int64_t)m->trans_id) || put_i64(b + R_EPOCH, (int64_t)m->epoch) ||
	    put_i64(b + R_AUTHOR, (int64_t)m->author) ||
	    put_i64(b + R_COMMIT_TS, (int64_t)m->commit_ts) ||
	    put_i32(b + R_SEGMENT_ID, (int32_t)m->segment_id) ||
	    put_u8(b + R_END_SEGMENT, (uint8_t)m->end_segment) || put_u8(b + R_ROLLBACK, 0) ||
	    put_i32(b + R_SEGMENT_STATEMENTS, m->statements) || put_i32(b + R_STATEMENT, s_no) ||
	    put_i32(b + R_OP_NO, op_no))
		return NOMEM;
	if ((rc = put_str(b + R_OP_OFF, b + R_OP_DATA, op, strlen((const char *)op))) != OK ||
	    (rc = put_str(b + R_SCHEMA_OFF, b + R_SCHEMA_DATA, schema, slen)) != OK ||
	    (rc = put_str(b + R_TABLE_OFF, b + R_TABLE_DATA, table, tlen)) != OK)
		return rc;
	d->rows++;
	return OK;
}

/* ---------------------------------------------------------------- statements */

enum { S_INSERT = STATEMENT_INSERT, S_UPDATE = STATEMENT_UPDATE, S_DELETE = STATEMENT_DELETE };
_Static_assert(S_UPDATE == S_INSERT + 1 && S_DELETE == S_UPDATE + 1,
	       "gateway.v1.Statement: do_statement takes the row kinds as one range");
/* do_rows and do_record read the three row statements with one set of field numbers. */
_Static_assert(UPDATE_STATEMENT_TABLE == INSERT_STATEMENT_TABLE &&
	       DELETE_STATEMENT_TABLE == INSERT_STATEMENT_TABLE &&
	       UPDATE_STATEMENT_KEY_FIELDS == INSERT_STATEMENT_KEY_FIELDS &&
	       DELETE_STATEMENT_KEY_FIELDS == INSERT_STATEMENT_KEY_FIELDS &&
	       UPDATE_STATEMENT_SET_FIELDS == INSERT_STATEMENT_FIELDS &&
	       DELETE_STATEMENT_FIELDS == INSERT_STATEMENT_FIELDS &&
	       UPDATE_STATEMENT_RECORDS == INSERT_STATEMENT_RECORDS &&
	       DELETE_STATEMENT_RECORDS == INSERT_STATEMENT_RECORDS,
	       "gateway.v1 Insert/Update/DeleteStatement: fields 1..4 no longer line up");
_Static_assert(UPDATE_RECORD_KEY_VALUES == INSERT_RECORD_KEY_VALUES &&
	       DELETE_RECORD_KEY_VALUES == INSERT_RECORD_KEY_VALUES &&
	       UPDATE_RECORD_BEFORE_VALUES == DELETE_RECORD_BEFORE_VALUES,
	       "gateway.v1 Insert/Update/DeleteRecord: key and before values no longer line up");

/* One record of a row statement: key cells, value cells (INSERT after_values, UPDATE
 * after_values; DELETE none), counts checked as the Python decoder checks them. */
static int
do_record(Decoder *d, int kind, const uint8_t *p, size_t n)
{
	Rd r = {p, p + n};
	size_t ik = 0, iv = 0, ib = 0;
	int rc;
	while (r.p < r.end) {
		uint32_t f;
		int wt;
		const uint8_t *s;
		size_t len;
		Val v;
		if (rd_tag(&r, &f, &wt) != OK || wt != 2 || rd_bytes(&r, &s, &len) != OK)
			return FB;
		if ((rc = parse_value(s, len, &v)) != OK)
			return rc;
		int after = (kind == S_INSERT && f == INSERT_RECORD_AFTER_VALUES) ||
			    (kind == S_UPDATE && f == UPDATE_RECORD_AFTER_VALUES);
		int before = kind != S_INSERT && f == UPDATE_RECORD_BEFORE_VALUES;
		if (f == INSERT_RECORD_KEY_VALUES) {
			if (ik >= d->keys.n)
				return FB;
			if ((rc = put_cell(d, L_KEY, &d->keys.v[ik++], &v)) != OK)
				return rc;
		} else if (after) {
			if (iv >= d->vals.n)
				return FB;
			if ((rc = put_cell(d, L_VALUES, &d->vals.v[iv++], &v)) != OK)
				return rc;
		} else if (before) {
			ib++; /* parsed, not used: only counted (UPDATE) */
		} else {
			return FB;
		}
	}
	if (ik != d->keys.n || (kind != S_DELETE && iv != d->vals.n) ||
	    (kind == S_UPDATE && ib != 0 && ib != d->vals.n))
		return FB;
	if ((rc = close_cells(d, L_KEY)) != OK || (rc = close_cells(d, L_VALUES)) != OK)
		return rc;
	return close_cells(d, L_NEW_KEY);
}

/* INSERT, UPDATE or DELETE statement body: rows appended, *op_no advanced. */
static int
do_rows(Decoder *d, const Meta *m, int kind, const uint8_t *p, size_t n, int32_t s_no,
	int32_t *op_no)
{
	Rd r = {p, p + n};
	const uint8_t *schema = (const uint8_t *)"", *table = (const uint8_t *)"";
	size_t slen = 0, tlen = 0;
	int seen_table = 0, rc;
	d->keys.n = 0;
	d->vals.n = 0;
	/* pass 1: table and columns (the wire order of fields is free) */
	while (r.p < r.end) {
		uint32_t f;
		int wt;
		const uint8_t *s;
		size_t len;
		Col c;
		if (rd_tag(&r, &f, &wt) != OK || wt != 2 || rd_bytes(&r, &s, &len) != OK)
			return FB;
		if (f == INSERT_STATEMENT_TABLE) {
			Rd t = {s, s + len};
			int seen_s = 0, seen_t = 0;
			if (seen_table)
				return FB; /* a repeated message field is merged: not here */
			seen_table = 1;
			while (t.p < t.end) {
				uint32_t tf;
				int twt;
				if (rd_tag(&t, &tf, &twt) != OK || twt != 2)
					return FB;
				if (tf == TABLE_METADATA_SCHEMA_NAME && !seen_s) {
					if (rd_string(&t, &schema, &slen) != OK)
						return FB;
					seen_s = 1;
				} else if (tf == TABLE_METADATA_TABLE_NAME && !seen_t) {
					if (rd_string(&t, &table, &tlen) != OK)
						return FB;
					seen_t = 1;
				} else {
					return FB;
				}
			}
		} else if (f == INSERT_STATEMENT_KEY_FIELDS || f == INSERT_STATEMENT_FIELDS) {
			/* key_fields; fields / set_fields (a DELETE's fields are not checked) */
			if (parse_field(s, len, &c, f == INSERT_STATEMENT_KEY_FIELDS || kind != S_DELETE) != OK)
				return FB;
			if (cols_push(f == INSERT_STATEMENT_KEY_FIELDS ? &d->keys : &d->vals, &c) != OK)
				return NOMEM;
		} else if (f != INSERT_STATEMENT_RECORDS) {
			return FB;
		}
	}
	if (tlen == 0 || d->keys.n == 0)
		return FB;
	if (kind == S_UPDATE) /* setting a key column: MOVE rules, in Python */
		for (size_t i = 0; i < d->vals.n; i++)
			for (size_t j = 0; j < d->keys.n; j++)
				if (d->vals.v[i].nlen == d->keys.v[j].nlen &&
				    memcmp(d->vals.v[i].name, d->keys.v[j].name, d->keys.v[j].nlen) == 0)
					return FB;
	const uint8_t *op = kind == S_INSERT ? OP_INSERT : kind == S_UPDATE ? OP_UPDATE : OP_DELETE;
	/* pass 2: records */
	r.p = p;
	while (r.p < r.end) {
		uint32_t f;
		int wt;
		const uint8_t *s;
		size_t len;
		if (rd_tag(&r, &f, &wt) != OK || rd_bytes(&r, &s, &len) != OK)
			return FB;
		if (f != INSERT_STATEMENT_RECORDS)
			continue;
		if (*op_no == INT32_MAX)
			return FB;
		if ((rc = put_row(d, m, s_no, (*op_no)++, op, schema, slen, table, tlen)) != OK ||
		    (rc = do_record(d, kind, s, len)) != OK)
			return rc;
	}
	return OK;
}

static const Col APPLY_SERVER = {(const uint8_t *)"server_id", 9, 3};
static const Col APPLY_EPOCH = {(const uint8_t *)"epoch", 5, 3};
static const Col APPLY_BY = {(const uint8_t *)"applied_by", 10, 3};

/* ApplyStatus: one UPSERT row of gateway.apply_status. */
static int
do_apply_status(Decoder *d, const Meta *m, const uint8_t *p, size_t n, int32_t s_no,
		int32_t *op_no)
{
	Rd r = {p, p + n};
	uint64_t vals[4] = {0, 0, 0, 0}; /* by field number */
	_Static_assert(APPLY_STATUS_SERVER_ID == 1 && APPLY_STATUS_EPOCH == 2 &&
		       APPLY_STATUS_APPLIED_BY == 3, "gateway.v1.ApplyStatus: vals[] is by field");
	int rc;
	while (r.p < r.end) {
		uint32_t f;
		int wt;
		uint64_t x;
		if (rd_tag(&r, &f, &wt) != OK || f < APPLY_STATUS_SERVER_ID || f > APPLY_STATUS_APPLIED_BY ||
		    wt != 0 || rd_varint(&r, &x) != OK)
			return FB;
		if (f != APPLY_STATUS_EPOCH && x > UINT32_MAX)
			return FB; /* uint32 fields: upb truncates, we do not guess */
		vals[f] = x; /* a repeated scalar: the last one wins, as in upb */
	}
	Val v = {K_UINT, 0, 0.0, NULL, 0};
	if (*op_no == INT32_MAX)
		return FB;
	if ((rc = put_row(d, m, s_no, (*op_no)++, OP_UPSERT, (const uint8_t *)"gateway", 7,
			  (const uint8_t *)"apply_status", 12)) != OK)
		return rc;
	v.u = vals[APPLY_STATUS_SERVER_ID];
	if ((rc = put_cell(d, L_KEY, &APPLY_SERVER, &v)) != OK)
		return rc;
	v.u = vals[APPLY_STATUS_EPOCH];
	if ((rc = put_cell(d, L_VALUES, &APPLY_EPOCH, &v)) != OK)
		return rc;
	v.u = vals[APPLY_STATUS_APPLIED_BY];
	if ((rc = put_cell(d, L_VALUES, &APPLY_BY, &v)) != OK)
		return rc;
	if ((rc = close_cells(d, L_KEY)) != OK || (rc = close_cells(d, L_VALUES)) != OK)
		return rc;
	return close_cells(d, L_NEW_KEY);
}

/* One Statement: exactly one kind set, and not SQL. */
static int
do_statement(Decoder *d, const Meta *m, const uint8_t *p, size_t n, int32_t s_no,
	     int32_t *op_no)
{
	Rd r = {p, p + n};
	uint32_t f;
	int wt;
	const uint8_t *s;
	size_t len;
	if (rd_tag(&r, &f, &wt) != OK || wt != 2 || rd_bytes(&r, &s, &len) != OK || r.p != r.end)
		return FB; /* no kind, or several: Python */
	if (f >= S_INSERT && f <= S_DELETE)
		return do_rows(d, m, (int)f, s, len, s_no, op_no);
	if (f == STATEMENT_APPLY_STATUS)
		return do_apply_status(d, m, s, len, s_no, op_no);
	return FB; /* SQL or unknown */
}

/* ---------------------------------------------------------------- transactions */

/* Transaction header fields (pass 1); statements are counted, not read. */
static int
parse_header(const uint8_t *p, size_t n, Meta *m)
{
	Rd r = {p, p + n};
	int seen_gtid = 0;
	int64_t statements = 0;
	while (r.p < r.end) {
		uint32_t f;
		int wt;
		uint64_t x;
		const uint8_t *s;
		size_t len;
		if (rd_tag(&r, &f, &wt) != OK)
			return FB;
		switch (f) {
		case TRANSACTION_GTID:
			if (wt != 2 || seen_gtid || rd_bytes(&r, &s, &len) != OK)
				return FB;
			seen_gtid = 1;
			{
				Rd g = {s, s + len};
				while (g.p < g.end) {
					uint32_t gf;
					int gwt;
					if (rd_tag(&g, &gf, &gwt) != OK || gwt != 0 ||
					    (gf != GTID_SERVER_ID && gf != GTID_TRANS_ID) ||
					    rd_varint(&g, &x) != OK)
						return FB;
					if (gf == GTID_SERVER_ID) {
						if (x > UINT32_MAX)
							return FB;
						m->server_id = x;
					} else {
						m->trans_id = x;
					}
				}
			}
			break;
		case TRANSACTION_EPOCH:
		case TRANSACTION_AUTHOR:
		case TRANSACTION_SEGMENT_ID:
		case TRANSACTION_END_SEGMENT:
			if (wt != 0 || rd_varint(&r, &x) != OK)
				return FB;
			if ((f == TRANSACTION_AUTHOR || f == TRANSACTION_SEGMENT_ID) && x > UINT32_MAX)
				return FB;
			if (f == TRANSACTION_EPOCH)
				m->epoch = x;
			else if (f == TRANSACTION_AUTHOR)
				m->author = x;
			else if (f == TRANSACTION_SEGMENT_ID)
				m->segment_id = x;
			else
				m->end_segment = x != 0;
			break;
		case TRANSACTION_START_TIMESTAMP_NS:
		case TRANSACTION_COMMIT_TIMESTAMP_NS:
			if (wt != 1 || rd_fixed64(&r, &x) != OK)
				return FB;
			if (f == TRANSACTION_COMMIT_TIMESTAMP_NS)
				m->commit_ts = x;
			break;
		case TRANSACTION_STATEMENTS:
			if (wt != 2 || rd_bytes(&r, &s, &len) != OK)
				return FB;
			statements++;
			break;
		case TRANSACTION_IDEMPOTENCY_KEY:
			if (wt != 2 || rd_string(&r, &s, &len) != OK)
				return FB;
			break;
		default: /* rollback (skipped or a marker with rollback: Python), unknown */
			return FB;
		}
	}
	if (m->trans_id >> 63 || m->epoch >> 63 || m->commit_ts >> 63 ||
	    m->segment_id > INT32_MAX || statements > INT32_MAX)
		return FB; /* rejected by the Python decoder, or past its int32 columns */
	m->statements = (int32_t)statements;
	return OK;
}

static int
do_transaction(Decoder *d, const uint8_t *p, size_t n, Meta *m)
{
	int rc;
	if ((rc = parse_header(p, n, m)) != OK)
		return rc;
	Rd r = {p, p + n};
	int32_t s_no = 0, op_no = 0;
	while (r.p < r.end) {
		uint32_t f;
		int wt;
		const uint8_t *s = NULL;
		size_t len = 0;
		uint64_t x;
		if (rd_tag(&r, &f, &wt) != OK)
			return FB;
		if (wt == 0)
			rc = rd_varint(&r, &x);
		else if (wt == 1)
			rc = rd_fixed64(&r, &x);
		else
			rc = rd_bytes(&r, &s, &len); /* pass 1 vetted the wire types */
		if (rc != OK)
			return FB;
		if (f == TRANSACTION_STATEMENTS &&
		    (rc = do_statement(d, m, s, len, ++s_no, &op_no)) != OK)
			return rc;
	}
	if (m->segment_id != 1 || !m->end_segment) { /* the segment's marker row */
		if ((rc = put_row(d, m, 0, op_no, OP_SEGMENT, (const uint8_t *)"", 0,
				  (const uint8_t *)"", 0)) != OK ||
		    (rc = close_cells(d, L_KEY)) != OK || (rc = close_cells(d, L_VALUES)) != OK ||
		    (rc = close_cells(d, L_NEW_KEY)) != OK)
			return rc;
	}
	return OK;
}

/* ---------------------------------------------------------------- the Python type */

static int
reset_buffers(Decoder *d)
{
	for (int i = 0; i < NBUF; i++) {
		d->b[i].len = 0;
		if (is_offsets(i) && put_i32(d->b + i, 0) != OK)
			return NOMEM;
	}
	d->rows = 0;
	return OK;
}

static int
Decoder_init(Decoder *d, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"gtids", NULL};
	PyObject *gtids = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:Decoder", kwlist, &gtids))
		return -1;
	d->has_filter = gtids != Py_None;
	if (d->has_filter) {
		unsigned long long a, b, c;
		if (!PyArg_ParseTuple(gtids, "KKK;gtids must be (server_id, first, last)", &a, &b, &c))
			return -1;
		d->f_server = a;
		d->f_first = b;
		d->f_last = c;
	}
	if (reset_buffers(d) != OK) {
		PyErr_NoMemory();
		return -1;
	}
	return 0;
}

static void
Decoder_dealloc(Decoder *d)
{
	for (int i = 0; i < NBUF; i++)
		PyMem_Free(d->b[i].p);
	PyMem_Free(d->keys.v);
	PyMem_Free(d->vals.v);
	Py_TYPE(d)->tp_free((PyObject *)d);
}

PyDoc_STRVAR(add_doc,
"add(payload, index, term, segment, position) -> int\n\n"
"Decode the tagged Transaction ``payload`` (tag byte 1, then the message) and append its rows.\n"
"Return the number of rows appended, FILTERED (-2) when its GTID is outside the filter, or\n"
"FALLBACK (-1) with nothing appended when the Python decoder must decode it.");

static PyObject *
Decoder_add(Decoder *d, PyObject *args)
{
	Py_buffer view;
	long long index, term, segment, position;
	size_t marks[NBUF];
	if (!PyArg_ParseTuple(args, "y*LLLL:add", &view, &index, &term, &segment, &position))
		return NULL;
	int64_t rows0 = d->rows;
	for (int i = 0; i < NBUF; i++)
		marks[i] = d->b[i].len;
	Meta m;
	memset(&m, 0, sizeof m);
	m.index = index;
	m.term = term;
	m.segment = segment;
	m.position = position;
	const uint8_t *p = view.buf;
	int rc = FB;
	if (view.len >= 1 && p[0] == 1)
		rc = do_transaction(d, p + 1, (size_t)view.len - 1, &m);
	PyBuffer_Release(&view);
	long result = (long)(d->rows - rows0);
	if (rc == OK && d->has_filter &&
	    !(m.server_id == d->f_server && d->f_first <= m.trans_id && m.trans_id <= d->f_last)) {
		rc = FB;
		result = FILTERED;
	} else if (rc != OK) {
		result = FALLBACK;
	}
	if (rc != OK) { /* all or nothing */
		for (int i = 0; i < NBUF; i++)
			d->b[i].len = marks[i];
		d->rows = rows0;
		if (rc == NOMEM)
			return PyErr_NoMemory();
	}
	return PyLong_FromLong(result);
}

static PyObject *
bytes_of(const Buf *b)
{
	return PyBytes_FromStringAndSize((const char *)b->p, (Py_ssize_t)b->len);
}

/* One byte per item (nonzero: set) -> an Arrow bitmap (LSB first). */
static PyObject *
bitmap_of(const uint8_t *items, size_t n, size_t stride, uint8_t want, int equal)
{
	PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((n + 7) / 8));
	if (out == NULL)
		return NULL;
	uint8_t *bits = (uint8_t *)PyBytes_AS_STRING(out);
	memset(bits, 0, (n + 7) / 8);
	for (size_t i = 0; i < n; i++) {
		uint8_t x = items[i * stride];
		if (equal ? x == want : x != 0)
			bits[i >> 3] |= (uint8_t)(1u << (i & 7));
	}
	return out;
}

PyDoc_STRVAR(flush_doc,
"flush() -> tuple\n\n"
"The appended rows as Arrow buffers, then start an empty batch: (rows, 9 int64 columns,\n"
"segment_id, end_segment bits, rollback bits, segment_statements, statement, op_no,\n"
"op offsets, op data, schema offsets, schema data, table offsets, table data, key cells,\n"
"values cells, new_key cells); cells = (count, list offsets, name offsets, name data, type,\n"
"int_v validity, int_v, double_v validity, double_v, text_v validity, text_v offsets,\n"
"text_v data, bytes_v validity, bytes_v offsets, bytes_v data).");

static PyObject *
Decoder_flush(Decoder *d, PyObject *Py_UNUSED(ignored))
{
	size_t rows = (size_t)d->rows;
	PyObject *out = PyTuple_New(1 + R_COUNT + L_COUNT);
	if (out == NULL)
		return NULL;
	PyObject *x = PyLong_FromSize_t(rows);
	if (x == NULL)
		goto fail;
	PyTuple_SET_ITEM(out, 0, x);
	for (int i = 0; i < R_COUNT; i++) {
		if (i == R_END_SEGMENT || i == R_ROLLBACK)
			x = bitmap_of(d->b[i].p, rows, 1, 0, 0);
		else
			x = bytes_of(d->b + i);
		if (x == NULL)
			goto fail;
		PyTuple_SET_ITEM(out, 1 + i, x);
	}
	for (int l = 0; l < L_COUNT; l++) {
		const Buf *b = d->b + CELL_BUF(l, 0);
		size_t cells = b[C_SLOT].len;
		PyObject *t = Py_BuildValue(
		    "(nNNNNNNNNNNNNNN)", (Py_ssize_t)cells, bytes_of(b + C_LIST_OFF),
		    bytes_of(b + C_NAME_OFF), bytes_of(b + C_NAME_DATA), bytes_of(b + C_TYPE),
		    bitmap_of(b[C_SLOT].p, cells, 1, 0, 1), bytes_of(b + C_INT),
		    bitmap_of(b[C_SLOT].p, cells, 1, 1, 1), bytes_of(b + C_DOUBLE),
		    bitmap_of(b[C_SLOT].p, cells, 1, 2, 1), bytes_of(b + C_TEXT_OFF),
		    bytes_of(b + C_TEXT_DATA), bitmap_of(b[C_SLOT].p, cells, 1, 3, 1),
		    bytes_of(b + C_BYTES_OFF), bytes_of(b + C_BYTES_DATA));
		if (t == NULL)
			goto fail;
		PyTuple_SET_ITEM(out, 1 + R_COUNT + l, t);
	}
	if (reset_buffers(d) != OK) {
		PyErr_NoMemory();
		goto fail;
	}
	return out;
fail:
	Py_DECREF(out);
	return NULL;
}

static PyObject *
Decoder_rows(Decoder *d, void *Py_UNUSED(closure))
{
	return PyLong_FromLongLong(d->rows);
}

static PyMethodDef Decoder_methods[] = {
	{"add", (PyCFunction)Decoder_add, METH_VARARGS, add_doc},
	{"flush", (PyCFunction)Decoder_flush, METH_NOARGS, flush_doc},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef Decoder_getset[] = {
	{"rows", (getter)Decoder_rows, NULL, "rows appended since the last flush", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DecoderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "spark_applier._txndecode.Decoder",
	.tp_doc = PyDoc_STR("Decoder(gtids=None): Transaction payloads -> Arrow column buffers "
			    "(gtids: (server_id, first, last) keeps only those GTIDs)."),
	.tp_basicsize = sizeof(Decoder),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Decoder_init,
	.tp_dealloc = (destructor)Decoder_dealloc,
	.tp_methods = Decoder_methods,
	.tp_getset = Decoder_getset,
};

static PyObject *
case_of_type_py(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
	static const char *names[K_COUNT] = {
	    NULL, "null_value", "bool_value", "int_value", "uint_value", "double_value",
	    "decimal_value", "string_value", "bytes_value", "timestamp_ns",
	};
	PyObject *out = PyDict_New();
	if (out == NULL)
		return NULL;
	for (int t = 1; t <= MAX_TYPE; t++) {
		PyObject *k = PyLong_FromLong(t), *v = PyUnicode_FromString(names[case_of_type[t]]);
		if (k == NULL || v == NULL || PyDict_SetItem(out, k, v) < 0) {
			Py_XDECREF(k);
			Py_XDECREF(v);
			Py_DECREF(out);
			return NULL;
		}
		Py_DECREF(k);
		Py_DECREF(v);
	}
	return out;
}

static PyMethodDef methods[] = {
	{"case_of_type", case_of_type_py, METH_NOARGS,
	 "FieldType -> Value case name, as compiled in (must equal rowops.CASE_OF_TYPE)."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "_txndecode",
	"C fast path of spark_applier.decode (see decode.py for the specification).", -1, methods,
};

PyMODINIT_FUNC
PyInit__txndecode(void)
{
	if (PyType_Ready(&DecoderType) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&module);
	if (m == NULL)
		return NULL;
	Py_INCREF(&DecoderType);
	if (PyModule_AddObject(m, "Decoder", (PyObject *)&DecoderType) < 0 ||
	    PyModule_AddIntConstant(m, "FALLBACK", FALLBACK) < 0 ||
	    PyModule_AddIntConstant(m, "FILTERED", FILTERED) < 0) {
		Py_DECREF(&DecoderType);
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
