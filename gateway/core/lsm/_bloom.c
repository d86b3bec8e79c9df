/*
 * C accelerator for batched bloom filter probes (gateway.core.lsm.bloom.maybe_present).
 *
 * maybe(words, h1s, masks, start, stop) -> list[int]
 *   words: the filter's 64-bit words (a buffer of uint64, e.g. array('Q'));
 *   h1s:   per key the word selector hash (buffer of uint32, array('I'));
 *   masks: per key the bit mask (buffer of uint64, array('Q'));
 *   the indices i in [start, stop) with (words[h1s[i] % nwords] & masks[i]) == masks[i]:
 *   the keys the filter may hold.
 *
 * hashes(keys, table) -> (h1s: bytes of uint32, masks: bytes of uint64)
 *   per key h1 = CRC-32C(key) (crc32c.crc32c) and mask = table[CRC-32(key) >> 18]
 *   (zlib.crc32; table: bloom.MASKS as array('Q')), native byte order. Lists of 4,096 keys
 *   or more (a flush's, a compaction's) are hashed without the GIL.
 *
 * build(h1s, masks, nwords) -> bytes of nwords uint64 (native byte order)
 *   the filter's words: words[h1s[i] % nwords] |= masks[i] for every key i.
 *
 * The Python code in bloom.py (key_hashes, _maybe_present_py, _build_words_py) is the
 * specification.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_crc.h"

/* CRC-32 (zlib's polynomial) for the masks; CRC-32C is _crc.h's crc_update. */
static uint32_t crc32_table[8][256];

static int
get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what)
{
	if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
		return -1;
	if (view->itemsize != itemsize) {
		PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes expected, got %zd", what,
		    itemsize, view->itemsize);
		PyBuffer_Release(view);
		return -1;
	}
	return 0;
}

static PyObject *
maybe(PyObject *self, PyObject *args)
{
	PyObject *wo, *ho, *mo, *out = NULL;
	Py_ssize_t start, stop;
	Py_buffer wv, hv, mv;

	if (!PyArg_ParseTuple(args, "OOOnn", &wo, &ho, &mo, &start, &stop))
		return NULL;
	if (get_buffer(wo, &wv, 8, "words") < 0)
		return NULL;
	if (get_buffer(ho, &hv, 4, "h1s") < 0)
		goto release_w;
	if (get_buffer(mo, &mv, 8, "masks") < 0)
		goto release_h;
	Py_ssize_t nwords = wv.len / 8, n = hv.len / 4;
	if (mv.len / 8 != n || nwords == 0 || start < 0 || stop > n || start > stop) {
		PyErr_SetString(PyExc_ValueError, "maybe: inconsistent arguments");
		goto release_m;
	}
	out = PyList_New(0);
	if (out == NULL)
		goto release_m;
	const uint64_t *words = wv.buf, *masks = mv.buf;
	const uint32_t *h1s = hv.buf;
	for (Py_ssize_t i = start; i < stop; i++) {
		uint64_t m = masks[i];
		if ((words[h1s[i] % (uint64_t)nwords] & m) == m) {
			PyObject *idx = PyLong_FromSsize_t(i);
			if (idx == NULL || PyList_Append(out, idx) < 0) {
				Py_XDECREF(idx);
				Py_CLEAR(out);
				break;
			}
			Py_DECREF(idx);
		}
	}
release_m:
	PyBuffer_Release(&mv);
release_h:
	PyBuffer_Release(&hv);
release_w:
	PyBuffer_Release(&wv);
	return out;
}

/* Lists of at least this many keys are hashed without the GIL. */
#define RELEASE_AT 4096

static void
hash_keys(PyObject *const *items, Py_ssize_t n, const uint64_t *table, uint32_t *h1,
    uint64_t *m)
{
	for (Py_ssize_t i = 0; i < n; i++) {
		const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(items[i]);
		Py_ssize_t len = PyBytes_GET_SIZE(items[i]);
		uint32_t c = crc_update(0xFFFFFFFFu, p, (size_t)len);
		uint32_t z = crc_slice8(crc32_table, 0xFFFFFFFFu, p, (size_t)len);
		h1[i] = ~c;
		m[i] = table[(~z) >> 18];
	}
}

