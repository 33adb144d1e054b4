/* agents._encode: records given as text (the HTTP door's parsed JSON) validated, partitioned and encoded
into one RecordBatch v2 records section per partition, in C.

Why native code: HTTP produce spent most of its CPU on per-record Python: a ProduceRecord and a Record per
record, the codec builder's call per record, the partitioner's call per key (py-spy, docs/benchmarks.md).
The rules are agents/encode.py's (RequestEncoder.encode), and no library applies them; the bytes are
storage/records/encode.py's (a record: length, attributes 0, timestampDelta, offsetDelta, key, value,
headers, each length a zigzag varint and -1 for null; layout at the top of storage/records/codec.py).

A fast path, never the authority: any record that is not plainly valid (a rule of RequestEncoder.encode
broken, a string that has no UTF-8 form, an unexpected type) makes the call return None, and the caller
encodes the request through RequestEncoder.encode, which raises the precise error. Its round-robin position
for null keys is advanced only by the caller, on success.

Input: a list of dicts with optional "key", "value" (str or None), "headers" (list of {"name": str,
"value": str or None}), "partition" and "timestamp" (int or None), as api/produce_body.py validates them.
Output per partition, in order of first use: (partition, the records section as a bytearray, record count,
first timestamp, lowest timestamp, highest timestamp); and per record, in request order, its batch index
and index within that batch (int32 pairs, native-endian).

assemble_batches then writes the uncompressed batches of those parts whole, side by side in one bytearray:
a batch's 61-byte header (the layout at the top of storage/records/codec.py: baseOffset 0, batchLength,
partitionLeaderEpoch -1, magic 2, the CRC-32C of attributes to the end, attributes 0, lastOffsetDelta,
baseTimestamp, maxTimestamp, producerId -1, producerEpoch -1, baseSequence -1, recordsCount) and then its
records. Assembled in Python (a header, two CRC calls and a join per batch, then a join of the request's
batches) this cost several times what encode_records itself costs, for a request spread over many
partitions.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../storage/_bigendian.h"
#include "../storage/_crc32c.h"
#include "../storage/_growbuf.h"

#define RECORD_OVERHEAD 70 /* agents/encode.py: framing counted against max.message.bytes */

/* Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as storage/partitioner.py documents. */
static uint32_t murmur2(const uint8_t *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28c ^ (uint32_t)length;
    Py_ssize_t whole = length & ~(Py_ssize_t)3;
    for (Py_ssize_t i = 0; i < whole; i += 4) {
        uint32_t k = (uint32_t)data[i] | ((uint32_t)data[i + 1] << 8) | ((uint32_t)data[i + 2] << 16) |
                     ((uint32_t)data[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (length & 3) {
    case 3: h ^= (uint32_t)data[whole + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)data[whole + 1] << 8;  /* fall through */
    case 1:
        h ^= data[whole];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static inline int varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint64_t zz(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline void put_varint(Out *out, uint64_t v) {
    while (v >= 0x80) {
        out->data[out->len++] = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    out->data[out->len++] = (char)v;
}

typedef struct {
    const char *data; /* NULL: null */
    Py_ssize_t len;
} Text;

/* A dict's optional str-or-None field as UTF-8; -1 not encodable here (wrong type, no UTF-8 form). */
static int text_field(PyObject *dict, PyObject *name, Text *out) {
    PyObject *value = PyDict_GetItemWithError(dict, name);
    out->data = NULL;
    out->len = -1;
    if (value == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (value == Py_None)
        return 0;
    if (!PyUnicode_CheckExact(value))
        return -1;
    out->data = PyUnicode_AsUTF8AndSize(value, &out->len);
    if (out->data == NULL) {
        PyErr_Clear(); /* a lone surrogate: the reference path names the field */
        return -1;
    }
    return 0;
}

/* A dict's optional int-or-None field; 0 absent, 1 present, -1 not handled here. */
static int int_field(PyObject *dict, PyObject *name, long long *out) {
    PyObject *value = PyDict_GetItemWithError(dict, name);
    if (value == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (value == Py_None)
        return 0;
    if (!PyLong_CheckExact(value))
        return -1;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    return 1;
}

typedef struct {
    Out out;
    int32_t count;
    int64_t first_ts, min_ts, max_ts;
} PartitionBuf;

typedef struct {
    PyObject *key, *value, *headers, *partition, *timestamp, *name;
} Names;

#define DECLINE(rc) \
    do {            \
        status = rc; \
        goto done;  \
    } while (0)

PyDoc_STRVAR(encode_records_doc,
"encode_records(items, partitions, compacted, max_message_bytes, now_ms, before_max_ms, after_max_ms,\n"
"               max_timestamp_ms, round_robin)\n--\n\n"
"Validate, partition and encode ``items`` (see the module source) for a topic of ``partitions``\n"
"partitions. Returns (batches, order, null-key records), or None when the request must go through\n"
"RequestEncoder.encode. ``round_robin`` is the round-robin position for the first null-key record.");

static PyObject *encode_records(PyObject *self, PyObject *args) {
    PyObject *items;
    Py_ssize_t partitions;
    int compacted;
    long long max_message_bytes, now_ms, before_max, after_max, max_timestamp, round_robin;
    if (!PyArg_ParseTuple(args, "O!npLLLLLL", &PyList_Type, &items, &partitions, &compacted, &max_message_bytes,
                          &now_ms, &before_max, &after_max, &max_timestamp, &round_robin))
        return NULL;
    if (partitions < 1 || partitions > 1000000) {
        PyErr_SetString(PyExc_ValueError, "partitions must be 1 to 1000000");
        return NULL;
    }
    static Names names;
    if (names.key == NULL) {
        names.key = PyUnicode_InternFromString("key");
        names.value = PyUnicode_InternFromString("value");
        names.headers = PyUnicode_InternFromString("headers");
        names.partition = PyUnicode_InternFromString("partition");
        names.timestamp = PyUnicode_InternFromString("timestamp");
        names.name = PyUnicode_InternFromString("name");
        if (!names.key || !names.value || !names.headers || !names.partition || !names.timestamp || !names.name)
            return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    int status = 0; /* 0 ok, 1 decline, -1 error set */
    PyObject *result = NULL, *batches = NULL, *order = NULL;
    int32_t *batch_of = PyMem_Malloc(partitions * sizeof(int32_t));
    PartitionBuf *bufs = PyMem_Calloc(partitions < n ? partitions : (n ? n : 1), sizeof(PartitionBuf));
    int32_t *pairs = PyMem_Malloc((n ? n : 1) * 2 * sizeof(int32_t));
    Py_ssize_t nbatches = 0, null_keys = 0;
    if (!batch_of || !bufs || !pairs) {
        PyErr_NoMemory();
        DECLINE(-1);
    }
    for (Py_ssize_t p = 0; p < partitions; p++)
        batch_of[p] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyDict_CheckExact(item))
            DECLINE(1);
        Text key, value;
        if (text_field(item, names.key, &key) < 0 || text_field(item, names.value, &value) < 0)
            DECLINE(PyErr_Occurred() ? -1 : 1);
        PyObject *headers = PyDict_GetItemWithError(item, names.headers);
        if (headers == NULL && PyErr_Occurred())
            DECLINE(-1);
        if (headers != NULL && !PyList_CheckExact(headers))
            DECLINE(1);
        Py_ssize_t nheaders = headers ? PyList_GET_SIZE(headers) : 0;
        /* max.message.bytes counts header names in characters (Python's len of the str). */
        long long size = RECORD_OVERHEAD + (key.len > 0 ? key.len : 0) + (value.len > 0 ? value.len : 0);
        Py_ssize_t headers_bytes = 0;
        for (Py_ssize_t h = 0; h < nheaders; h++) {
            PyObject *header = PyList_GET_ITEM(headers, h);
            if (!PyDict_CheckExact(header))
                DECLINE(1);
            PyObject *name = PyDict_GetItemWithError(header, names.name);
            Text name_text, header_value;
            if (name == NULL || !PyUnicode_CheckExact(name))
                DECLINE(PyErr_Occurred() ? -1 : 1);
            if (text_field(header, names.name, &name_text) < 0 || text_field(header, names.value, &header_value) < 0)
                DECLINE(PyErr_Occurred() ? -1 : 1);
            size += PyUnicode_GET_LENGTH(name) + (header_value.len > 0 ? header_value.len : 0);
            headers_bytes += varint_size(zz(name_text.len)) + name_text.len + varint_size(zz(header_value.len)) +
                             (header_value.len > 0 ? header_value.len : 0);
        }
        if (size > max_message_bytes || (key.data == NULL && compacted))
            DECLINE(1);
        long long ts = now_ms, partition;
        int given = int_field(item, names.timestamp, &ts);
        if (given < 0)
            DECLINE(PyErr_Occurred() ? -1 : 1);
        if (given && (ts < 0 || ts > max_timestamp || now_ms - ts > before_max || ts - now_ms > after_max))
            DECLINE(1);
        given = int_field(item, names.partition, &partition);
        if (given < 0)
            DECLINE(PyErr_Occurred() ? -1 : 1);
        if (given) {
            if (partition < 0 || partition >= partitions)
                DECLINE(1);
        } else if (key.data != NULL) {
            partition = (murmur2((const uint8_t *)key.data, key.len) & 0x7fffffff) % partitions;
        } else {
            /* agents/encode.py: n % partitions with n the topic's round-robin counter (Python ints) */
            long long rr = round_robin + null_keys;
            partition = ((rr % partitions) + partitions) % partitions;
            null_keys++;
        }
        int32_t b = batch_of[partition];
        if (b < 0) {
            b = batch_of[partition] = (int32_t)nbatches++;
            PartitionBuf *pb = &bufs[b];
            pb->out.array = PyByteArray_FromStringAndSize(NULL, 0);
            if (pb->out.array == NULL)
                DECLINE(-1);
            out_open(&pb->out, pb->out.array);
            pb->first_ts = pb->min_ts = pb->max_ts = ts;
        }
        PartitionBuf *pb = &bufs[b];
        int64_t ts_delta = ts - pb->first_ts;
        int64_t offset_delta = pb->count;
        /* body: attributes, timestampDelta, offsetDelta, key, value, header count, headers */
        Py_ssize_t body = 1 + varint_size(zz(ts_delta)) + varint_size(zz(offset_delta)) + varint_size(zz(key.len)) +
                          (key.len > 0 ? key.len : 0) + varint_size(zz(value.len)) + (value.len > 0 ? value.len : 0) +
                          varint_size(zz(nheaders)) + headers_bytes;
        if (grow(&pb->out, body + 10) < 0)
            DECLINE(-1);
        Out *o = &pb->out;
        put_varint(o, zz(body));
        o->data[o->len++] = 0;
        put_varint(o, zz(ts_delta));
        put_varint(o, zz(offset_delta));
        put_varint(o, zz(key.len));
        if (key.len > 0)
            put(o, key.data, key.len);
        put_varint(o, zz(value.len));
        if (value.len > 0)
            put(o, value.data, value.len);
        put_varint(o, zz(nheaders));
        for (Py_ssize_t h = 0; h < nheaders; h++) {
            PyObject *header = PyList_GET_ITEM(headers, h);
            Text name_text, header_value;
            text_field(header, names.name, &name_text); /* checked above */
            text_field(header, names.value, &header_value);
            put_varint(o, zz(name_text.len));
            put(o, name_text.data, name_text.len);
            put_varint(o, zz(header_value.len));
            if (header_value.len > 0)
                put(o, header_value.data, header_value.len);
        }
        pb->count++;
        if (ts < pb->min_ts)
            pb->min_ts = ts;
        if (ts > pb->max_ts)
            pb->max_ts = ts;
        pairs[2 * i] = b;
        pairs[2 * i + 1] = (int32_t)offset_delta;
    }
    batches = PyList_New(nbatches);
    if (batches == NULL)
        DECLINE(-1);
    for (Py_ssize_t p = 0; p < partitions; p++) {
        int32_t b = batch_of[p];
        if (b < 0)
            continue;
        PartitionBuf *pb = &bufs[b];
        if (out_close(&pb->out) < 0)
            DECLINE(-1);
        PyObject *entry = Py_BuildValue("(nOiLLL)", p, pb->out.array, pb->count, (long long)pb->first_ts,
                                        (long long)pb->min_ts, (long long)pb->max_ts);
        if (entry == NULL)
            DECLINE(-1);
        PyList_SET_ITEM(batches, b, entry);
    }
    order = PyBytes_FromStringAndSize((const char *)pairs, n * 2 * sizeof(int32_t));
    if (order == NULL)
        DECLINE(-1);
    result = Py_BuildValue("(OOn)", batches, order, null_keys);
done:
    if (bufs != NULL) {
        for (Py_ssize_t b = 0; b < nbatches; b++)
            Py_XDECREF(bufs[b].out.array);
    }
    PyMem_Free(batch_of);
    PyMem_Free(bufs);
    PyMem_Free(pairs);
    Py_XDECREF(batches);
    Py_XDECREF(order);
    if (status == 1)
        return Py_NewRef(Py_None);
    return status < 0 ? NULL : result;
}

#define BATCH_HEADER 61  /* storage/records/codec.py: RECORD_BATCH_OVERHEAD */
#define CRC_COVERED_AT 21 /* attributes: the first byte the CRC covers */

PyDoc_STRVAR(assemble_batches_doc,
"assemble_batches(parts)\n--\n\n"
"The uncompressed batches of encode_records' parts, whole and side by side in one bytearray: each is\n"
"what storage/records/encode.py's batch_of_records(records, count, first timestamp, highest timestamp)\n"
"returns, in the parts' order.");

static PyObject *assemble_batches(PyObject *self, PyObject *parts) {
    if (!PyList_CheckExact(parts)) {
        PyErr_SetString(PyExc_TypeError, "parts must be a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(parts), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        if (!PyTuple_CheckExact(part) || PyTuple_GET_SIZE(part) != 6 ||
            !PyByteArray_CheckExact(PyTuple_GET_ITEM(part, 1))) {
            PyErr_SetString(PyExc_TypeError, "each part is (partition, bytearray, count, first, lowest, highest)");
            return NULL;
        }
        Py_ssize_t size = PyByteArray_GET_SIZE(PyTuple_GET_ITEM(part, 1));
        if (size > INT32_MAX - 49 || total > PY_SSIZE_T_MAX - BATCH_HEADER - size) {
            PyErr_SetString(PyExc_ValueError, "record batch is larger than 2^31-1 bytes");
            return NULL;
        }
        total += BATCH_HEADER + size;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    uint8_t *p = (uint8_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *part = PyList_GET_ITEM(parts, i), *records;
        Py_ssize_t partition;
        int count;
        long long first, lowest, highest;
        if (!PyArg_ParseTuple(part, "nOiLLL", &partition, &records, &count, &first, &lowest, &highest)) {
            Py_DECREF(out);
            return NULL;
        }
        if (count < 1) {
            PyErr_SetString(PyExc_ValueError, "a batch holds at least one record");
            Py_DECREF(out);
            return NULL;
        }
        Py_ssize_t size = PyByteArray_GET_SIZE(records);
        put_be(p, 0, 8);                         /* baseOffset: set when the flush places the batch */
        put_be(p + 8, (uint64_t)(49 + size), 4); /* batchLength: the bytes after this field */
        put_be(p + 12, 0xFFFFFFFFu, 4);          /* partitionLeaderEpoch -1 */
        p[16] = 2;                               /* magic */
        uint8_t *covered = p + CRC_COVERED_AT;
        put_be(covered, 0, 2); /* attributes: no codec, CreateTime, not transactional */
        put_be(covered + 2, (uint64_t)(count - 1), 4);
        put_be(covered + 6, (uint64_t)first, 8);
        put_be(covered + 14, (uint64_t)highest, 8);
        put_be(covered + 22, UINT64_MAX, 8); /* producerId -1 */
        put_be(covered + 30, 0xFFFF, 2);     /* producerEpoch -1 */
        put_be(covered + 32, 0xFFFFFFFFu, 4); /* baseSequence -1 */
        put_be(covered + 36, (uint64_t)count, 4);
        memcpy(covered + 40, PyByteArray_AS_STRING(records), size);
        put_be(p + 17, crc32c_update(0, covered, 40 + (size_t)size), 4);
        p += BATCH_HEADER + size;
    }
    return out;
}

PyDoc_STRVAR(crc32c_doc,
"crc32c(data, portable)\n--\n\n"
"The CRC-32C assemble_batches writes (storage/_crc32c.h), by the instruction where there is one or, with\n"
"``portable``, by the table that machines without it use: for tests, against the crc32c package.");

static PyObject *crc32c_check(PyObject *self, PyObject *args) {
    Py_buffer data;
    int portable;
    if (!PyArg_ParseTuple(args, "y*p", &data, &portable))
        return NULL;
    if (!crc32c_ready)
        crc32c_choose(); /* fills the table crc32c_soft reads */
    uint32_t crc = portable ? crc32c_soft(0, data.buf, (size_t)data.len) : crc32c_update(0, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"crc32c", crc32c_check, METH_VARARGS, crc32c_doc},
    {"encode_records", encode_records, METH_VARARGS, encode_records_doc},
    {"assemble_batches", assemble_batches, METH_O, assemble_batches_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "agents._encode",
    .m_doc = "HTTP records validated, partitioned and encoded in C (documented in agents/_encode.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__encode(void) { return PyModule_Create(&module); }
