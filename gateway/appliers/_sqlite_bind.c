/* Optional C accelerator for the SQLite applier's columns path
 * (gateway.appliers.sqlite._execute_columns; its Python path is the specification).
 *
 * run(conn, path, plan, columns, count) -> bool
 *
 *   Applies rows 0..count-1 of `columns` (a list of `width` lists, each of at least `count`
 *   values: parameter j of row r is columns[j][r]) through `plan`, a list of
 *   (sql, rows, times) tuples: `times` executions of the statement `sql`, whose parameters
 *   are `rows` rows' parameters one row after the other, the rows taken in order -- what
 *   _execute's statements of many rows and its executemany of the one-row statement do.
 *   The values are bound as Python's sqlite3 module binds them (int and bool as INTEGER,
 *   float as REAL, str as TEXT in UTF-8, bytes as BLOB, None as NULL) and the statements
 *   stepped with the GIL released: the applier's thread stops holding the interpreter
 *   while SQLite works, which the sqlite3 module does only around each step, not while it
 *   binds. The values are read (with the GIL) a chunk of about CHUNK_VALUES values at a
 *   time (whole statements' rows), each chunk's statements run before the next is read:
 *   the copy stays small (1 MiB) whatever the table's width.
 *
 *   False, with nothing executed, when the call must take the Python path: a value of
 *   another type, an int outside SQLite's 64 bits, a str that is not UTF-8 encodable, a
 *   plan whose rows do not add up to `count`, `conn` not a sqlite3.Connection inside a
 *   transaction or not open on the file `path` (checked by device and inode). A SQLite
 *   error raises the exception the sqlite3 module raises for it (same class, message and
 *   `sqlite_errorcode`), the statements before it having run, as with the sqlite3 module.
 *
 * The connection's sqlite3 handle is read from the sqlite3.Connection object: the first
 * field after its object header in CPython 3.11 to 3.13 (Modules/_sqlite/connection.h). The
 * module does not build for other versions, and does not import unless the SQLite library
 * of Python's own _sqlite3 module provides every function used here (resolved through it, so
 * the handle and the calls are the same library's).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "the sqlite3.Connection layout is known for CPython 3.11 to 3.13 only"
#endif

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_STATIC ((void (*)(void *))0)

static struct {
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*bind_int64)(sqlite3_stmt *, int, long long);
    int (*bind_double)(sqlite3_stmt *, int, double);
    int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
    int (*bind_blob)(sqlite3_stmt *, int, const void *, int, void (*)(void *));
    int (*bind_null)(sqlite3_stmt *, int);
    int (*bind_parameter_count)(sqlite3_stmt *);
    int (*step)(sqlite3_stmt *);
    int (*reset)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    const char *(*errmsg)(sqlite3 *);
    int (*extended_errcode)(sqlite3 *);
    int (*get_autocommit)(sqlite3 *);
    const char *(*db_filename)(sqlite3 *, const char *);
} api;

/* The sqlite3.Connection object's head, as CPython 3.11-3.13 lay it out. */
typedef struct {
    PyObject_HEAD
    sqlite3 *db;
} ConnectionHead;

static PyObject *connection_type;  /* sqlite3.Connection */
static PyObject *sqlite3_module;   /* for its exception classes */

enum { K_NULL, K_INT, K_REAL, K_TEXT, K_BLOB };

typedef struct {
    int kind;
    int len;
    union {
        long long i;
        double d;
        const char *p;
    } v;
} Cell;

/* The value `x` as a cell (its bytes borrowed from `x`); 0, or -1 when the Python path must
 * bind it (no error left set). */
static int cell_of(PyObject *x, Cell *c) {
    if (x == Py_None) {
        c->kind = K_NULL;
        return 0;
    }
    if (PyLong_Check(x)) {  /* bool too: the sqlite3 module binds it as its int */
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return -1;
        }
        c->kind = K_INT;
        c->v.i = v;
        return 0;
    }
    if (PyFloat_CheckExact(x)) {
        c->kind = K_REAL;
        c->v.d = PyFloat_AS_DOUBLE(x);
        return 0;
    }
    if (PyUnicode_CheckExact(x)) {
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(x, &n);
        if (!p || n > INT32_MAX) {
            PyErr_Clear();
            return -1;
        }
        c->kind = K_TEXT;
        c->v.p = p;
        c->len = (int)n;
        return 0;
    }
    if (PyBytes_CheckExact(x)) {
        if (PyBytes_GET_SIZE(x) > INT32_MAX) return -1;
        c->kind = K_BLOB;
        c->v.p = PyBytes_AS_STRING(x);
        c->len = (int)PyBytes_GET_SIZE(x);
        return 0;
    }
    return -1;
}

