/*
 * C accelerator for gateway.core.records: the hot loops of the stuffed record stream.
 *
 * The pure-Python code in records.py and stuffing.py is the specification; this module must
 * produce identical bytes and identical records (tests/core/test_accelerator.py checks both
 * on random and damaged inputs). The encoder and decoder core, with the format's summary, is
 * _stuffing.h (shared with gateway.core.lsm._block).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "_protowire.h"
#include "_stuffing.h"

/* ---------------------------------------------------------------- records */

static int
parse_generation(PyObject *obj, uint32_t *gen)
{
	unsigned long long v;
	if (!PyLong_Check(obj)) {
		PyErr_SetString(PyExc_TypeError, "generation must be an int");
		return -1;
	}
	v = PyLong_AsUnsignedLongLong(obj);
	if (v == (unsigned long long)-1 && PyErr_Occurred()) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "generation %R does not fit in 32 bits", obj);
		return -1;
	}
	if (v > 0xFFFFFFFFull) {
		PyErr_Format(PyExc_ValueError, "generation %R does not fit in 32 bits", obj);
		return -1;
	}
	*gen = (uint32_t)v;
	return 0;
}

/*
 * encode_record's scratch (header + prefix + payload, unstuffed), kept between calls up to
 * SCRATCH_KEEP bytes: a fresh buffer per record of hundreds of KiB came from fresh pages each
 * time (page faults and zeroing cost more than the copy). Only used with the GIL held and
 * never across a call that could release it, so one buffer serves every thread.
 */
#define SCRATCH_KEEP ((size_t)8 << 20)
static uint8_t *kept_scratch = NULL;
static size_t kept_scratch_size = 0;

static uint8_t *
scratch_for(size_t need, uint8_t *stack_scratch, size_t stack_size)
{
	if (need <= stack_size)
		return stack_scratch;
	if (need > SCRATCH_KEEP)
		return PyMem_Malloc(need);
	if (need > kept_scratch_size) {
		size_t size = need < ((size_t)64 << 10) ? ((size_t)64 << 10) : need;
		uint8_t *grown = PyMem_Realloc(kept_scratch, size);
		if (grown == NULL)
			return NULL;
		kept_scratch = grown;
		kept_scratch_size = size;
	}
	return kept_scratch;
}

static void
scratch_done(uint8_t *scratch, uint8_t *stack_scratch)
{
	if (scratch != stack_scratch && scratch != kept_scratch)
		PyMem_Free(scratch);
}

/*
 * A new bytes object holding the record of payload head[0..nh) + body[0..nb) (either part may
 * be empty), generation gen; NULL with an error set. The output is allocated before the
 * shared scratch is taken: allocating may run a collection, hence Python code that could use
 * the scratch; nothing between scratch_for and scratch_done can.
 */
static PyObject *
record_bytes(const void *head, size_t nh, const void *body, size_t nb, uint32_t gen)
{
	uint8_t stack_scratch[512];
	size_t n = nh + nb, rec = n + HEADER_SIZE;
	PyObject *result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(stuffed_bound(rec) + 2));
	if (result == NULL)
		return NULL;
	uint8_t *scratch = scratch_for(rec, stack_scratch, sizeof(stack_scratch));
	if (scratch == NULL) {
		Py_DECREF(result);
		return PyErr_NoMemory();
	}
	if (nh)
		memcpy(scratch + HEADER_SIZE, head, nh);
	if (nb)
		memcpy(scratch + HEADER_SIZE + nh, body, nb);
	size_t w = encode_in_place((uint8_t *)PyBytes_AS_STRING(result), scratch, n, gen);
	scratch_done(scratch, stack_scratch);
	if (_PyBytes_Resize(&result, (Py_ssize_t)w) < 0)
		return NULL;
	return result;
}

static PyObject *
py_encode_record(PyObject *self, PyObject *args)
{
	Py_buffer payload, prefix = { 0 };
	PyObject *gen_obj = NULL;
	uint32_t gen = 0;
	PyObject *result;

	if (!PyArg_ParseTuple(args, "y*|Oy*", &payload, &gen_obj, &prefix))
		return NULL;
	if (gen_obj != NULL && parse_generation(gen_obj, &gen) < 0) {
		PyBuffer_Release(&payload);
		if (prefix.obj != NULL)
			PyBuffer_Release(&prefix);
		return NULL;
	}
	result = record_bytes(prefix.obj != NULL ? prefix.buf : NULL,
	    prefix.obj != NULL ? (size_t)prefix.len : 0, payload.buf, (size_t)payload.len, gen);
	PyBuffer_Release(&payload);
	if (prefix.obj != NULL)
		PyBuffer_Release(&prefix);
	return result;
}

