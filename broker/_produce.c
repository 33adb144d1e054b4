/* broker._produce: the Produce request decoder of broker/produce_codec.py, in C.

Why native code: the Kafka door decodes every Produce request on its one event loop, and librdkafka sends
one per partition batch (thousands a second at linger.ms 5). Written in Python, the straight-line decoder
was about a tenth of the loop's time under that load; this reads the same fields in place. It is the
decoder the agent runs; tests/unit/test_produce_codec.py holds it to kafka-python's generated decoder at
every version (the same requests, and a refusal where kafka-python cannot read the bytes either), and the
fuzz tests feed it garbage.

decode(frame, topic_type, partition_type) -> (version, correlation_id, transactional_id, acks, timeout_ms,
        topics)
    ``frame``: a Produce request after its size, any buffer. The layout is broker/produce_codec.py's
    (versions 3-9; 9 is flexible: varint lengths and counts, tagged fields read and skipped). ``topics``
    is a list of ``topic_type`` (name, partitions), ``partitions`` a list of ``partition_type`` (index,
    records): two-field tuple subclasses (broker/produce_codec.py's NamedTuples), made here without
    calling Python. ``records`` is a memoryview of ``frame`` (not a copy), or None for a null records
    field. Raises ValueError naming what does not fit the schema (a truncated request among them),
    UnicodeDecodeError for a name that is not UTF-8, TypeError if a type is not a tuple subclass.

Every read is bounded by the frame's end; counts are checked against the bytes left (every element takes
at least one byte), so a declared count cannot make this allocate more than the frame's size allows.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "../storage/_bigendian.h"

typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos, end;
} Reader;

#define TRUNCATED "Produce request truncated"

static int fail(const char *message) {
    PyErr_SetString(PyExc_ValueError, message);
    return -1;
}

/* The big-endian signed integer of ``n`` bytes (2 or 4) at the reader. */
static int fixed(Reader *r, int n, int64_t *out) {
    if (r->end - r->pos < n)
        return fail(TRUNCATED);
    uint64_t v = be(r->buf + r->pos, n);
    *out = n == 2 ? (int64_t)(int16_t)v : (int64_t)(int32_t)v;
    r->pos += n;
    return 0;
}

/* An unsigned varint of at most 5 bytes. */
static int uv(Reader *r, int64_t *out) {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
        if (shift > 28)
            return fail("Produce request has a varint longer than 5 bytes");
        if (r->pos >= r->end)
            return fail(TRUNCATED);
        uint8_t byte = r->buf[r->pos++];
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80)
            break;
    }
    *out = (int64_t)value;
    return 0;
}

static int skip_tags(Reader *r) {
    int64_t count, tag, size;
    if (uv(r, &count) < 0)
        return -1;
    for (int64_t i = 0; i < count; i++) {
        if (uv(r, &tag) < 0 || uv(r, &size) < 0)
            return -1;
        if (size > r->end - r->pos)
            return fail(TRUNCATED);
        r->pos += (Py_ssize_t)size;
    }
    return 0;
}

/* A length or count: flexible, varint + 1; else int16 (``wide`` 0) or int32. */
static int length(Reader *r, int flexible, int wide, int64_t *out) {
    if (flexible) {
        if (uv(r, out) < 0)
            return -1;
        *out -= 1;
        return 0;
    }
    return fixed(r, wide ? 4 : 2, out);
}

/* ``n`` bytes at the reader as a str, or NULL. */
static PyObject *text(Reader *r, int64_t n) {
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->buf + r->pos, (Py_ssize_t)n, "strict");
    r->pos += (Py_ssize_t)n;
    return s;
}

/* An instance of the tuple subclass ``type`` (a NamedTuple) holding ``a`` and ``b``, as tuple's own
   subtype constructor makes one; steals the references to ``a`` and ``b`` (NULL: fails, releasing both). */
static PyObject *pair(PyTypeObject *type, PyObject *a, PyObject *b) {
    PyObject *out = a == NULL || b == NULL ? NULL : type->tp_alloc(type, 2);
    if (out == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, a);
    PyTuple_SET_ITEM(out, 1, b);
    return out;
}

