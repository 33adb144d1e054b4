/* api._recordjson: the records of an HTTP fetch answer rendered as JSON in C, straight from stored batches;
and the offsets of an HTTP produce answer (render_offsets, at the end), straight from agents/offsets.py's
per-batch form.

Why native code: building a Record and then a dict per record, encoding each key and value and handing
the lot to orjson cost the agent an order of magnitude more CPU per MiB served over HTTP than a Kafka fetch
of the same bytes costs (py-spy, docs/benchmarks.md). orjson serialises Python objects fast, but creating
those objects was the cost; no library renders RecordBatch v2 records as JSON. This loop reads one batch's
records and writes their JSON objects with no Python object per record.

It is a fast path, never the authority. Input is one batch's records in their expanded form (after
decompression, as storage/records/codec.py's _expand_batch gives them; the byte layout is documented at the
top of that module). Whenever the bytes are anything but plainly valid (a check of the reference decoder
fails, a header name or, for utf8, a key or value is not valid UTF-8, a timestamp or the offset after
the last record rendered leaves 64 bits) the call returns None and the caller answers through the
reference path (decode, then api/models.py record_out), which raises the precise error (or, for an
offset past 64 bits, answers). Every record of the batch is checked, also those after the answer's
max_bytes cut.

Each record becomes {"offset":N,"key":K,"value":V,"headers":[{"name":S,"value":V}...],"timestamp":T},
K and V null or a JSON string of the bytes as UTF-8 text (utf8) or standard base64 with padding (base64):
what record_out and orjson produce, up to JSON's freedom in escaping. A record's size for max_bytes is
agents/fetch.py's _record_size: 16 + key bytes + value bytes + header names (characters) + header values.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../storage/_crc32c.h"
#include "../storage/_growbuf.h"
#include "../storage/_recordread.h"


/* ---- writing --------------------------------------------------------------------------------------- */

static const char HEX[] = "0123456789abcdef";
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The word's bytes that need more than a copy into a JSON string, as their high bits: >= 0x80 (UTF-8 to
   check), below 0x20 (escaped), a quote or a backslash. Exact for the lowest such byte (the has-less and
   has-zero tricks may also flag bytes above a flagged one, never miss one): bytes are loaded
   little-endian, so the lowest flagged byte is the first in the text. */
static inline uint64_t special_bytes(uint64_t w) {
    uint64_t quote = w ^ (BYTES_01 * '"'), backslash = w ^ (BYTES_01 * '\\');
    return (w | ((w - BYTES_01 * 0x20) & ~w) | ((quote - BYTES_01) & ~quote) | ((backslash - BYTES_01) & ~backslash))
           & BYTES_80;
}

/* A JSON string of the bytes as text: quotes, backslashes and control characters escaped, the rest copied.
   0, -1 out of memory, or -2 if s[0..n) is not UTF-8 as Python's strict decoder takes it (nothing is
   then written). Checking while copying reads each byte once, and plain bytes go eight at a time up to
   the first special one: one byte at a time, checking and then copying, cost several times as much on
   printable values (docs/benchmarks.md). */
static int json_text(Out *out, const uint8_t *s, Py_ssize_t n) {
    if (grow(out, 6 * n + 2) < 0)
        return -1;
    char *p = out->data + out->len;
    *p++ = '"';
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w = load8(s + i);
            uint64_t special = special_bytes(w);
            memcpy(p, &w, 8); /* within the 6n + 2 grown above; only the plain bytes are kept */
            if (!special) {
                p += 8;
                i += 8;
                continue;
            }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            int plain = __builtin_ctzll(special) >> 3; /* the bytes before the first special one */
            p += plain;
            i += plain;
#endif
        }
        uint8_t c = s[i];
        if (c >= 0x80) {
            int length = utf8_sequence(s + i, n - i);
            if (length < 0)
                return -2;
            memcpy(p, s + i, length);
            p += length;
            i += length;
            continue;
        }
        i++;
        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = (char)c;
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        default:
            *p++ = 'u';
            *p++ = '0';
            *p++ = '0';
            *p++ = HEX[c >> 4];
            *p++ = HEX[c & 15];
        }
    }
    *p++ = '"';
    out->len = p - out->data;
    return 0;
}

/* Base64's two characters for every 12 bits, filled when the module loads: two lookups per 3 bytes. */
static char B64_PAIRS[4096][2];