static int bind(sqlite3_stmt *st, int i, const Cell *c) {
    switch (c->kind) {
    case K_INT: return api.bind_int64(st, i, c->v.i);
    case K_REAL: return api.bind_double(st, i, c->v.d);
    case K_TEXT: return api.bind_text(st, i, c->v.p, c->len, SQLITE_STATIC);
    case K_BLOB: return api.bind_blob(st, i, c->len ? c->v.p : "", c->len, SQLITE_STATIC);
    default: return api.bind_null(st, i);
    }
}

/* The primary result codes' names (the sqlite_errorname of an extended code the module
 * knows by a longer name is its primary one here: only sqlite_errorcode is read). */
static const char *const CODE_NAMES[] = {
    "SQLITE_OK", "SQLITE_ERROR", "SQLITE_INTERNAL", "SQLITE_PERM", "SQLITE_ABORT",
    "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_NOMEM", "SQLITE_READONLY", "SQLITE_INTERRUPT",
    "SQLITE_IOERR", "SQLITE_CORRUPT", "SQLITE_NOTFOUND", "SQLITE_FULL", "SQLITE_CANTOPEN",
    "SQLITE_PROTOCOL", "SQLITE_EMPTY", "SQLITE_SCHEMA", "SQLITE_TOOBIG", "SQLITE_CONSTRAINT",
    "SQLITE_MISMATCH", "SQLITE_MISUSE", "SQLITE_NOLFS", "SQLITE_AUTH", "SQLITE_FORMAT",
    "SQLITE_RANGE", "SQLITE_NOTADB",
};

/* The sqlite3 module's exception for result code `code` (pysqlite's mapping), raised with
 * its message and sqlite_errorcode / sqlite_errorname set as the module sets them. */
static void raise_sqlite(int code, int extended, const char *msg) {
    const char *name;
    switch (code & 0xFF) {
    case 2: case 12: name = "InternalError"; break;             /* INTERNAL, NOTFOUND */
    case 7: PyErr_NoMemory(); return;                            /* NOMEM */
    case 1: case 3: case 4: case 5: case 6: case 8: case 9: case 10: case 13: case 14:
    case 15: case 16: case 17: name = "OperationalError"; break;
    case 11: name = "DatabaseError"; break;                      /* CORRUPT */
    case 18: name = "DataError"; break;                          /* TOOBIG */
    case 19: case 20: name = "IntegrityError"; break;            /* CONSTRAINT, MISMATCH */
    case 21: case 25: name = "InterfaceError"; break;            /* MISUSE, RANGE */
    default: name = "DatabaseError"; break;
    }
    PyObject *cls = PyObject_GetAttrString(sqlite3_module, name);
    if (!cls) return;
    PyObject *exc = PyObject_CallFunction(cls, "s", msg ? msg : "unknown error");
    Py_DECREF(cls);
    if (!exc) return;
    int primary = code & 0xFF;
    const char *ename = primary < (int)(sizeof CODE_NAMES / sizeof *CODE_NAMES)
        ? CODE_NAMES[primary] : "SQLITE_UNKNOWN";
    PyObject *ec = PyLong_FromLong(extended), *en = PyUnicode_FromString(ename);
    if (!ec || !en || PyObject_SetAttrString(exc, "sqlite_errorcode", ec) < 0
            || PyObject_SetAttrString(exc, "sqlite_errorname", en) < 0) {
        Py_XDECREF(ec);
        Py_XDECREF(en);
        Py_DECREF(exc);
        return;
    }
    Py_DECREF(ec);
    Py_DECREF(en);
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
}

