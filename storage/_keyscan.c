/* storage._keyscan: compaction's record scan in C, with the record keys hashed as they are read.

Why native code: each compaction pass needs, for every record of a batch, its offset, timestamp, key hash,
tombstone flag and byte span. aiokafka's compiled reader builds a Python object per record and hashing each
key through hashlib costs another call per record; together they were a large share of a compaction (py-spy,
docs/benchmarks.md). No maintained library scans RecordBatch v2 records into columns, so this module does it
in one C loop and returns the columns as byte strings that numpy views without copying.

Input: the records of ONE batch in its expanded form (the batch itself, or its header followed by its
decompressed records, as storage/records/codec.py's _expand_batch gives it), the position of the first
record and the end of the buffer. The record layout is the one documented at the top of
storage/records/codec.py:

    length: varint | attributes: int8 | timestampDelta: varlong | offsetDelta: varint |
    keyLength: varint | key | valueLength: varint | value | headers...

Only what compaction needs is read; values and headers are skipped by the record's length. Every check
and every error message is the one of scan_batch_reference (storage/records/scan.py), in the same order,
so the compiled scan and the reference refuse the same bytes with the same words (tests compare them).

Key hashes: two SipHash-2-4 values of the key under two 128-bit keys (the offset map's h1 and h2, a
128-bit keyed hash; see planner/offset_map.py). SipHash is a keyed pseudo-random function made for hash
tables fed by untrusted keys: without the key, collisions cannot be computed.

Output columns (native-endian, n = recordsCount):
    offsets    int64[n]   absolute offset (offset_base + baseOffset + offsetDelta)
    timestamps int64[n]   baseTimestamp + timestampDelta, or the batch's maxTimestamp (LogAppendTime)
    h1, h2     uint64[n]  the key's two hashes; 0 for a record without a key
    flags      uint8[n]   bit 0: the record has a key; bit 1: its value is null (a tombstone)
    starts     int64[n]   the record's first byte (its length varint) in the expanded batch
    ends       int64[n]   one past its last byte
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- SipHash-2-4 (Aumasson and Bernstein, 2012), 64-bit output ---------------------------------------- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                             \
    do {                                                                                                     \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                                            \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                                               \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                                               \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                                            \
    } while (0)

static inline uint64_t le64(const uint8_t *p) {
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 24) |
           ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) | ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
}

static uint64_t siphash24(uint64_t k0, uint64_t k1, const uint8_t *in, size_t len) {
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    const uint8_t *end = in + len - (len % 8);
    uint64_t b = ((uint64_t)len) << 56;
    for (; in != end; in += 8) {
        uint64_t m = le64(in);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    switch (len & 7) {
    case 7: b |= ((uint64_t)in[6]) << 48; /* fall through */
    case 6: b |= ((uint64_t)in[5]) << 40; /* fall through */
    case 5: b |= ((uint64_t)in[4]) << 32; /* fall through */
    case 4: b |= ((uint64_t)in[3]) << 24; /* fall through */
    case 3: b |= ((uint64_t)in[2]) << 16; /* fall through */
    case 2: b |= ((uint64_t)in[1]) << 8;  /* fall through */
    case 1: b |= ((uint64_t)in[0]); break;
    case 0: break;
    }
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* ---- the record scan ---------------------------------------------------------------------------------- */

/* Set by a failed read; the messages are scan_batch_reference's. */
typedef struct {
    char message[128];
} ScanError;

#define PAST_END "record runs past the end of its batch"

/* A varint of at most max_bits (32 or 64) bits at *pos, as storage/records/codec.py's _varint_tail reads
   it: an over-long varint and one whose value needs more bits are errors. Returns the unsigned value. */
static int read_varint(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int max_bits, uint64_t *out,
                       ScanError *err) {
    Py_ssize_t p = *pos;
    if (p >= end) {
        snprintf(err->message, sizeof err->message, PAST_END);
        return -1;
    }
    uint64_t b = buf[p++];
    if (b < 0x80) {
        *pos = p;
        *out = b;
        return 0;
    }
    uint64_t value = b & 0x7F;
    int shift = 7;
    for (;;) {
        if (p >= end) {
            snprintf(err->message, sizeof err->message, PAST_END);
            return -1;
        }
        b = buf[p++];
        if (shift == 63) {
            /* The reference's Python int keeps every bit: anything above bit 63 is an overflow, unless
               the byte continues, which makes the varint too long first. */
            if (b >= 0x80) {
                snprintf(err->message, sizeof err->message, "varint longer than %d bits", max_bits);
                return -1;
            }
            if (b > 1) {
                snprintf(err->message, sizeof err->message, "varint overflows %d bits", max_bits);
                return -1;
            }
            value |= b << 63;
            break;
        }
        value |= (b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift >= max_bits) {
            snprintf(err->message, sizeof err->message, "varint longer than %d bits", max_bits);
            return -1;
        }
    }
    if (max_bits < 64 && (value >> max_bits)) {
        snprintf(err->message, sizeof err->message, "varint overflows %d bits", max_bits);
        return -1;
    }
    *pos = p;
    *out = value;
    return 0;
}