static PyObject *
hashes(PyObject *self, PyObject *args)
{
	PyObject *keys, *to, *h1b = NULL, *mb = NULL, *held = NULL;
	Py_buffer tv;

	if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &keys, &to))
		return NULL;
	if (get_buffer(to, &tv, 8, "table") < 0)
		return NULL;
	if (tv.len / 8 != (1 << 14)) {
		PyErr_SetString(PyExc_ValueError, "hashes: the mask table must hold 16384 masks");
		goto done;
	}
	/* A tuple of the keys: they stay put (and alive) while the GIL is released even if
	 * another thread changes the list. */
	held = PyList_AsTuple(keys);
	if (held == NULL)
		goto done;
	Py_ssize_t n = PyTuple_GET_SIZE(held);
	PyObject *const *items = &PyTuple_GET_ITEM(held, 0);
	for (Py_ssize_t i = 0; i < n; i++) {
		if (!PyBytes_Check(items[i])) {
			PyErr_SetString(PyExc_TypeError, "hashes: keys must be bytes");
			goto done;
		}
	}
	h1b = PyBytes_FromStringAndSize(NULL, n * 4);
	mb = PyBytes_FromStringAndSize(NULL, n * 8);
	if (h1b == NULL || mb == NULL)
		goto fail;
	uint32_t *h1 = (uint32_t *)PyBytes_AS_STRING(h1b);
	uint64_t *m = (uint64_t *)PyBytes_AS_STRING(mb);
	const uint64_t *table = tv.buf;
	PyThreadState *ts = n >= RELEASE_AT ? PyEval_SaveThread() : NULL;
	hash_keys(items, n, table, h1, m);
	if (ts != NULL)
		PyEval_RestoreThread(ts);
	Py_DECREF(held);
	PyBuffer_Release(&tv);
	return Py_BuildValue("(NN)", h1b, mb);
fail:
	Py_XDECREF(h1b);
	Py_XDECREF(mb);
done:
	Py_XDECREF(held);
	PyBuffer_Release(&tv);
	return NULL;
}

static PyObject *
build(PyObject *self, PyObject *args)
{
	PyObject *ho, *mo, *out = NULL;
	Py_ssize_t nwords;
	Py_buffer hv, mv;

	if (!PyArg_ParseTuple(args, "OOn", &ho, &mo, &nwords))
		return NULL;
	if (get_buffer(ho, &hv, 4, "h1s") < 0)
		return NULL;
	if (get_buffer(mo, &mv, 8, "masks") < 0)
		goto release_h;
	Py_ssize_t n = hv.len / 4;
	if (mv.len / 8 != n || nwords <= 0 || nwords > PY_SSIZE_T_MAX / 8) {
		PyErr_SetString(PyExc_ValueError, "build: inconsistent arguments");
		goto release_m;
	}
	out = PyBytes_FromStringAndSize(NULL, nwords * 8);
	if (out == NULL)
		goto release_m;
	uint64_t *words = (uint64_t *)PyBytes_AS_STRING(out);
	memset(words, 0, (size_t)nwords * 8);
	const uint32_t *h1s = hv.buf;
	const uint64_t *masks = mv.buf;
	for (Py_ssize_t i = 0; i < n; i++)
		words[h1s[i] % (uint64_t)nwords] |= masks[i];
release_m:
	PyBuffer_Release(&mv);
release_h:
	PyBuffer_Release(&hv);
	return out;
}

static PyMethodDef methods[] = {
    {"hashes", hashes, METH_VARARGS,
     "hashes(keys, table) -> (h1s, masks) as native-order bytes of uint32 and uint64"},
    {"build", build, METH_VARARGS,
     "build(h1s, masks, nwords) -> the filter's words (native-order bytes of uint64)"},
    {"maybe", maybe, METH_VARARGS,
     "maybe(words, h1s, masks, start, stop) -> indices whose keys the filter may hold"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bloom", "C accelerator for batched bloom filter probes.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__bloom(void)
{
	crc_init();
	crc_fill(crc32_table, 0xEDB88320u);
	return PyModule_Create(&module);
}
