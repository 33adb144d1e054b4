/* storage._recordcheck: Kafka's per-record checks of a producer's batch (its LogValidator), in C.

Why native code: every record of every batch a producer sends is walked before it is stored (a record
that no reader can decode would make its partition unreadable), on the produce path of both doors. In
Python that walk costs several times what storing the batch does; this loop reads the fields in place,
builds no object, and releases the GIL while it runs, so a large decompressed batch checked in a worker
thread does not hold the event loop. It is a fast path, never the authority: the reference decoder
(storage/records/decode.py) applies the same rules, and tests/unit/test_record_check.py holds the two
to the same verdict on valid, mutated and random batches.

check_records(buffer, start, end, count, last_delta, base_timestamp, max_timestamp, compacted)
    walks the ``count`` records in buffer[start:end] (a batch's records section, decompressed if the batch
    is compressed; the layout is storage/records/codec.py's) with _recordread.h's read_record: lengths
    and varints inside the record and the batch, offset deltas strictly increasing from 0 and at most
    ``last_delta`` (with count = last_delta + 1, exactly 0..n-1), key and value lengths -1 or within the
    record, header names UTF-8 with their lengths, each record ending exactly at its length. Then:
    no bytes after the last record; the largest record timestamp equal to ``max_timestamp`` (a CreateTime
    batch's header says what its records say); and on a compacted topic (``compacted``) a key on every
    record. Returns (verdict, index, smallest, largest): verdict 0 for a valid batch, else one of the RC_*
    codes below, with the index of the record at fault (-1 when no one record is); and the smallest and
    largest record timestamps (what the topic's timestamp window is checked against).

schema_refs(buffer, start, end, count, last_delta, key, header, indexes, each)
    reads the schema reference of each record's key (``key``) or value in buffer[start:end], records that
    check_records passed, for validation on produce (registry/validate.py; the framing is documented in
    registry/framing.py). A null field is counted, not read. A record whose headers hold ``header``
    (``__key_schema_id`` / ``__value_schema_id``; the first one counts, as confluent-kafka's deserializer
    reads it) refers by GUID: that header's value is magic byte 1, 16 bytes of GUID, then message indexes
    for Protobuf (any other header value is BAD_HEADER). Otherwise the field must start with magic byte 0
    and a 4-byte big-endian id (BAD_SHORT, BAD_MAGIC); with ``indexes``, the message indexes that may follow
    are measured (zig-zag varints: a count, then that many indexes; a count of 0 is one byte), and a field
    that cannot start with them has none (None).
    Returns (refs, nulls): ``nulls`` the null fields seen, and ``refs`` a list of tuples
        (index, kind, ref, indexes, field_start, field_end)
    kind KIND_ID: ref the id (int), indexes the bytes of the message indexes after it (None without
    ``indexes``, or when none parse); KIND_GUID: ref the 16 GUID bytes, indexes the header's bytes after
    them; KIND_BAD: ref the BAD_* reason. field_start and field_end delimit the key or value in ``buffer``.
    With ``each`` there is one tuple per non-null field; without, one per run: a record whose (kind, ref,
    indexes) equal the previous non-null record's adds nothing, so a batch of one schema costs one tuple.
    The walk stops after the first BAD tuple: no later record can be the first to fail.
plain_batches(buffer, compacted, max_bytes, lowest_ts, highest_ts, make, topic, partition)
    the produce path's fast path for batches stored exactly as sent (broker/batches.py): every batch of a
    partition's bytes checked at once, header and records, without building a header object. It gives a
    list with one ``make(topic, partition, data, count, smallest, largest, producer_id, epoch,
    base_sequence, transactional)`` per batch (``data`` the batch's slice of ``buffer``, a memoryview then
    when ``buffer`` is one; producer_id below -1 given as -1, Kafka's "no producer"), only when every batch
    is what a well-behaved producer sends: magic 2, uncompressed, not control, the LogAppendTime bit clear, a
    length inside the bytes, its CRC-32C right, 1..n records at relative offsets 0..n-1 that check_records
    finds valid with the header's maxTimestamp right, at most ``max_bytes`` bytes, a producer id with an
    epoch and sequence >= 0 (and a transactional batch with one), every record timestamp within
    [lowest_ts, highest_ts]. Anything else, and an empty buffer, gives None: the caller then takes its
    careful path, which is the authority on every refusal and its message (tests/unit/test_plain_batches.py
    holds the two to the same result). It keeps the GIL: it runs on the event loop for one request's
    partition, and releasing the GIL there would hand it to another thread for a switch interval.

any_compressed(buffer)
    whether a batch header in ``buffer`` names a codec other than none, read from the headers alone (the
    attributes of each whole header, stepping by its length field, stopping at a length <= 0): what
    broker/batches.py ``codecs_in`` finds, without the set.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_crc32c.h"
#include "_recordread.h"

/* Verdicts; storage/records/check.py names them. */
#define RC_OK 0
#define RC_MALFORMED 1        /* a record does not parse, or the records run past the batch */
#define RC_TRAILING 2         /* bytes after the last record */
#define RC_NO_KEY 3           /* a record without a key, on a compacted topic */
#define RC_MAX_TIMESTAMP 4    /* the header's maxTimestamp is not the largest record timestamp */