static inline int64_t zigzag(uint64_t n) { return (int64_t)((n >> 1) ^ (~(n & 1) + 1)); }

typedef struct {
    int64_t *offsets, *timestamps, *starts, *ends;
    uint64_t *h1, *h2;
    uint8_t *flags;
} Columns;

typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos, end, count;
    int64_t offset_base, batch_base_offset, base_timestamp, append_time, last_delta;
    int log_append_time;
    uint64_t ka0, ka1, kb0, kb1;
} ScanInput;

/* Scan in->count records, storing the first `stored` of them into cols; 0 on success, -1 with err set.
   Runs without the GIL. */
static int scan(const ScanInput *in, Py_ssize_t stored, Columns *cols, ScanError *err) {
    const uint8_t *buf = in->buf;
    Py_ssize_t pos = in->pos, end = in->end;
    int64_t previous = -1;
    uint64_t n;
    const char *outside = NULL;
    for (Py_ssize_t i = 0; i < in->count; i++) {
        Py_ssize_t start = pos;
        if (read_varint(buf, end, &pos, 32, &n, err))
            return -1;
        Py_ssize_t record_end = pos + zigzag(n);
        if (record_end > end || record_end - pos < 6) {
            snprintf(err->message, sizeof err->message, "record length runs past its batch or is too small");
            return -1;
        }
        pos += 1; /* attributes: unused in v2 */
        if (read_varint(buf, end, &pos, 64, &n, err))
            return -1;
        int64_t timestamp_delta = zigzag(n);
        if (read_varint(buf, end, &pos, 32, &n, err))
            return -1;
        int64_t offset_delta = zigzag(n);
        if (offset_delta <= previous || offset_delta > in->last_delta) {
            snprintf(err->message, sizeof err->message,
                     "offset delta %lld is out of order or past lastOffsetDelta", (long long)offset_delta);
            return -1;
        }
        previous = offset_delta;
        if (read_varint(buf, end, &pos, 32, &n, err))
            return -1;
        int64_t length = zigzag(n);
        uint8_t flags = 0;
        uint64_t h1 = 0, h2 = 0;
        if (length >= 0) {
            if (pos + length > record_end) {
                snprintf(err->message, sizeof err->message, "record key runs past its record");
                return -1;
            }
            h1 = siphash24(in->ka0, in->ka1, buf + pos, (size_t)length);
            h2 = siphash24(in->kb0, in->kb1, buf + pos, (size_t)length);
            flags |= 1;
            pos += length;
        } else if (length != -1) {
            snprintf(err->message, sizeof err->message, "record key length %lld is invalid", (long long)length);
            return -1;
        }
        if (read_varint(buf, end, &pos, 32, &n, err))
            return -1;
        length = zigzag(n);
        if (length < -1 || pos + (length > 0 ? length : 0) > record_end) {
            snprintf(err->message, sizeof err->message, "record value length %lld is invalid",
                     (long long)length);
            return -1;
        }
        if (length == -1)
            flags |= 2;
        /* The reference's Python ints never overflow; a value no int64 column can hold is refused, once
           the whole batch has been read (a malformed record later in it is the reference's error). */
        __int128 timestamp = in->log_append_time ? in->append_time : (__int128)in->base_timestamp + timestamp_delta;
        if (!outside && (timestamp < INT64_MIN || timestamp > INT64_MAX))
            outside = "record timestamp is outside 64 bits";
        __int128 offset = (__int128)in->offset_base + in->batch_base_offset + offset_delta;
        if (!outside && (offset < INT64_MIN || offset > INT64_MAX))
            outside = "record offset is outside 64 bits";
        if (i < stored) {
            cols->offsets[i] = (int64_t)offset;
            cols->timestamps[i] = (int64_t)timestamp;
            cols->h1[i] = h1;
            cols->h2[i] = h2;
            cols->flags[i] = flags;
            cols->starts[i] = start;
            cols->ends[i] = record_end;
        }
        pos = record_end;
    }
    if (pos != end) {
        snprintf(err->message, sizeof err->message, "record batch has bytes left after its recordsCount records");
        return -1;
    }
    if (outside) {
        snprintf(err->message, sizeof err->message, "%s", outside);
        return -1;
    }
    return 0;
}

static int parse_key(PyObject *key, uint64_t *k0, uint64_t *k1) {
    Py_buffer view;
    if (PyObject_GetBuffer(key, &view, PyBUF_SIMPLE) < 0)
        return -1;
    if (view.len != 16) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "a SipHash key is 16 bytes");
        return -1;
    }
    *k0 = le64((const uint8_t *)view.buf);
    *k1 = le64((const uint8_t *)view.buf + 8);
    PyBuffer_Release(&view);
    return 0;
}

