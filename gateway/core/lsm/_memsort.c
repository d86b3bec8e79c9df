/* Optional C accelerator for a memtable's sort (gateway.core.lsm.memtable).
 *
 * sorted_pairs(data) -> (keys, cells)
 *     The pairs of the dict `data` (bytes -> bytes) as two lists in key order (bytes order,
 *     as Python compares them). The dict is read once, with the interpreter's lock held, so
 *     the pairs are those of one moment even if another thread writes to it later; the sort
 *     itself runs without the lock when the dict holds at least RELEASE_AT pairs, so the
 *     thread that flushes a frozen table (or a scan that sorts one) does not hold up the
 *     event loop meanwhile. TypeError when a key or a cell is not bytes.
 *     Memtable._sorted_items_py (sorted(), then a lookup per key) is the specification: the
 *     same two lists.
 *
 * The sort is a natural merge sort: ascending and descending runs found first (a writer's
 * keys are often inserted in order), short runs extended by binary insertion to MIN_RUN,
 * then merged pairwise. Keys of a dict are distinct, so stability does not matter.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MIN_RUN 32
#define RELEASE_AT 4096

typedef struct {
    const unsigned char *p;
    uint32_t len, at; /* the key's length; its pair's place in the dict's order */
} key_t_;

static inline int less(const key_t_ *a, const key_t_ *b) {
    uint32_t m = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->p, b->p, m);
    return c < 0 || (c == 0 && a->len < b->len);
}

/* Sorts a[lo:hi) given that a[lo:done) is sorted (binary insertion). */
static void insertion(key_t_ *a, Py_ssize_t lo, Py_ssize_t done, Py_ssize_t hi) {
    for (Py_ssize_t i = done; i < hi; i++) {
        key_t_ x = a[i];
        Py_ssize_t l = lo, h = i;
        while (l < h) {
            Py_ssize_t m = (l + h) / 2;
            if (less(&x, &a[m])) h = m;
            else l = m + 1;
        }
        memmove(&a[l + 1], &a[l], (size_t)(i - l) * sizeof *a);
        a[l] = x;
    }
}

static void merge(const key_t_ *src, key_t_ *dst, Py_ssize_t lo, Py_ssize_t mid, Py_ssize_t hi) {
    Py_ssize_t i = lo, j = mid, k = lo;
    while (i < mid && j < hi) dst[k++] = less(&src[j], &src[i]) ? src[j++] : src[i++];
    while (i < mid) dst[k++] = src[i++];
    while (j < hi) dst[k++] = src[j++];
}

/* Sorts a[0:n) using tmp (n items) and bounds (n / MIN_RUN + 2 items); returns whichever of
 * a and tmp holds the result. Touches no Python object. */