static PyObject *
py_encode_records(PyObject *self, PyObject *args)
{
	PyObject *seq, *gen_obj = NULL, *fast, *result = NULL;
	uint32_t gen = 0;
	Py_ssize_t count, i;
	size_t total = 0, max_rec = 0, pos = 0;
	uint8_t *scratch = NULL;

	if (!PyArg_ParseTuple(args, "O|O", &seq, &gen_obj))
		return NULL;
	if (gen_obj != NULL && parse_generation(gen_obj, &gen) < 0)
		return NULL;
	fast = PySequence_Fast(seq, "payloads must be a sequence of bytes");
	if (fast == NULL)
		return NULL;
	count = PySequence_Fast_GET_SIZE(fast);
	for (i = 0; i < count; i++) {
		PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
		if (!PyBytes_Check(item)) {
			PyErr_Format(PyExc_TypeError, "payload %zd is not bytes", i);
			goto done;
		}
		size_t rec = (size_t)PyBytes_GET_SIZE(item) + HEADER_SIZE;
		total += stuffed_bound(rec) + 2;
		if (rec > max_rec)
			max_rec = rec;
	}
	scratch = PyMem_Malloc(max_rec ? max_rec : 1);
	if (scratch == NULL) {
		PyErr_NoMemory();
		goto done;
	}
	result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
	if (result == NULL)
		goto done;
	for (i = 0; i < count; i++) {
		PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
		pos += encode_one((uint8_t *)PyBytes_AS_STRING(result) + pos, scratch,
		    (const uint8_t *)PyBytes_AS_STRING(item), (size_t)PyBytes_GET_SIZE(item), gen);
	}
	_PyBytes_Resize(&result, (Py_ssize_t)pos);
done:
	PyMem_Free(scratch);
	Py_DECREF(fast);
	return result;
}

/*
 * Decode one chunk (stuffed bytes between separators). On success sets *gen and returns a new
 * bytes object with the payload; returns Py_None (borrowed, not incref'd) when invalid; NULL on
 * memory error.
 */
static PyObject *
decode_chunk(const uint8_t *p, size_t n, uint32_t *gen)
{
	uint8_t stack[1024];
	uint8_t *buf = n <= sizeof(stack) ? stack : PyMem_Malloc(n);
	const uint8_t *payload;
	PyObject *out = Py_None;
	if (buf == NULL)
		return PyErr_NoMemory();
	Py_ssize_t m = record_payload(p, n, buf, &payload, gen);
	if (m >= 0)
		out = PyBytes_FromStringAndSize((const char *)payload, m);
	if (buf != stack)
		PyMem_Free(buf);
	return out;
}

static PyObject *
py_decode_record(PyObject *self, PyObject *args)
{
	Py_buffer chunk;
	uint32_t gen = 0;
	PyObject *payload, *result;

	if (!PyArg_ParseTuple(args, "y*", &chunk))
		return NULL;
	payload = decode_chunk(chunk.buf, (size_t)chunk.len, &gen);
	PyBuffer_Release(&chunk);
	if (payload == NULL)
		return NULL;
	if (payload == Py_None)
		Py_RETURN_NONE;
	result = Py_BuildValue("(kN)", (unsigned long)gen, payload);
	return result;
}

static PyObject *
make_record(PyObject *cls, Py_ssize_t offset, Py_ssize_t end, uint32_t gen, PyObject *payload,
    Py_ssize_t position)
{
	PyObject *items, *args, *rec;
	items = Py_BuildValue("(nnkNn)", offset, end, (unsigned long)gen, payload, position);
	if (items == NULL)
		return NULL;
	args = PyTuple_Pack(1, items);
	Py_DECREF(items);
	if (args == NULL)
		return NULL;
	/* tuple.__new__(cls, items): builds the NamedTuple without running Python code. */
	rec = PyTuple_Type.tp_new((PyTypeObject *)cls, args, NULL);
	Py_DECREF(args);
	return rec;
}

/*
 * scan_batch(buf, start, stop, head, cls, max_records) -> (list, resume)
 *
 * Reads the chunks whose position is in [start, stop) (see records._chunks_py; head is the
 * first nonzero byte of buf) and returns up to max_records valid records as cls instances.
 * resume is the position to pass as start to continue, or -1 when the range is exhausted.
 */