static void fill_b64_pairs(void) {
    for (int v = 0; v < 4096; v++) {
        B64_PAIRS[v][0] = B64[v >> 6];
        B64_PAIRS[v][1] = B64[v & 63];
    }
}

static int json_base64(Out *out, const uint8_t *s, Py_ssize_t n) {
    if (grow(out, 4 * ((n + 2) / 3) + 2) < 0)
        return -1;
    char *p = out->data + out->len;
    *p++ = '"';
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        memcpy(p, B64_PAIRS[v >> 12], 2);
        memcpy(p + 2, B64_PAIRS[v & 0xFFF], 2);
        p += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *p++ = B64[v >> 18];
        *p++ = B64[(v >> 12) & 63];
        *p++ = '=';
        *p++ = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        *p++ = B64[v >> 18];
        *p++ = B64[(v >> 12) & 63];
        *p++ = B64[(v >> 6) & 63];
        *p++ = '=';
    }
    *p++ = '"';
    out->len = p - out->data;
    return 0;
}

/* Key, value or header value: null, or a string in the requested encoding (-2: not UTF-8 text). */
static int json_bytes(Out *out, const uint8_t *s, Py_ssize_t n, int base64) {
    if (n < 0) {
        if (grow(out, 4) < 0)
            return -1;
        PUTS(out, "null");
        return 0;
    }
    if (base64)
        return json_base64(out, s, n);
    return json_text(out, s, n); /* -2 if not UTF-8 text */
}

/* ---- one batch ------------------------------------------------------------------------------------- */
typedef struct {
    BatchInfo info;
    int64_t start_offset;
    int base64;
    Py_ssize_t count;
} Batch;

typedef struct {
    Py_ssize_t size, max_bytes, rendered;
    int nonempty, stopped;
    int64_t next_offset;
} Progress;
/* The record's JSON object (after a comma unless it is the answer's first). 0 on success, -1 out
   of memory, -2 not renderable (the caller falls back). Its size for max_bytes goes to *size. */
static int write_record(Out *out, const Reader *r, const Fields *f, int base64, int first, Py_ssize_t *size) {
    char number[32];
    Py_ssize_t total = 16 + (f->key_len > 0 ? f->key_len : 0) + (f->value_len > 0 ? f->value_len : 0);
    if (grow(out, 64) < 0)
        return -1;
    if (!first)
        PUTS(out, ",");
    PUTS(out, "{\"offset\":");
    put(out, number, snprintf(number, sizeof number, "%lld", (long long)f->offset));
    PUTS(out, ",\"key\":");
    int rc = json_bytes(out, f->key, f->key_len, base64);
    if (rc < 0)
        return rc;
    if (grow(out, 16) < 0)
        return -1;
    PUTS(out, ",\"value\":");
    rc = json_bytes(out, f->value, f->value_len, base64);
    if (rc < 0)
        return rc;
    if (grow(out, 16) < 0)
        return -1;
    PUTS(out, ",\"headers\":[");
    Reader h = {r->buf, f->headers_at, f->end};
    uint64_t n;
    for (Py_ssize_t i = 0; i < f->headers; i++) {
        varint(&h, f->end, 32, &n); /* checked by read_record */
        Py_ssize_t length = (Py_ssize_t)zigzag(n), chars;
        const uint8_t *name = h.buf + h.pos;
        utf8(name, length, &chars);
        h.pos += length;
        if (grow(out, 16) < 0)
            return -1;
        if (i)
            PUTS(out, ",");
        PUTS(out, "{\"name\":");
        rc = json_text(out, name, length); /* the name was checked as UTF-8 by read_record */
        if (rc < 0)
            return rc;
        varint(&h, f->end, 32, &n);
        length = (Py_ssize_t)zigzag(n);
        if (grow(out, 16) < 0)
            return -1;
        PUTS(out, ",\"value\":");
        rc = json_bytes(out, h.buf + h.pos, length, base64);
        if (rc < 0)
            return rc;
        if (length > 0)
            h.pos += length;
        total += chars + (length > 0 ? length : 0);
        if (grow(out, 1) < 0)
            return -1;
        PUTS(out, "}");
    }
    if (grow(out, 48) < 0)
        return -1;
    PUTS(out, "],\"timestamp\":");
    put(out, number, snprintf(number, sizeof number, "%lld", (long long)f->timestamp));
    PUTS(out, "}");
    *size = total;
    return 0;
}