static int check(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int64_t count, int64_t last_delta,
                 int64_t base_timestamp, int64_t max_timestamp, int compacted, int64_t *index,
                 int64_t *smallest, int64_t *largest) {
    Reader r = {buf, start, end};
    BatchInfo b = {0, base_timestamp, 0, last_delta, 0};
    int64_t previous = -1;
    *smallest = INT64_MAX;
    *largest = INT64_MIN;
    Fields f;
    for (int64_t i = 0; i < count; i++) {
        *index = i;
        if (read_record(&r, &b, &previous, &f) < 0)
            return RC_MALFORMED;
        if (compacted && f.key_len < 0)
            return RC_NO_KEY;
        if (f.timestamp > *largest)
            *largest = f.timestamp;
        if (f.timestamp < *smallest)
            *smallest = f.timestamp;
        r.pos = f.end;
    }
    *index = -1;
    if (r.pos != end)
        return RC_TRAILING;
    if (count > 0 && *largest != max_timestamp)
        return RC_MAX_TIMESTAMP;
    return RC_OK;
}

static PyObject *check_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    long long count, last_delta, base_timestamp, max_timestamp;
    int compacted;
    if (!PyArg_ParseTuple(args, "y*nnLLLLp", &view, &start, &end, &count, &last_delta, &base_timestamp,
                          &max_timestamp, &compacted))
        return NULL;
    if (start < 0 || end < start || end > view.len || count < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "check_records: start, end or count out of range");
        return NULL;
    }
    int64_t index = -1, smallest = 0, largest = 0;
    int verdict;
    /* The buffer stays valid while it is held (view), whatever other threads do with its owner. */
    Py_BEGIN_ALLOW_THREADS
    verdict = check((const uint8_t *)view.buf, start, end, count, last_delta, base_timestamp, max_timestamp,
                    compacted, &index, &smallest, &largest);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(iLLL)", verdict, (long long)index, (long long)smallest, (long long)largest);
}

/* schema_refs' kinds and reasons; registry/framing.py names them. */
#define KIND_ID 1
#define KIND_GUID 2
#define KIND_BAD 3
#define BAD_SHORT 1  /* fewer than 5 bytes */
#define BAD_MAGIC 2  /* a first byte other than 0, and no schema id header */
#define BAD_HEADER 3 /* a schema id header that is not magic 1 and 16 bytes of GUID */

typedef struct {
    int kind;
    uint32_t id;          /* KIND_ID */
    const uint8_t *guid;  /* KIND_GUID: 16 bytes */
    int reason;           /* KIND_BAD */
    const uint8_t *tail;  /* the message indexes */
    Py_ssize_t tail_len;  /* -1: none */
    Py_ssize_t start, end; /* the field */
} SchemaRef;

/* A varint of at most 10 bytes as registry/formats/protobuf_wire.py reads it, with no bound on its value:
   0 and its low 64 bits, with *big set when it has more; -1 when it runs past the end or is longer. */
static int wire_varint(Reader *r, uint64_t *out, int *big) {
    uint64_t value = 0;
    *big = 0;
    for (int i = 0; i < 10; i++) {
        if (r->pos >= r->end)
            return -1;
        uint64_t b = r->buf[r->pos++] & 0xFF;
        value |= (b & 0x7F) << (7 * i);
        if (i == 9 && (b & 0x7F) >> 1)
            *big = 1;
        if (!(b & 0x80)) {
            *out = value;
            return 0;
        }
    }
    return -1;
}