static PyObject *
py_scan_batch(PyObject *self, PyObject *args)
{
	Py_buffer view;
	Py_ssize_t start, stop, head, max_records;
	PyObject *cls, *list = NULL, *result = NULL;
	Py_ssize_t resume = -1;

	if (!PyArg_ParseTuple(args, "y*nnnOn", &view, &start, &stop, &head, &cls, &max_records))
		return NULL;
	if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
		PyErr_SetString(PyExc_TypeError, "cls must be a tuple subclass");
		goto out;
	}
	if (head < 0) { /* the scan starts at max(start, head): never before the buffer */
		PyErr_SetString(PyExc_ValueError, "scan_batch: head before the buffer");
		goto out;
	}
	list = PyList_New(0);
	if (list == NULL)
		goto out;
	{
		const uint8_t *base = view.buf;
		Py_ssize_t n = view.len;
		Py_ssize_t pos = start > head ? start : head;
		Py_ssize_t data, position, found = 0;
		if (stop > n)
			stop = n;
		if (pos >= stop)
			goto finish;
		if (pos == head) {
			data = pos;
			position = pos;
		} else {
			const uint8_t *sep = find_sep(base + pos, (size_t)(n - pos));
			Py_ssize_t s = sep - base;
			if (s >= n || s >= stop)
				goto finish;
			data = s + 2;
			position = s;
		}
		for (;;) {
			const uint8_t *nx = find_sep(base + data, (size_t)(n - data));
			Py_ssize_t next = nx - base;
			uint32_t gen = 0;
			PyObject *payload;
			if (found == max_records) {
				resume = position;
				break;
			}
			payload = decode_chunk(base + data, (size_t)(next - data), &gen);
			if (payload == NULL)
				goto out;
			if (payload != Py_None) {
				PyObject *rec = make_record(cls, data, next, gen, payload, position);
				if (rec == NULL || PyList_Append(list, rec) < 0) {
					Py_XDECREF(rec);
					goto out;
				}
				Py_DECREF(rec);
				found++;
			}
			if (next >= stop || next >= n)
				break;
			position = next;
			data = next + 2;
		}
	}
finish:
	result = Py_BuildValue("(On)", list, resume);
out:
	Py_XDECREF(list);
	PyBuffer_Release(&view);
	return result;
}

/*
 * encode_entries(entries, generation) -> (records, lengths): for each entry (an object with
 * int ``index``, ``term``, ``type`` and bytes-like ``data``), the record encode_record(data,
 * generation, entry_head(index, term, type, len(data))) writes -- the WAL segment's hot loop
 * (gateway.core.wal.segment.Segment.encode; gateway.core.wal.codec.entry_head is the
 * specification of the head: tag 0x20, then field 1 = index always, field 2 = term, field 3 =
 * type and field 4 = the data's length, each only when not zero) -- and each record's length.
 */
static int
entry_u64(PyObject *e, PyObject *name, uint64_t *out)
{
	PyObject *v = PyObject_GetAttr(e, name), *i;
	if (v == NULL)
		return -1;
	i = PyNumber_Index(v);
	Py_DECREF(v);
	if (i == NULL)
		return -1;
	unsigned long long x = PyLong_AsUnsignedLongLong(i);
	Py_DECREF(i);
	if (x == (unsigned long long)-1 && PyErr_Occurred()) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "encode_entries: entry %U is not a uint64", name);
		return -1;
	}
	*out = (uint64_t)x;
	return 0;
}

static PyObject *s_index, *s_term, *s_type, *s_data;

static PyObject *
py_encode_entries(PyObject *self, PyObject *args)
{
	PyObject *seq, *gen_obj = NULL, *fast, *recs = NULL, *lens = NULL;
	uint32_t gen = 0;

	if (!PyArg_ParseTuple(args, "O|O", &seq, &gen_obj))
		return NULL;
	if (gen_obj != NULL && parse_generation(gen_obj, &gen) < 0)
		return NULL;
	fast = PySequence_Fast(seq, "entries must be a sequence");
	if (fast == NULL)
		return NULL;
	Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
	recs = PyList_New(count);
	lens = PyList_New(count);
	if (recs == NULL || lens == NULL)
		goto fail;
	for (Py_ssize_t i = 0; i < count; i++) {
		PyObject *e, *data, *rec;
		uint64_t index, term, type;
		Py_buffer view;
		/* e owned while its attributes are read: a property is Python code, which may
		 * change a list `fast` is (its length is checked before every entry too) */
		if (PySequence_Fast_GET_SIZE(fast) != count) {
			PyErr_SetString(PyExc_ValueError,
			    "encode_entries: entries changed length during the call");
			goto fail;
		}
		e = Py_NewRef(PySequence_Fast_GET_ITEM(fast, i));
		if (entry_u64(e, s_index, &index) < 0 || entry_u64(e, s_term, &term) < 0
		    || entry_u64(e, s_type, &type) < 0) {
			Py_DECREF(e);
			goto fail;
		}
		data = PyObject_GetAttr(e, s_data);
		Py_DECREF(e);
		if (data == NULL)
			goto fail;
		if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
			Py_DECREF(data);
			goto fail;
		}
		Py_DECREF(data);
		/* 2 tag bytes + index (<= 10) + term and type (1 + <= 10 each) + the data's
		 * length (1 + <= 9: a Py_ssize_t is < 2^63) = 44 at most. */
		uint8_t head[44];
		size_t h = 0, dn = (size_t)view.len;
		head[h++] = 0x20;
		head[h++] = 0x08;
		h += (size_t)put_varint(head + h, index);
		if (term) {
			head[h++] = 0x10;
			h += (size_t)put_varint(head + h, term);
		}
		if (type) {
			head[h++] = 0x18;
			h += (size_t)put_varint(head + h, type);
		}
		if (dn) {
			head[h++] = 0x22;
			h += (size_t)put_varint(head + h, (uint64_t)dn);
		}
		rec = record_bytes(head, h, view.buf, dn, gen);
		PyBuffer_Release(&view);
		if (rec == NULL)
			goto fail;
		PyList_SET_ITEM(recs, i, rec);
		PyObject *len = PyLong_FromSsize_t(PyBytes_GET_SIZE(rec));
		if (len == NULL)
			goto fail;
		PyList_SET_ITEM(lens, i, len);
	}
	Py_DECREF(fast);
	return Py_BuildValue("(NN)", recs, lens);