/* Render the batch's records at or past start_offset while they fit (see render_batch's doc). 0 on
   success, -1 out of memory, -2 not renderable. */
static int render(Reader *r, const Batch *b, Progress *p, Out *out) {
    int64_t previous = -1;
    for (Py_ssize_t i = 0; i < b->count; i++) {
        Fields f;
        if (read_record(r, &b->info, &previous, &f) < 0)
            return -2;
        r->pos = f.end;
        if (p->stopped || f.offset < b->start_offset)
            continue; /* still read: every record of the batch is checked */
        Py_ssize_t mark = out->len, size;
        int rc = write_record(out, r, &f, b->base64, !p->nonempty, &size);
        if (rc < 0)
            return rc;
        if (p->nonempty && p->size + size > p->max_bytes) {
            out->len = mark; /* agents/fetch.py: stop before the record that does not fit */
            p->stopped = 1;
            continue;
        }
        if (f.offset == INT64_MAX)
            return -2; /* the next offset, 2^63, leaves 64 bits: the reference path answers */
        p->nonempty = 1;
        p->size += size;
        p->rendered++;
        p->next_offset = f.offset + 1;
    }
    return r->pos == r->end ? 0 : -2;
}

/* A call's answer once its loop is done (rc: render's): the bytearray's size set, then an error (-1),
   None (-2), or the progress, with the position where a run stopped when ``pos`` >= 0. */
static PyObject *finish(Out *out, int rc, const Progress *p, Py_ssize_t pos) {
    if (out_close(out) < 0)
        return NULL;
    if (rc == -1)
        return PyErr_NoMemory();
    if (rc == -2)
        return Py_NewRef(Py_None);
    PyObject *nonempty = PyBool_FromLong(p->nonempty), *stopped = PyBool_FromLong(p->stopped);
    if (pos < 0)
        return Py_BuildValue("nLnNN", p->rendered, (long long)p->next_offset, p->size, nonempty, stopped);
    return Py_BuildValue("nLnNNn", p->rendered, (long long)p->next_offset, p->size, nonempty, stopped, pos);
}

PyDoc_STRVAR(render_batch_doc,
"render_batch(out, buf, pos, end, count, first_offset, base_timestamp, append_time, last_delta,\n"
"             start_offset, base64, size, max_bytes, nonempty)\n--\n\n"
"Append to the bytearray ``out`` the JSON objects of the records of one batch (its records from ``pos``\n"
"to ``end`` of ``buf``, ``count`` of them, offsets ``first_offset`` + offsetDelta) at or past\n"
"``start_offset``, each after a comma unless it is the answer's first (``nonempty``: the answer holds a\n"
"record), while they fit: a record is left out, and every later one, once the answer holds a record and\n"
"``size`` plus its size exceeds ``max_bytes``. Returns (records, next offset after the last one\n"
"rendered or -1, new size, nonempty, stopped), or None when the batch is not plainly valid (the caller\n"
"answers through the reference path; ``out`` may then hold part of a record). A negative ``max_bytes``\n"
"only checks the batch.");

static PyObject *render_batch(PyObject *self, PyObject *args) {
    PyObject *array, *append_obj;
    Py_buffer view;
    Py_ssize_t pos, end, count, size, max_bytes;
    long long first_offset, base_timestamp, last_delta, start_offset;
    int base64, nonempty;
    if (!PyArg_ParseTuple(args, "O!y*nnnLLOLLpnnp", &PyByteArray_Type, &array, &view, &pos, &end, &count,
                          &first_offset, &base_timestamp, &append_obj, &last_delta, &start_offset, &base64,
                          &size, &max_bytes, &nonempty))
        return NULL;
    PyObject *result = NULL;
    Out out;
    out_open(&out, array);
    if (pos < 0 || end < pos || end > view.len || count < 0) {
        PyErr_SetString(PyExc_ValueError, "pos, end and count must lie within the buffer");
        goto done;
    }
    Batch b = {
        .info = {.first_offset = first_offset, .base_timestamp = base_timestamp, .last_delta = last_delta},
        .start_offset = start_offset,
        .base64 = base64,
        .count = count,
    };
    if (append_obj != Py_None) {
        b.info.log_append_time = 1;
        b.info.append_time = PyLong_AsLongLong(append_obj);
        if (b.info.append_time == -1 && PyErr_Occurred())
            goto done;
    }
    Reader r = {(const uint8_t *)view.buf, pos, end};
    /* max_bytes < 0: check the batch only (the answer is already full; the reference decodes the rest of
       the chunk, so its errors must still be found). */
    Progress p = {.size = size, .max_bytes = max_bytes, .nonempty = nonempty, .stopped = max_bytes < 0,
                  .next_offset = -1};
    /* Without the GIL: render reads the exported buffer and writes the caller's bytearray, which grow
       resizes with the GIL taken back (storage/_growbuf.h). */
    out_release(&out);
    int rc = render(&r, &b, &p, &out);
    out_reacquire(&out);
    result = finish(&out, rc, &p, -1);
done:
    PyBuffer_Release(&view);
    return result;
}