/* The bytes Confluent's message indexes take at s[0..n), with protobuf_wire.read_message_indexes' rules
   (a zig-zag count, 0 meaning [0], at most one index per remaining byte; zig-zag indexes, none negative),
   or -1 when they do not parse. A zig-zag value is negative exactly when its varint's low bit is set. */
static Py_ssize_t indexes_length(const uint8_t *s, Py_ssize_t n) {
    Reader r = {s, 0, n};
    uint64_t v;
    int big;
    if (wire_varint(&r, &v, &big) < 0 || big || (v & 1))
        return -1; /* a count past 64 bits is negative or larger than any buffer */
    uint64_t count = v >> 1;
    if (count == 0)
        return r.pos;
    if (count > (uint64_t)(n - r.pos))
        return -1;
    for (uint64_t i = 0; i < count; i++) {
        if (wire_varint(&r, &v, &big) < 0 || (v & 1))
            return -1;
    }
    return r.pos;
}

/* The value of the first header named name[0..name_len) of a record read by read_record: 1 and its
   position and length (-1: null), or 0 when there is none. The headers were checked by read_record. */
static int find_header(const uint8_t *buf, const Fields *f, const char *name, Py_ssize_t name_len,
                       const uint8_t **value, Py_ssize_t *value_len) {
    Reader r = {buf, f->headers_at, f->end};
    uint64_t n;
    for (Py_ssize_t h = 0; h < f->headers; h++) {
        if (varint(&r, f->end, 32, &n) < 0)
            return 0;
        int64_t length = zigzag(n);
        const uint8_t *at = buf + r.pos;
        r.pos += length;
        if (varint(&r, f->end, 32, &n) < 0)
            return 0;
        int64_t vlen = zigzag(n);
        if (length == name_len && memcmp(at, name, name_len) == 0) {
            *value = buf + r.pos;
            *value_len = vlen;
            return 1;
        }
        if (vlen > 0)
            r.pos += vlen;
    }
    return 0;
}

static void classify(const uint8_t *buf, const Fields *f, const uint8_t *at, Py_ssize_t len, const char *header,
                     Py_ssize_t header_len, int indexes, SchemaRef *out) {
    const uint8_t *hv;
    Py_ssize_t hv_len;
    out->start = at - buf;
    out->end = out->start + len;
    out->tail = NULL;
    out->tail_len = -1;
    if (find_header(buf, f, header, header_len, &hv, &hv_len)) {
        if (hv_len < 17 || hv[0] != 1) {
            out->kind = KIND_BAD;
            out->reason = BAD_HEADER;
            return;
        }
        out->kind = KIND_GUID;
        out->guid = hv + 1;
        out->tail = hv + 17;
        out->tail_len = hv_len - 17;
        return;
    }
    if (len < 5 || at[0] != 0) {
        out->kind = KIND_BAD;
        out->reason = len < 5 ? BAD_SHORT : BAD_MAGIC;
        return;
    }
    out->kind = KIND_ID;
    out->id = ((uint32_t)at[1] << 24) | ((uint32_t)at[2] << 16) | ((uint32_t)at[3] << 8) | (uint32_t)at[4];
    if (indexes) {
        out->tail = at + 5;
        out->tail_len = indexes_length(at + 5, len - 5);
    }
}

static int same_ref(const SchemaRef *a, const SchemaRef *b) {
    if (a->kind != b->kind || a->tail_len != b->tail_len)
        return 0;
    if (a->tail_len > 0 && memcmp(a->tail, b->tail, a->tail_len) != 0)
        return 0;
    if (a->kind == KIND_ID)
        return a->id == b->id;
    if (a->kind == KIND_GUID)
        return memcmp(a->guid, b->guid, 16) == 0;
    return a->reason == b->reason;
}

static PyObject *ref_tuple(int64_t index, const SchemaRef *s) {
    PyObject *ref;
    if (s->kind == KIND_ID)
        ref = PyLong_FromUnsignedLong(s->id);
    else if (s->kind == KIND_GUID)
        ref = PyBytes_FromStringAndSize((const char *)s->guid, 16);
    else
        ref = PyLong_FromLong(s->reason);
    if (ref == NULL)
        return NULL;
    PyObject *tail;
    if (s->tail_len < 0)
        tail = Py_NewRef(Py_None);
    else if ((tail = PyBytes_FromStringAndSize((const char *)s->tail, s->tail_len)) == NULL) {
        Py_DECREF(ref);
        return NULL;
    }
    return Py_BuildValue("(LiNNnn)", (long long)index, s->kind, ref, tail, s->start, s->end);
}