/* Whether `db` is open on the file `path` (same device and inode). */
static int same_file(sqlite3 *db, const char *path) {
    const char *name = api.db_filename(db, "main");
    struct stat a, b;
    if (!name || !*name || stat(name, &a) != 0 || stat(path, &b) != 0) return 0;
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

typedef struct {
    const char *sql;
    Py_ssize_t sql_len, rows, times;
    sqlite3_stmt *st;
} Step;

/* Values held as cells at once: the GIL is taken back between such chunks to read the next
 * one, so the copy stays small beside the column lists it is read from (16 bytes a value). */
#define CHUNK_VALUES 65536

typedef struct {
    int rc, extended;
    const char *failed;
    char msg[512];
} Failure;

/* `times` executions of `step`'s statement (prepared on first use), the parameters of the
 * first at `cells`, each execution's after the last one's; called without the GIL. Returns
 * SQLITE_OK or the error, which is recorded in `f`. */
static int execute(sqlite3 *db, Step *step, Py_ssize_t times, const Cell *cells,
                   Py_ssize_t width, Failure *f) {
    int rc = SQLITE_OK;
    if (!step->st) {
        rc = api.prepare_v2(db, step->sql, (int)step->sql_len, &step->st, NULL);
        if (rc == SQLITE_OK && (!step->st
                                || api.bind_parameter_count(step->st) != step->rows * width)) {
            f->failed = "a statement of the plan does not take its rows' parameters";
            f->extended = rc = 21;  /* SQLITE_MISUSE */
            return f->rc = rc;
        }
    }
    for (Py_ssize_t t = 0; t < times && rc == SQLITE_OK; t++) {
        const Cell *c = cells + t * step->rows * width;
        Py_ssize_t n = step->rows * width;
        for (Py_ssize_t i = 0; i < n && rc == SQLITE_OK; i++)
            rc = bind(step->st, (int)i + 1, &c[i]);
        if (rc == SQLITE_OK) {
            int r = api.step(step->st);
            while (r == SQLITE_ROW) r = api.step(step->st);
            rc = r == SQLITE_DONE ? SQLITE_OK : r;
        }
        if (rc == SQLITE_OK) rc = api.reset(step->st);
    }
    if (rc != SQLITE_OK) {
        f->extended = api.extended_errcode(db);
        snprintf(f->msg, sizeof f->msg, "%s", api.errmsg(db));
        f->failed = f->msg;
        f->rc = rc;
    }
    return rc;
}

static PyObject *run(PyObject *self, PyObject *args) {
    PyObject *conn, *plan, *columns;
    const char *path;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "OsO!O!n", &conn, &path, &PyList_Type, &plan, &PyList_Type,
                          &columns, &count))
        return NULL;
    int ok = PyObject_IsInstance(conn, connection_type);
    if (ok <= 0) return ok < 0 ? NULL : Py_NewRef(Py_False);
    sqlite3 *db = ((ConnectionHead *)conn)->db;
    if (!db || api.get_autocommit(db) || !same_file(db, path)) Py_RETURN_FALSE;
    Py_ssize_t width = PyList_GET_SIZE(columns), nplan = PyList_GET_SIZE(plan);
    if (width < 1 || count < 1 || nplan < 1) Py_RETURN_FALSE;
    for (Py_ssize_t j = 0; j < width; j++) {
        PyObject *col = PyList_GET_ITEM(columns, j);
        if (!PyList_Check(col) || PyList_GET_SIZE(col) < count) Py_RETURN_FALSE;
    }
    Step *steps = PyMem_Calloc((size_t)nplan, sizeof(Step));
    Cell *cells = NULL;
    PyObject *result = NULL;
    Failure f = {SQLITE_OK, 0, NULL, {0}};
    if (!steps) return PyErr_NoMemory();
    Py_ssize_t total = 0, most = 1;
    for (Py_ssize_t k = 0; k < nplan; k++) {
        PyObject *t = PyList_GET_ITEM(plan, k);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3
                || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0))) {
            result = Py_NewRef(Py_False);
            goto done;
        }
        steps[k].sql = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(t, 0), &steps[k].sql_len);
        steps[k].rows = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 1));
        steps[k].times = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 2));
        if (!steps[k].sql || PyErr_Occurred()) goto done;
        if (steps[k].rows < 1 || steps[k].times < 1 || steps[k].sql_len > INT32_MAX
                || steps[k].rows > count || steps[k].times > count) {
            result = Py_NewRef(Py_False);
            goto done;
        }
        total += steps[k].rows * steps[k].times;
        if (steps[k].rows > most) most = steps[k].rows;
    }
    if (total != count) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    /* Every value is one the module binds the same way, or nothing is done. */
    for (Py_ssize_t j = 0; j < width; j++) {
        PyObject *col = PyList_GET_ITEM(columns, j);
        for (Py_ssize_t r = 0; r < count; r++) {
            Cell probe;
            if (cell_of(PyList_GET_ITEM(col, r), &probe) < 0) {
                result = Py_NewRef(Py_False);
                goto done;
            }
        }
    }
    Py_ssize_t chunk = CHUNK_VALUES / width;  /* rows; at least one statement's */
    if (chunk < most) chunk = most;
    cells = PyMem_Malloc((size_t)(chunk * width) * sizeof(Cell));
    if (!cells) {
        PyErr_NoMemory();
        goto done;
    }
    /* The values' bytes are borrowed from objects the column lists hold: the caller keeps
     * them (and the plan's strings) alive and unchanged for the call. */
    Py_ssize_t row = 0;
    for (Py_ssize_t k = 0; k < nplan && f.rc == SQLITE_OK; k++) {
        Py_ssize_t left = steps[k].times, per = chunk / steps[k].rows;
        while (left > 0 && f.rc == SQLITE_OK) {
            Py_ssize_t times = left < per ? left : per, n = times * steps[k].rows;
            for (Py_ssize_t r = 0; r < n; r++)
                for (Py_ssize_t j = 0; j < width; j++)
                    cell_of(PyList_GET_ITEM(PyList_GET_ITEM(columns, j), row + r),
                            &cells[r * width + j]);  /* checked above */
            Py_BEGIN_ALLOW_THREADS
            execute(db, &steps[k], times, cells, width, &f);
            Py_END_ALLOW_THREADS
            row += n;
            left -= times;
        }
    }
    if (f.rc != SQLITE_OK) {
        raise_sqlite(f.rc, f.extended ? f.extended : f.rc, f.failed);
        goto done;
    }
    result = Py_NewRef(Py_True);