/* ---- a run of uncompressed batches ---------------------------------------------------------------- */

PyDoc_STRVAR(render_run_doc,
"render_run(out, data, pos, offset_base, start_offset, base64, size, max_bytes, nonempty)\n--\n\n"
"render_batch over the batches of ``data`` (a chunk's bytes, whose first offset is ``offset_base``) from\n"
"``pos`` on, each header read and checked here as storage/records/codec.py's read_header checks it (CRC-32C\n"
"included), up to the end of ``data`` or the first compressed batch, which is left to the caller.\n"
"Returns (records, next offset after the last one rendered or -1, new size, nonempty, stopped, the\n"
"position where it stopped), or None as render_batch does, also for any header read_header refuses.");

/* Per batch, the Python loop (iter_batches, read_header, expand_records, a call per batch) costs
   microseconds, which dominate when batches hold a few records each, as HTTP-produced ones do (a request's
   records spread over its topic's partitions). */
static PyObject *render_run(PyObject *self, PyObject *args) {
    PyObject *array;
    Py_buffer view;
    Py_ssize_t pos, size, max_bytes;
    long long offset_base, start_offset;
    int base64, nonempty;
    if (!PyArg_ParseTuple(args, "O!y*nLLpnnp", &PyByteArray_Type, &array, &view, &pos, &offset_base, &start_offset,
                          &base64, &size, &max_bytes, &nonempty))
        return NULL;
    PyObject *result = NULL;
    if (pos < 0 || pos > view.len || offset_base < 0) {
        PyErr_SetString(PyExc_ValueError, "pos must lie within data, and offset_base must not be negative");
        PyBuffer_Release(&view);
        return NULL;
    }
    Out out;
    out_open(&out, array);
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t end = view.len;
    Progress p = {.size = size, .max_bytes = max_bytes, .nonempty = nonempty, .stopped = max_bytes < 0,
                  .next_offset = -1};
    int rc = 0;
    /* Without the GIL (as render_batch): the store's event loop thread, receiving the next file, and the
       metadata lookups of other fetches run on the other core meanwhile. */
    out_release(&out);
    while (pos < end) {
        const uint8_t *h = buf + pos;
        Py_ssize_t remaining = end - pos;
        /* read_header's checks, in its order; any failure is -2 (the reference path raises). */
        if (remaining < 61 || h[16] != 2) {
            rc = -2;
            break;
        }
        Py_ssize_t batch_size = 12 + (Py_ssize_t)(int32_t)be(h + 8, 4);
        if (batch_size < 61 || batch_size > remaining) {
            rc = -2;
            break;
        }
        if (crc32c_update(0, h + 21, (size_t)(batch_size - 21)) != (uint32_t)be(h + 17, 4)) {
            rc = -2;
            break;
        }
        unsigned attributes = (unsigned)be(h + 21, 2);
        if (attributes & 0x07)
            break; /* compressed: decompressed by the caller */
        int32_t last_delta = (int32_t)be(h + 23, 4), count = (int32_t)be(h + 57, 4);
        if ((attributes & 0x20) || count < 0 || (int64_t)count * 7 > batch_size - 61 || last_delta < 0 ||
            (count && last_delta < count - 1)) {
            rc = -2; /* a control batch, an impossible count or lastOffsetDelta */
            break;
        }
        int64_t first_offset;
        if (__builtin_add_overflow((int64_t)offset_base, (int64_t)be(h, 8), &first_offset) || first_offset < 0) {
            rc = -2; /* batches_for_c: offsets outside 64 bits */
            break;
        }
        Batch b = {
            .info = {.first_offset = first_offset,
                     .base_timestamp = (int64_t)be(h + 27, 8),
                     .append_time = (int64_t)be(h + 35, 8),
                     .last_delta = last_delta,
                     .log_append_time = (attributes & 0x08) != 0},
            .start_offset = start_offset,
            .base64 = base64,
            .count = count,
        };
        Reader r = {buf, pos + 61, pos + batch_size};
        rc = render(&r, &b, &p, &out);
        if (rc < 0)
            break;
        pos += batch_size;
    }
    out_reacquire(&out);
    result = finish(&out, rc, &p, pos);
    PyBuffer_Release(&view);
    return result;
}

