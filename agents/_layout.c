/* agents._layout: ``FileLayout.add`` of agents/layout.py, in C, and the open chunk it fills.

Why native code: every produce request's batches are placed in the flush file as the request enters the
buffer, on the event loop; a Kafka door under librdkafka's load admits thousands of one-batch requests a
second, and the Python loop (a tuple key, a dict lookup, a packed base offset, a view, two CRC calls and
a dozen attribute reads and writes per batch) was the largest single function of the loop's time. Here
the chunk's fields are C fields and the CRC is storage/_crc32c.h's. agents/layout.py documents the file's
layout; tests/unit/test_flush_build.py reads the files back (offsets, CRCs, timestamps) to check it.

OpenChunk()
    One topic-partition's chunk so far: ``pieces`` (a list: per batch its 8-byte relative baseOffset, then
    a view of the batch after its first 8 bytes), ``count`` records, ``length`` bytes, the running
    CRC-32C ``crc`` of the pieces, and ``min_ts`` / ``max_ts`` over its batches (int64 max / min while
    empty). Its fields are read-only from Python.

add(chunks, batches, all_starts, all_offsets) -> None
    Place one request's ``batches`` (objects with ``topic``, ``partition``, ``data`` (a buffer of at
    least 8 bytes), ``record_count``, ``min_timestamp`` and ``max_timestamp``): each is appended to the
    OpenChunk of its (topic, partition) in the dict ``chunks`` (made when missing). Appends to
    ``all_starts`` the list of each batch's first record's offset relative to its chunk, and to
    ``all_offsets`` the list of each batch's byte position within its chunk. A batch is neither copied
    nor written to. Raises TypeError or ValueError (a batch shorter than 8 bytes) before placing the
    batch that fails; batches placed before it stay placed.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <structmember.h>

#include "../storage/_bigendian.h"
#include "../storage/_crc32c.h"

/* A RecordBatch's first field, baseOffset (int64, big-endian), lies outside the batch's CRC. */
#define BASE_OFFSET_SIZE 8

typedef struct {
    PyObject_HEAD PyObject *pieces;
    long long count, length, min_ts, max_ts;
    unsigned int crc;
} OpenChunk;

static void chunk_dealloc(OpenChunk *self) {
    Py_XDECREF(self->pieces);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *chunk_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if ((args != NULL && PyTuple_GET_SIZE(args)) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "OpenChunk() takes no arguments");
        return NULL;
    }
    OpenChunk *self = (OpenChunk *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->pieces = PyList_New(0);
    if (self->pieces == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->min_ts = INT64_MAX;
    self->max_ts = INT64_MIN;
    return (PyObject *)self;
}

static PyMemberDef chunk_members[] = {
    {"pieces", T_OBJECT_EX, offsetof(OpenChunk, pieces), READONLY, NULL},
    {"count", T_LONGLONG, offsetof(OpenChunk, count), READONLY, NULL},
    {"length", T_LONGLONG, offsetof(OpenChunk, length), READONLY, NULL},
    {"min_ts", T_LONGLONG, offsetof(OpenChunk, min_ts), READONLY, NULL},
    {"max_ts", T_LONGLONG, offsetof(OpenChunk, max_ts), READONLY, NULL},
    {"crc", T_UINT, offsetof(OpenChunk, crc), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject OpenChunkType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "agents._layout.OpenChunk",
    .tp_basicsize = sizeof(OpenChunk),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One topic-partition's chunk of a flush file so far (agents/_layout.c).",
    .tp_new = chunk_new,
    .tp_dealloc = (destructor)chunk_dealloc,
    .tp_members = chunk_members,
};

static PyObject *s_topic, *s_partition, *s_data, *s_record_count, *s_min_timestamp, *s_max_timestamp;

/* An int attribute of ``obj`` as a long long; -1 with an exception set on failure. */
static int int_attr(PyObject *obj, PyObject *name, long long *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The chunk of ``batch``'s topic-partition in ``chunks``, made if missing: a borrowed reference (the dict
   holds it). */
static OpenChunk *chunk_of(PyObject *chunks, PyObject *batch) {
    PyObject *topic = PyObject_GetAttr(batch, s_topic);
    if (topic == NULL)
        return NULL;
    PyObject *partition = PyObject_GetAttr(batch, s_partition);
    if (partition == NULL) {
        Py_DECREF(topic);
        return NULL;
    }
    PyObject *key = PyTuple_Pack(2, topic, partition);
    Py_DECREF(topic);
    Py_DECREF(partition);
    if (key == NULL)
        return NULL;
    PyObject *chunk = PyDict_GetItemWithError(chunks, key);
    if (chunk == NULL && !PyErr_Occurred()) {
        chunk = chunk_new(&OpenChunkType, NULL, NULL);
        if (chunk != NULL) {
            int failed = PyDict_SetItem(chunks, key, chunk);
            Py_DECREF(chunk); /* the dict holds it */
            if (failed)
                chunk = NULL;
        }
    }
    Py_DECREF(key);
    return (OpenChunk *)chunk;
}

/* Append ``batch`` to its chunk; its first record's offset and its byte position within the chunk go to
   ``*start`` and ``*position``. */
static int place(PyObject *chunks, PyObject *batch, long long *start, long long *position) {
    long long record_count, min_ts, max_ts;
    if (int_attr(batch, s_record_count, &record_count) < 0 || int_attr(batch, s_min_timestamp, &min_ts) < 0 ||
        int_attr(batch, s_max_timestamp, &max_ts) < 0)
        return -1;
    PyObject *data = PyObject_GetAttr(batch, s_data);
    if (data == NULL)
        return -1;
    int result = -1;
    PyObject *view = NULL, *rest = NULL, *base = NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE) < 0)
        goto done;
    Py_ssize_t size = buf.len;
    if (size < BASE_OFFSET_SIZE) {
        PyErr_Format(PyExc_ValueError, "a batch of %zd bytes is shorter than its base offset", size);
        goto release;
    }
    OpenChunk *chunk = chunk_of(chunks, batch);
    if (chunk == NULL)
        goto release;
    Py_INCREF(chunk); /* held while objects are made below, whatever happens to ``chunks`` meanwhile */
    uint8_t packed[BASE_OFFSET_SIZE];
    put_be(packed, (uint64_t)chunk->count, BASE_OFFSET_SIZE);
    base = PyBytes_FromStringAndSize((const char *)packed, BASE_OFFSET_SIZE);
    view = base == NULL ? NULL : PyMemoryView_FromObject(data);
    rest = view == NULL ? NULL : PySequence_GetSlice(view, BASE_OFFSET_SIZE, size);
    if (rest == NULL || PyList_Append(chunk->pieces, base) < 0 || PyList_Append(chunk->pieces, rest) < 0) {
        Py_DECREF(chunk);
        goto release;
    }
    uint32_t crc = crc32c_update(chunk->crc, packed, BASE_OFFSET_SIZE);
    chunk->crc = crc32c_update(crc, (const uint8_t *)buf.buf + BASE_OFFSET_SIZE, (size_t)(size - BASE_OFFSET_SIZE));
    *position = chunk->length;
    chunk->length += size;
    *start = chunk->count;
    chunk->count += record_count;
    if (min_ts < chunk->min_ts)
        chunk->min_ts = min_ts;
    if (max_ts > chunk->max_ts)
        chunk->max_ts = max_ts;
    Py_DECREF(chunk);
    result = 0;
release:
    PyBuffer_Release(&buf);
done:
    Py_XDECREF(base);
    Py_XDECREF(view);
    Py_XDECREF(rest);
    Py_DECREF(data);
    return result;
}