static PyObject *partitions(Reader *r, int flexible, PyObject **view, PyObject *frame, PyTypeObject *type) {
    int64_t count, index, n;
    if (length(r, flexible, 1, &count) < 0)
        return NULL;
    if (count < 0 || count > r->end - r->pos) {
        PyErr_Format(PyExc_ValueError, "Produce request has %lld partitions in a topic", (long long)count);
        return NULL;
    }
    PyObject *out = PyList_New((Py_ssize_t)count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        PyObject *records = NULL;
        if (fixed(r, 4, &index) < 0 || length(r, flexible, 1, &n) < 0)
            goto error;
        if (n >= 0) {
            if (n > r->end - r->pos) {
                fail(TRUNCATED);
                goto error;
            }
            if (*view == NULL && (*view = PyMemoryView_FromObject(frame)) == NULL)
                goto error;
            records = PySequence_GetSlice(*view, r->pos, r->pos + (Py_ssize_t)n);
            if (records == NULL)
                goto error;
            r->pos += (Py_ssize_t)n;
        } else if (n != -1) {
            PyErr_Format(PyExc_ValueError, "Produce request has a records length of %lld", (long long)n);
            goto error;
        } else {
            records = Py_NewRef(Py_None);
        }
        PyObject *item = pair(type, PyLong_FromLongLong(index), records);
        if (item == NULL)
            goto error;
        PyList_SET_ITEM(out, i, item);
        if (flexible && skip_tags(r) < 0)
            goto error;
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

static PyObject *topics(Reader *r, int flexible, PyObject *frame, PyTypeObject *topic_type,
                        PyTypeObject *partition_type) {
    int64_t count, n;
    if (length(r, flexible, 1, &count) < 0)
        return NULL;
    if (count < 0 || count > r->end - r->pos) {
        PyErr_Format(PyExc_ValueError, "Produce request has %lld topics", (long long)count);
        return NULL;
    }
    PyObject *view = NULL;
    PyObject *out = PyList_New((Py_ssize_t)count);
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        if (length(r, flexible, 0, &n) < 0)
            goto error;
        if (n < 0 || n > r->end - r->pos) {
            PyErr_Format(PyExc_ValueError, "Produce request has a topic name length of %lld", (long long)n);
            goto error;
        }
        PyObject *name = text(r, n);
        if (name == NULL)
            goto error;
        PyObject *item = pair(topic_type, name, partitions(r, flexible, &view, frame, partition_type));
        if (item == NULL)
            goto error;
        PyList_SET_ITEM(out, i, item);
        if (flexible && skip_tags(r) < 0)
            goto error;
    }
    Py_XDECREF(view);
    return out;
error:
    Py_XDECREF(view);
    Py_XDECREF(out);
    return NULL;
}

static PyObject *decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode(frame, topic_type, partition_type) takes 3 arguments");
        return NULL;
    }
    PyObject *frame = args[0];
    for (int i = 1; i < 3; i++)
        if (!PyType_Check(args[i]) || !PyType_IsSubtype((PyTypeObject *)args[i], &PyTuple_Type)) {
            PyErr_SetString(PyExc_TypeError, "decode's topic_type and partition_type must be tuple subclasses");
            return NULL;
        }
    Py_buffer b;
    if (PyObject_GetBuffer(frame, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    Reader r = {(const uint8_t *)b.buf, 0, b.len};
    PyObject *transactional_id = NULL, *list = NULL, *out = NULL;
    int64_t key, version, correlation_id, client_id, n, acks, timeout;
    if (fixed(&r, 2, &key) < 0 || fixed(&r, 2, &version) < 0 || fixed(&r, 4, &correlation_id) < 0)
        goto done;
    if (key != 0 || version < 3 || version > 9) {
        PyErr_Format(PyExc_ValueError, "not a Produce request of version 3-9: key %lld version %lld",
                     (long long)key, (long long)version);
        goto done;
    }
    int flexible = version >= 9;
    if (fixed(&r, 2, &client_id) < 0) /* a classic nullable string even in header v2 */
        goto done;
    if (client_id < -1) {
        PyErr_Format(PyExc_ValueError, "Produce request has a client id length of %lld", (long long)client_id);
        goto done;
    }
    if (client_id > r.end - r.pos) {
        fail(TRUNCATED);
        goto done;
    }
    r.pos += client_id > 0 ? (Py_ssize_t)client_id : 0;
    if ((flexible && skip_tags(&r) < 0) || length(&r, flexible, 0, &n) < 0)
        goto done;
    if (n >= 0) {
        if (n > r.end - r.pos) {
            fail(TRUNCATED);
            goto done;
        }
        if ((transactional_id = text(&r, n)) == NULL)
            goto done;
    } else if (n != -1) {
        PyErr_Format(PyExc_ValueError, "Produce request has a transactional id length of %lld", (long long)n);
        goto done;
    } else {
        transactional_id = Py_NewRef(Py_None);
    }
    if (fixed(&r, 2, &acks) < 0 || fixed(&r, 4, &timeout) < 0)
        goto done;
    if ((list = topics(&r, flexible, frame, (PyTypeObject *)args[1], (PyTypeObject *)args[2])) == NULL)
        goto done;
    if (flexible && skip_tags(&r) < 0)
        goto done;
    if (r.pos != r.end) {
        PyErr_Format(PyExc_ValueError, "Produce request has %zd bytes after its last field", r.end - r.pos);
        goto done;
    }
    out = Py_BuildValue("(LLOLLO)", (long long)version, (long long)correlation_id, transactional_id,
                        (long long)acks, (long long)timeout, list);
done:
    Py_XDECREF(transactional_id);
    Py_XDECREF(list);
    PyBuffer_Release(&b);
    return out;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(frame, topic_type, partition_type) -> (version, correlation_id, transactional_id, acks, "
     "timeout_ms, topics)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_produce", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__produce(void) { return PyModule_Create(&module); }