/* ---- a produce answer's offsets ------------------------------------------------------------------- */

PyDoc_STRVAR(render_offsets_doc,
"render_offsets(out, order, partitions, bases) -> int\n--\n\n"
"Append to ``out`` the JSON array of a produce answer's offsets, ``[{\"partition\":P,\"offset\":O},...]``:\n"
"one object per (batch, record) pair of ``order`` (native int32 pairs, agents/offsets.py), with P\n"
"``partitions[batch]`` and O ``bases[batch] + record``. What orjson writes for the same list of dicts.\n"
"Returns the number of objects. ValueError when a pair names a batch outside ``partitions`` or\n"
"``bases`` (both lists of ints of equal length) or a negative record index; ``out`` is then unchanged.");

static PyObject *render_offsets(PyObject *self, PyObject *args) {
    PyObject *array, *partitions, *bases;
    Py_buffer view;
    char number[32];
    if (!PyArg_ParseTuple(args, "O!y*O!O!", &PyByteArray_Type, &array, &view, &PyList_Type, &partitions,
                          &PyList_Type, &bases))
        return NULL;
    PyObject *result = NULL;
    long long *part = NULL, *base = NULL;
    Out out;
    out_open(&out, array);
    Py_ssize_t start = out.len; /* on an error the bytearray is left as it came */
    Py_ssize_t nbatch = PyList_GET_SIZE(partitions);
    if (PyList_GET_SIZE(bases) != nbatch || view.len % (2 * (Py_ssize_t)sizeof(int32_t)) != 0) {
        PyErr_SetString(PyExc_ValueError, "partitions and bases differ in length, or order is not int32 pairs");
        goto done;
    }
    part = PyMem_Malloc((nbatch ? nbatch : 1) * sizeof(long long));
    base = PyMem_Malloc((nbatch ? nbatch : 1) * sizeof(long long));
    if (!part || !base) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t b = 0; b < nbatch; b++) {
        part[b] = PyLong_AsLongLong(PyList_GET_ITEM(partitions, b));
        base[b] = PyLong_AsLongLong(PyList_GET_ITEM(bases, b));
        if (PyErr_Occurred())
            goto done;
    }
    Py_ssize_t n = view.len / (2 * (Py_ssize_t)sizeof(int32_t));
    const int32_t *pairs = (const int32_t *)view.buf;
    /* Per object: the fixed text (26 bytes) and two integers of at most 20 characters each. */
    if (grow(&out, 2 + n * 70) < 0)
        goto done;
    out.data[out.len++] = '[';
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t b = pairs[2 * i], r = pairs[2 * i + 1];
        if (b < 0 || b >= nbatch || r < 0) {
            PyErr_SetString(PyExc_ValueError, "an order pair names no batch of the answer");
            goto done;
        }
        if (i)
            out.data[out.len++] = ',';
        PUTS(&out, "{\"partition\":");
        put(&out, number, snprintf(number, sizeof number, "%lld", part[b]));
        PUTS(&out, ",\"offset\":");
        put(&out, number, snprintf(number, sizeof number, "%lld", base[b] + r));
        out.data[out.len++] = '}';
    }
    out.data[out.len++] = ']';
    result = PyLong_FromSsize_t(n);
done:
    if (result == NULL)
        out.len = start;
    if (out_close(&out) < 0)
        Py_CLEAR(result);
    PyMem_Free(part);
    PyMem_Free(base);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"render_run", render_run, METH_VARARGS, render_run_doc},
    {"render_batch", render_batch, METH_VARARGS, render_batch_doc},
    {"render_offsets", render_offsets, METH_VARARGS, render_offsets_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "api._recordjson",
    .m_doc = "HTTP fetch answers rendered as JSON in C (documented in api/_recordjson.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__recordjson(void) {
    fill_b64_pairs();
    return PyModule_Create(&module);
}