/* Append ``value`` as an int to ``list``. */
static int append_int(PyObject *list, long long value) {
    PyObject *number = PyLong_FromLongLong(value);
    if (number == NULL)
        return -1;
    int failed = PyList_Append(list, number);
    Py_DECREF(number);
    return failed;
}

static PyObject *add(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *chunks, *batches, *all_starts, *all_offsets;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:add", &PyDict_Type, &chunks, &PyList_Type, &batches, &PyList_Type,
                          &all_starts, &PyList_Type, &all_offsets))
        return NULL;
    PyObject *starts = PyList_New(0), *offsets = PyList_New(0);
    if (starts == NULL || offsets == NULL)
        goto fail;
    /* The list's size is read each time and its item held while placed: placing runs attribute lookups. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(batches); i++) {
        long long start, position;
        PyObject *batch = Py_NewRef(PyList_GET_ITEM(batches, i));
        int placed = place(chunks, batch, &start, &position);
        Py_DECREF(batch);
        if (placed < 0 || append_int(starts, start) < 0 || append_int(offsets, position) < 0)
            goto fail;
    }
    if (PyList_Append(all_starts, starts) < 0 || PyList_Append(all_offsets, offsets) < 0)
        goto fail;
    Py_DECREF(starts);
    Py_DECREF(offsets);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(starts);
    Py_XDECREF(offsets);
    return NULL;
}

static PyMethodDef methods[] = {
    {"add", add, METH_VARARGS, "Place one request's batches in their chunks (see the module comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_layout", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__layout(void) {
    if (PyType_Ready(&OpenChunkType) < 0)
        return NULL;
    s_topic = PyUnicode_InternFromString("topic");
    s_partition = PyUnicode_InternFromString("partition");
    s_data = PyUnicode_InternFromString("data");
    s_record_count = PyUnicode_InternFromString("record_count");
    s_min_timestamp = PyUnicode_InternFromString("min_timestamp");
    s_max_timestamp = PyUnicode_InternFromString("max_timestamp");
    if (!s_topic || !s_partition || !s_data || !s_record_count || !s_min_timestamp || !s_max_timestamp)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&OpenChunkType);
    if (PyModule_AddObject(m, "OpenChunk", (PyObject *)&OpenChunkType) < 0) {
        Py_DECREF(&OpenChunkType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
