/* storage/_growbuf.h: appending to a caller's bytearray from C, in place.

Shared by api/_recordjson.c and storage/_recordcols.c, whose loops append many small pieces to buffers
that end up megabytes long.
*/
#ifndef STRATA_GROWBUF_H
#define STRATA_GROWBUF_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* The caller's bytearray, written in place: its bytes up to `len` are the answer so far, written into its
   allocation (capacity `cap`) and grown by doubling; its size is set to len when the call returns. One
   buffer for a whole answer, so a multi-MiB answer is not built from pieces joined (each a fresh
   allocation) and copied again. Writing within the allocation, not resizing per call, matters: a resize
   up and down per batch cost an mremap of the whole answer each time. */
typedef struct {
    PyObject *array;
    char *data;
    Py_ssize_t len, cap;
    /* Set while the caller runs without the GIL (out_release): grow takes it back for the resize only. */
    PyThreadState *released;
} Out;

/* Bytes writable from the bytearray's start: its allocation less what precedes the start (after
   deletions at the front) and the trailing NUL CPython keeps. */
static Py_ssize_t capacity(PyObject *array) {
    PyByteArrayObject *a = (PyByteArrayObject *)array;
    return a->ob_alloc ? a->ob_alloc - (a->ob_start - a->ob_bytes) - 1 : 0;
}

static int grow(Out *out, Py_ssize_t extra) {
    if (out->len + extra <= out->cap)
        return 0;
    Py_ssize_t cap = out->cap < 4096 ? 4096 : out->cap;
    while (cap < out->len + extra)
        cap *= 2;
    if (out->released != NULL)
        PyEval_RestoreThread(out->released);
    int rc = PyByteArray_Resize(out->array, cap);
    if (rc == 0) {
        out->data = PyByteArray_AS_STRING(out->array);
        out->cap = capacity(out->array);
    }
    if (out->released != NULL)
        out->released = PyEval_SaveThread();
    return rc; /* PyByteArray_Resize's: 0, or -1 with an exception set */
}

static inline void put(Out *out, const char *s, Py_ssize_t n) {
    memcpy(out->data + out->len, s, n);
    out->len += n;
}

#define PUTS(out, s) put((out), (s), (Py_ssize_t)sizeof(s) - 1)

/* Start writing after the bytearray's current bytes. */
static inline void out_open(Out *out, PyObject *array) {
    out->array = array;
    out->data = PyByteArray_AS_STRING(array);
    out->len = PyByteArray_GET_SIZE(array);
    out->cap = capacity(array);
    out->released = NULL;
}

/* Run without the GIL from here to out_reacquire: for loops that touch no Python object but the Out's
   bytearray (which grow resizes with the GIL taken back) and buffers the caller holds exported (Py_buffer:
   they cannot be resized meanwhile). The bytearray must be the caller's own, not shared with another
   thread. Other threads (the store's event loop receiving a GET, a metadata lookup) run meanwhile. */
static inline void out_release(Out *out) { out->released = PyEval_SaveThread(); }

static inline void out_reacquire(Out *out) {
    PyEval_RestoreThread(out->released);
    out->released = NULL;
}

/* Set the bytearray's size to what was written; 0, or -1 with an exception set. */
static inline int out_close(Out *out) { return PyByteArray_Resize(out->array, out->len); }

#endif