PyDoc_STRVAR(scan_records_doc,
"scan_records(buf, pos, end, count, offset_base, base_offset, base_timestamp, append_time, last_delta,\n"
"             key_a, key_b)\n"
"--\n\n"
"Scan ``count`` records from ``pos`` to ``end`` (the end of ``buf``'s batch): a tuple of seven byte\n"
"strings (offsets, timestamps, h1, h2, flags, starts, ends; layout in the module source), or a str, the\n"
"error message of a malformed batch. Offsets are offset_base + the batch's baseOffset + offsetDelta.\n"
"``append_time`` is the batch's maxTimestamp when its timestamps\n"
"are LogAppendTime, else None. ``key_a`` and ``key_b`` are the 16-byte SipHash keys of h1 and h2.");

static PyObject *scan_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end, count;
    long long offset_base, batch_base_offset, base_timestamp, last_delta;
    PyObject *append_obj, *key_a, *key_b;
    if (!PyArg_ParseTuple(args, "y*nnnLLLOLOO", &view, &pos, &end, &count, &offset_base, &batch_base_offset,
                          &base_timestamp, &append_obj, &last_delta, &key_a, &key_b))
        return NULL;
    PyObject *result = NULL;
    PyObject *columns[7] = {NULL};
    ScanInput in = {
        .buf = (const uint8_t *)view.buf,
        .pos = pos,
        .end = end,
        .count = count,
        .offset_base = offset_base,
        .batch_base_offset = batch_base_offset,
        .base_timestamp = base_timestamp,
        .last_delta = last_delta,
    };
    if (pos < 0 || end < pos || end > view.len || count < 0) {
        PyErr_SetString(PyExc_ValueError, "pos, end and count must lie within the buffer");
        goto done;
    }
    if (append_obj != Py_None) {
        in.log_append_time = 1;
        in.append_time = PyLong_AsLongLong(append_obj);
        if (in.append_time == -1 && PyErr_Occurred())
            goto done;
    }
    if (parse_key(key_a, &in.ka0, &in.ka1) < 0 || parse_key(key_b, &in.kb0, &in.kb1) < 0)
        goto done;
    /* Every record takes at least 7 bytes, so a count larger than that can hold fails before it fills
       the columns: allocate for what the bytes can hold, not for what a corrupt header claims. */
    Py_ssize_t room = (end - pos) / 7;
    Py_ssize_t cap = count < room ? count : room;
    static const int widths[7] = {8, 8, 8, 8, 1, 8, 8};
    for (int c = 0; c < 7; c++) {
        columns[c] = PyBytes_FromStringAndSize(NULL, cap * widths[c]);
        if (columns[c] == NULL)
            goto done;
    }
    Columns cols = {
        .offsets = (int64_t *)PyBytes_AS_STRING(columns[0]),
        .timestamps = (int64_t *)PyBytes_AS_STRING(columns[1]),
        .h1 = (uint64_t *)PyBytes_AS_STRING(columns[2]),
        .h2 = (uint64_t *)PyBytes_AS_STRING(columns[3]),
        .flags = (uint8_t *)PyBytes_AS_STRING(columns[4]),
        .starts = (int64_t *)PyBytes_AS_STRING(columns[5]),
        .ends = (int64_t *)PyBytes_AS_STRING(columns[6]),
    };
    ScanError err;
    int failed;
    /* With count > cap the scan fails before it needs column cap + 1 (see above): it runs on for the
       reference's error without storing. */
    Py_BEGIN_ALLOW_THREADS failed = scan(&in, cap, &cols, &err);
    Py_END_ALLOW_THREADS
    if (failed) {
        result = PyUnicode_FromString(err.message);
        goto done;
    }
    result = PyTuple_New(7);
    if (result == NULL)
        goto done;
    for (int c = 0; c < 7; c++) {
        PyTuple_SET_ITEM(result, c, columns[c]);
        columns[c] = NULL;
    }
done:
    for (int c = 0; c < 7; c++)
        Py_XDECREF(columns[c]);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(siphash_doc, "siphash24(key, data)\n--\n\nSipHash-2-4 of ``data`` under the 16-byte ``key``, as an int.");

static PyObject *py_siphash24(PyObject *self, PyObject *args) {
    PyObject *key;
    Py_buffer data;
    uint64_t k0, k1;
    if (!PyArg_ParseTuple(args, "Oy*", &key, &data))
        return NULL;
    if (parse_key(key, &k0, &k1) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    uint64_t h = siphash24(k0, k1, (const uint8_t *)data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLongLong(h);
}

static PyMethodDef methods[] = {
    {"scan_records", scan_records, METH_VARARGS, scan_records_doc},
    {"siphash24", py_siphash24, METH_VARARGS, siphash_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "storage._keyscan",
    .m_doc = "Compaction's record scan and key hashing in C (documented in storage/_keyscan.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__keyscan(void) { return PyModule_Create(&module); }