fail:
	Py_DECREF(fast);
	Py_XDECREF(recs);
	Py_XDECREF(lens);
	return NULL;
}

static PyObject *
py_stuff(PyObject *self, PyObject *args)
{
	Py_buffer in;
	PyObject *result;
	if (!PyArg_ParseTuple(args, "y*", &in))
		return NULL;
	result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)stuffed_bound((size_t)in.len));
	if (result != NULL) {
		size_t w = stuff_into((uint8_t *)PyBytes_AS_STRING(result), in.buf, (size_t)in.len);
		_PyBytes_Resize(&result, (Py_ssize_t)w);
	}
	PyBuffer_Release(&in);
	return result;
}

static PyObject *
py_unstuff(PyObject *self, PyObject *args)
{
	Py_buffer in;
	PyObject *result;
	if (!PyArg_ParseTuple(args, "y*", &in))
		return NULL;
	result = PyBytes_FromStringAndSize(NULL, in.len);
	if (result != NULL) {
		Py_ssize_t m = unstuff_into((uint8_t *)PyBytes_AS_STRING(result), in.buf,
		    (size_t)in.len);
		if (m < 0) {
			Py_CLEAR(result);
			PyErr_SetString(PyExc_ValueError, "malformed word-stuffed encoding");
		} else {
			_PyBytes_Resize(&result, m);
		}
	}
	PyBuffer_Release(&in);
	return result;
}

static PyObject *
py_crc32c_raw(PyObject *self, PyObject *args)
{
	Py_buffer in;
	unsigned long state = 0;
	uint32_t crc;
	if (!PyArg_ParseTuple(args, "y*|k", &in, &state))
		return NULL;
	crc = crc_update((uint32_t)state, in.buf, (size_t)in.len);
	PyBuffer_Release(&in);
	return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
	{ "encode_record", py_encode_record, METH_VARARGS, "encode_record(payload, generation=0, prefix=b'')" },
	{ "encode_records", py_encode_records, METH_VARARGS, "encode_records(payloads, generation=0)" },
	{ "encode_entries", py_encode_entries, METH_VARARGS,
	  "encode_entries(entries, generation=0) -> (records, lengths): WAL entry records" },
	{ "decode_record", py_decode_record, METH_VARARGS, "decode_record(stuffed) -> (gen, payload) | None" },
	{ "scan_batch", py_scan_batch, METH_VARARGS, "scan_batch(buf, start, stop, head, cls, max)" },
	{ "stuff", py_stuff, METH_VARARGS, "stuff(data) -> bytes" },
	{ "unstuff", py_unstuff, METH_VARARGS, "unstuff(data) -> bytes (ValueError if malformed)" },
	{ "crc32c_raw", py_crc32c_raw, METH_VARARGS, "crc32c_raw(data, state=0) -> int" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "_recordstream",
	"C accelerator for gateway.core.records (see records.py for the specification).", -1,
	methods,
};

PyMODINIT_FUNC
PyInit__recordstream(void)
{
	stuffing_init();
	s_index = PyUnicode_InternFromString("index");
	s_term = PyUnicode_InternFromString("term");
	s_type = PyUnicode_InternFromString("type");
	s_data = PyUnicode_InternFromString("data");
	if (!s_index || !s_term || !s_type || !s_data)
		return NULL;
	return PyModule_Create(&module);
}