static key_t_ *natural_sort(key_t_ *a, key_t_ *tmp, Py_ssize_t *bounds, Py_ssize_t n) {
    Py_ssize_t nb = 0;
    bounds[nb++] = 0;
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t j = i + 1;
        if (j < n && less(&a[j], &a[i])) {
            while (j < n && less(&a[j], &a[j - 1])) j++;
            for (Py_ssize_t l = i, h = j - 1; l < h; l++, h--) {
                key_t_ t = a[l];
                a[l] = a[h];
                a[h] = t;
            }
        } else {
            while (j < n && !less(&a[j], &a[j - 1])) j++;
        }
        if (j - i < MIN_RUN) {
            Py_ssize_t end = i + MIN_RUN < n ? i + MIN_RUN : n;
            insertion(a, i, j, end);
            j = end;
        }
        bounds[nb++] = j;
        i = j;
    }
    key_t_ *src = a, *dst = tmp;
    while (nb > 2) { /* nb - 1 runs */
        Py_ssize_t out = 1;
        for (Py_ssize_t r = 0; r + 1 < nb; r += 2) {
            if (r + 2 < nb) {
                merge(src, dst, bounds[r], bounds[r + 1], bounds[r + 2]);
                bounds[out++] = bounds[r + 2];
            } else {
                memcpy(&dst[bounds[r]], &src[bounds[r]],
                       (size_t)(bounds[r + 1] - bounds[r]) * sizeof *src);
                bounds[out++] = bounds[r + 1];
            }
        }
        nb = out;
        key_t_ *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

static PyObject *sorted_pairs(PyObject *self, PyObject *data) {
    if (!PyDict_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "sorted_pairs: a dict of bytes -> bytes expected");
        return NULL;
    }
    Py_ssize_t n = PyDict_GET_SIZE(data);
    if (n > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "sorted_pairs: too many pairs");
        return NULL;
    }
    PyObject *keys = PyList_New(n), *cells = PyList_New(n);
    key_t_ *a = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof *a);
    key_t_ *tmp = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof *a);
    /* every run but the last holds at least MIN_RUN keys */
    Py_ssize_t *bounds = PyMem_RawMalloc((size_t)(n / MIN_RUN + 2) * sizeof *bounds);
    PyObject **objs = PyMem_RawMalloc((size_t)(n ? n : 1) * 2 * sizeof *objs);
    PyObject *result = NULL;
    if (!keys || !cells || !a || !tmp || !bounds || !objs) {
        if (keys && cells) PyErr_NoMemory();
        goto done;
    }
    /* One pass over the dict with the lock held: no Python code runs, so no writer can
     * change it meanwhile. The references taken here pass to the lists at the end. */
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;
    while (i < n && PyDict_Next(data, &pos, &k, &v)) {
        if (!PyBytes_Check(k) || !PyBytes_Check(v)) {
            for (Py_ssize_t d = 0; d < 2 * i; d++) Py_DECREF(objs[d]);
            PyErr_SetString(PyExc_TypeError, "sorted_pairs: keys and cells must be bytes");
            goto done;
        }
        if (PyBytes_GET_SIZE(k) > (Py_ssize_t)UINT32_MAX) {
            for (Py_ssize_t d = 0; d < 2 * i; d++) Py_DECREF(objs[d]);
            PyErr_SetString(PyExc_OverflowError, "sorted_pairs: key too long");
            goto done;
        }
        objs[2 * i] = Py_NewRef(k);
        objs[2 * i + 1] = Py_NewRef(v);
        a[i].p = (const unsigned char *)PyBytes_AS_STRING(k);
        a[i].len = (uint32_t)PyBytes_GET_SIZE(k);
        a[i].at = (uint32_t)i;
        i++;
    }
    /* The keys are held by objs: their bytes stay put while the lock is released. */
    PyThreadState *ts = n >= RELEASE_AT ? PyEval_SaveThread() : NULL;
    key_t_ *sorted = natural_sort(a, tmp, bounds, n);
    if (ts != NULL) PyEval_RestoreThread(ts);
    for (Py_ssize_t s = 0; s < n; s++) {
        uint32_t at = sorted[s].at;
        PyList_SET_ITEM(keys, s, objs[2 * (Py_ssize_t)at]);
        PyList_SET_ITEM(cells, s, objs[2 * (Py_ssize_t)at + 1]);
    }
    result = Py_BuildValue("(OO)", keys, cells);
done:
    Py_XDECREF(keys);
    Py_XDECREF(cells);
    PyMem_RawFree(a);
    PyMem_RawFree(tmp);
    PyMem_RawFree(bounds);
    PyMem_RawFree(objs);
    return result;
}

/* pairs_bytes(data) -> sum of len(k) + len(v) over a dict of bytes: the size a memtable
 * grows by when it takes the batch data, without a Python loop. */
static PyObject *pairs_bytes(PyObject *self, PyObject *data) {
    if (!PyDict_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "pairs_bytes: a dict of bytes");
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    size_t total = 0;
    while (PyDict_Next(data, &pos, &k, &v)) {
        if (!PyBytes_Check(k) || !PyBytes_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "pairs_bytes: a key or value is not bytes");
            return NULL;
        }
        total += (size_t)PyBytes_GET_SIZE(k) + (size_t)PyBytes_GET_SIZE(v);
    }
    return PyLong_FromSize_t(total);
}

static PyMethodDef methods[] = {
    {"sorted_pairs", sorted_pairs, METH_O,
     "sorted_pairs(data) -> (keys, cells) of a dict of bytes in key order"},
    {"pairs_bytes", pairs_bytes, METH_O,
     "pairs_bytes(data) -> the sum of the lengths of a dict of bytes' keys and values"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_memsort", "A memtable's sort, mostly without the GIL.", -1, methods,
};

PyMODINIT_FUNC PyInit__memsort(void) { return PyModule_Create(&module); }
