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
   allocation) and copied again. Writing within the allocation, not resizing per call, matters: measured,
   a resize up and down per batch cost an mremap of the whole answer each time (46,689 in 5 s). */
typedef struct {
    PyObject *array;
    char *data;
    Py_ssize_t len, cap;
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
    if (PyByteArray_Resize(out->array, cap) < 0)
        return -1;
    out->data = PyByteArray_AS_STRING(out->array);
    out->cap = capacity(out->array);
    return 0;
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
}

/* Set the bytearray's size to what was written; 0, or -1 with an exception set. */
static inline int out_close(Out *out) { return PyByteArray_Resize(out->array, out->len); }

#endif