done:
    for (Py_ssize_t k = 0; k < nplan; k++)
        if (steps[k].st) api.finalize(steps[k].st);
    PyMem_Free(steps);
    PyMem_Free(cells);
    return result;
}

static int resolve(void) {
    PyObject *mod = PyImport_ImportModule("_sqlite3");
    if (!mod) return -1;
    PyObject *file = PyObject_GetAttrString(mod, "__file__");
    Py_DECREF(mod);
    if (!file) return -1;
    const char *fname = PyUnicode_AsUTF8(file);
    void *h = fname ? dlopen(fname, RTLD_NOW | RTLD_NOLOAD) : NULL;
    Py_DECREF(file);
    if (!h) {
        PyErr_SetString(PyExc_ImportError, "_sqlite3 is not a loaded shared object");
        return -1;
    }
#define SYM(field, name)                                                         \
    if (!(*(void **)(&api.field) = dlsym(h, name))) {                            \
        PyErr_SetString(PyExc_ImportError, "Python's SQLite library lacks " name); \
        return -1;                                                               \
    }
    SYM(prepare_v2, "sqlite3_prepare_v2")
    SYM(bind_int64, "sqlite3_bind_int64")
    SYM(bind_double, "sqlite3_bind_double")
    SYM(bind_text, "sqlite3_bind_text")
    SYM(bind_blob, "sqlite3_bind_blob")
    SYM(bind_null, "sqlite3_bind_null")
    SYM(bind_parameter_count, "sqlite3_bind_parameter_count")
    SYM(step, "sqlite3_step")
    SYM(reset, "sqlite3_reset")
    SYM(finalize, "sqlite3_finalize")
    SYM(errmsg, "sqlite3_errmsg")
    SYM(extended_errcode, "sqlite3_extended_errcode")
    SYM(get_autocommit, "sqlite3_get_autocommit")
    SYM(db_filename, "sqlite3_db_filename")
#undef SYM
    return 0;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS,
     "run(conn, path, plan, columns, count) -> bool: the rows applied through the plan's "
     "statements (False: nothing done, the Python path must apply them)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sqlite_bind",
    "C accelerator binding the SQLite applier's columns without the GIL.", -1, methods,
};

PyMODINIT_FUNC PyInit__sqlite_bind(void) {
    if (resolve() < 0) return NULL;
    sqlite3_module = PyImport_ImportModule("sqlite3");
    if (!sqlite3_module) return NULL;
    connection_type = PyObject_GetAttrString(sqlite3_module, "Connection");
    if (!connection_type) return NULL;
    return PyModule_Create(&module);
}