static PyObject *scan_refs(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int64_t count, int64_t last_delta,
                           int key, const char *header, Py_ssize_t header_len, int indexes, int each) {
    Reader r = {buf, start, end};
    BatchInfo b = {0, 0, 0, last_delta, 0};
    int64_t previous = -1, nulls = 0;
    SchemaRef last = {0}, cur;
    PyObject *refs = PyList_New(0);
    if (refs == NULL)
        return NULL;
    for (int64_t i = 0; i < count; i++) {
        Fields f;
        if (read_record(&r, &b, &previous, &f) < 0) {
            Py_DECREF(refs);
            PyErr_SetString(PyExc_ValueError, "schema_refs: the records do not parse (check_records first)");
            return NULL;
        }
        r.pos = f.end;
        const uint8_t *at = key ? f.key : f.value;
        Py_ssize_t len = key ? f.key_len : f.value_len;
        if (len < 0) {
            nulls++;
            continue;
        }
        classify(buf, &f, at, len, header, header_len, indexes, &cur);
        if (each || last.kind == 0 || !same_ref(&cur, &last)) {
            PyObject *item = ref_tuple(i, &cur);
            if (item == NULL || PyList_Append(refs, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(refs);
                return NULL;
            }
            Py_DECREF(item);
            last = cur;
        }
        if (cur.kind == KIND_BAD)
            break;
    }
    return Py_BuildValue("(NL)", refs, (long long)nulls);
}

static PyObject *schema_refs(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end, header_len;
    long long count, last_delta;
    int key, indexes, each;
    const char *header;
    if (!PyArg_ParseTuple(args, "y*nnLLpy#pp", &view, &start, &end, &count, &last_delta, &key, &header,
                          &header_len, &indexes, &each))
        return NULL;
    PyObject *out = NULL;
    if (start < 0 || end < start || end > view.len || count < 0)
        PyErr_SetString(PyExc_ValueError, "schema_refs: start, end or count out of range");
    else
        out = scan_refs((const uint8_t *)view.buf, start, end, count, last_delta, key, header, header_len, indexes,
                        each);
    PyBuffer_Release(&view);
    return out;
}

/* --- plain_batches and any_compressed ------------------------------------------------------------------ */

#define BATCH_OVERHEAD 61 /* storage/records/codec.py RECORD_BATCH_OVERHEAD */
#define LOG_OVERHEAD 12
#define CRC_START 21
#define MIN_RECORD_SIZE 7
#define ATTR_CODEC 0x07
#define ATTR_LOG_APPEND_TIME 0x08
#define ATTR_TRANSACTIONAL 0x10
#define ATTR_CONTROL 0x20

/* _recordread.h's be() at a header field's width, signed as the field is. */
static int64_t be64(const uint8_t *p) { return (int64_t)be(p, 8); }
static int32_t be32(const uint8_t *p) { return (int32_t)be(p, 4); }
static int16_t be16(const uint8_t *p) { return (int16_t)be(p, 2); }

typedef struct {
    Py_ssize_t size;
    int64_t count, smallest, largest, producer_id, base_sequence;
    int epoch, transactional;
} PlainBatch;

/* The batch at buf[pos..len): 1 and *out filled when it is plain (see plain_batches above), else 0. */
static int plain_batch(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t len, int compacted, int64_t max_bytes,
                       int64_t lowest, int64_t highest, PlainBatch *out) {
    const uint8_t *h = buf + pos;
    Py_ssize_t remaining = len - pos;
    if (remaining < BATCH_OVERHEAD || h[16] != 2)
        return 0;
    int64_t size = (int64_t)LOG_OVERHEAD + be32(h + 8);
    int attributes = be16(h + 21);
    if (size < BATCH_OVERHEAD || size > remaining || size > max_bytes)
        return 0;
    if (attributes & (ATTR_CODEC | ATTR_LOG_APPEND_TIME | ATTR_CONTROL))
        return 0;
    int64_t last_delta = be32(h + 23), count = be32(h + 57);
    int64_t producer_id = be64(h + 43), base_sequence = be32(h + 53);
    int epoch = be16(h + 51);
    if (count < 1 || last_delta != count - 1 || count * MIN_RECORD_SIZE > size - BATCH_OVERHEAD)
        return 0;
    if (producer_id >= 0 ? (base_sequence < 0 || epoch < 0) : (attributes & ATTR_TRANSACTIONAL) != 0)
        return 0;
    if (crc32c_update(0, h + CRC_START, (size_t)(size - CRC_START)) != (uint32_t)be32(h + 17))
        return 0;
    int64_t index, smallest, largest;
    if (check(buf, pos + BATCH_OVERHEAD, pos + size, count, last_delta, be64(h + 27), be64(h + 35), compacted,
              &index, &smallest, &largest) != RC_OK)
        return 0;
    if (smallest < lowest || largest > highest)
        return 0;
    out->size = (Py_ssize_t)size;
    out->count = count;
    out->smallest = smallest;
    out->largest = largest;
    out->producer_id = producer_id < -1 ? -1 : producer_id;
    out->base_sequence = base_sequence;
    out->epoch = epoch;
    out->transactional = (attributes & ATTR_TRANSACTIONAL) != 0;
    return 1;
}

static PyObject *plain_batches(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *source, *make, *topic, *partition;
    int compacted;
    long long max_bytes, lowest, highest;
    if (!PyArg_ParseTuple(args, "OpLLLOOO", &source, &compacted, &max_bytes, &lowest, &highest, &make, &topic,
                          &partition))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(source, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    /* Every batch checked before any object is made (None is the rule's exception); most requests hold
       one batch, so the results live on the stack unless there are more than a few. */
    PlainBatch local[8], *all = local;
    Py_ssize_t room = 8, count = 0, pos = 0;
    PyObject *out = NULL;
    while (pos < view.len) {
        if (count == room) {
            PlainBatch *grown = PyMem_Malloc(sizeof(PlainBatch) * (size_t)room * 2);
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            memcpy(grown, all, sizeof(PlainBatch) * (size_t)count);
            if (all != local)
                PyMem_Free(all);
            all = grown;
            room *= 2;
        }
        if (!plain_batch((const uint8_t *)view.buf, pos, view.len, compacted, max_bytes, lowest, highest,
                         &all[count])) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        pos += all[count++].size;
    }
    if (count == 0) {
        out = Py_NewRef(Py_None); /* no batch at all: the careful path says so */
        goto done;
    }
    out = PyList_New(count);
    pos = 0;
    for (Py_ssize_t i = 0; out != NULL && i < count; i++) {
        PlainBatch *b = &all[i];
        PyObject *item = NULL, *data = PySequence_GetSlice(source, pos, pos + b->size);
        if (data != NULL)
            item = PyObject_CallFunction(make, "OONLLLLiLO", topic, partition, data, (long long)b->count,
                                         (long long)b->smallest, (long long)b->largest,
                                         (long long)b->producer_id, b->epoch, (long long)b->base_sequence,
                                         b->transactional ? Py_True : Py_False);
        if (item == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, item);
        pos += b->size;
    }
done:
    if (all != local)
        PyMem_Free(all);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *any_compressed(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    int found = 0;
    Py_ssize_t pos = 0;
    while (pos + BATCH_OVERHEAD <= view.len) {
        if (be16(buf + pos + 21) & ATTR_CODEC) {
            found = 1;
            break;
        }
        int32_t length = be32(buf + pos + 8);
        if (length <= 0)
            break;
        pos += LOG_OVERHEAD + (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(found);
}

static PyMethodDef methods[] = {
    {"check_records", check_records, METH_VARARGS,
     "check_records(buffer, start, end, count, last_delta, base_ts, max_ts, compacted)"
     " -> (verdict, index, smallest_ts, largest_ts)"},
    {"schema_refs", schema_refs, METH_VARARGS,
     "schema_refs(buffer, start, end, count, last_delta, key, header, indexes, each) -> (refs, nulls)"},
    {"plain_batches", plain_batches, METH_VARARGS,
     "plain_batches(buffer, compacted, max_bytes, lowest_ts, highest_ts, make, topic, partition)"
     " -> list of make(...) per batch, or None"},
    {"any_compressed", any_compressed, METH_O, "any_compressed(buffer) -> bool"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_recordcheck", NULL, -1, methods};

PyMODINIT_FUNC PyInit__recordcheck(void) { return PyModule_Create(&module); }
