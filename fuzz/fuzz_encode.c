/* fuzz/fuzz_encode.c: agents/_encode.c, HTTP produce's encoding of client text records into batches:
encode_records, then assemble_batches over its parts.

Why through Python objects, and why in C: the client's bytes reach this extension as what the HTTP door's
JSON parser made of them, a list of dicts of str, int and None, so that is what the harness builds from
the fuzz bytes. Its byte-level helpers (murmur2, the varint writers) hold no length a client chooses;
what does is how it sizes each record before writing it (grow(body + 10)) from the strings' UTF-8 forms,
and its paths that decline (a lone surrogate, a wrong type, a broken rule), with their references. A C
harness calls the functions directly in the same sanitizer build as the other targets; atheris would need
the extension rebuilt with clang's sanitizers and an uninstrumented python run with the ASan runtime
preloaded, for the same calls.

Input:
    byte 0     bits 0-4: partitions - 1; bit 5: compacted; bits 6-7: message.timestamp.before/after.max.ms
               (0: the defaults, unbounded and one hour; 1: an hour each; 2: 0 each; 3: unbounded each)
    bytes 1-2  max.message.bytes / 16 (big-endian)
    bytes 3-6  the topic's round-robin position (big-endian)
    then records until the input ends, each an op byte and its fields:
      bits 0-1 "key", bits 2-3 "value": 0 absent, 1 None, 2 a string, 3 an int (a wrong type)
      bit 4 "timestamp" (8 bytes), bit 5 "partition" (1 byte): each a kind byte (0 the int, 1 None, 2 the
            int moved past 64 bits by 2^64, 3 its decimal str), then the int (big-endian, signed)
      bit 6 "headers": a byte, bits 0-1 their number; each header a byte (bits 0-1 its "value" as above,
            bit 2 an int "name"), then its name and value strings
      a string: a length byte, then that many bytes, as UTF-8 with lone surrogates allowed (surrogatepass)
      when they decode so, else as Latin-1
The clock is fixed (now_ms 1,700,000,000,000).

Invariants, besides the sanitizers':
- the call declines (None) exactly when a record breaks one of agents/encode.py's rules (the harness
  keeps the rules' inputs as it builds each record: wrong types, no UTF-8 form, max.message.bytes
  with header names in characters, a key on compacted topics, the timestamp window and range, the
  partition's range);
- otherwise every record is in the batch and at the index its order pair says, its partition the one
  it gave, its key's murmur2, or the next round-robin one; each assembled batch passes
  storage/_recordcheck.c's check() (on a compacted topic too, when it is one) with the part's lowest
  and highest timestamps; and each record reads back (_recordread.h) with its offset delta, timestamp,
  key, value and headers, as the strings' UTF-8 bytes.
*/
#include "cores.h"
#include "fuzz.h"

#define NOW_MS 1700000000000LL
#define MAX_TIMESTAMP_MS 253402300799999LL
#define HOUR_MS 3600000LL

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    fuzz_python_init();
    return 0;
}

typedef struct {
    const uint8_t *p;
    size_t n;
} Cursor;

static uint8_t take(Cursor *c) {
    if (!c->n)
        return 0;
    c->n--;
    return *c->p++;
}

static uint64_t take_be(Cursor *c, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = (v << 8) | take(c);
    return v;
}

/* A str from a length byte and bytes; *utf8_len its UTF-8 length, or -1 when it has no UTF-8 form. */
static PyObject *take_str(Cursor *c, Py_ssize_t *utf8_len) {
    size_t n = take(c);
    if (n > c->n)
        n = c->n;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)c->p, (Py_ssize_t)n, "surrogatepass");
    if (s == NULL) {
        PyErr_Clear();
        s = PyUnicode_DecodeLatin1((const char *)c->p, (Py_ssize_t)n, NULL);
    }
    c->p += n;
    c->n -= n;
    FUZZ_ASSERT(s != NULL, "str");
    PyObject *encoded = PyUnicode_AsEncodedString(s, "utf-8", "strict");
    *utf8_len = encoded ? PyBytes_GET_SIZE(encoded) : -1;
    if (!encoded)
        PyErr_Clear();
    Py_XDECREF(encoded);
    return s;
}

/* A field of kind 0 absent, 1 None, 2 str, 3 int: set in dict; its UTF-8 length added to *bytes;
   returns 0 if it is plain (absent, None or an encodable str), else 1 (the call must decline). */
static int put_text(PyObject *dict, const char *name, int kind, Cursor *c, long long *bytes, int *is_null) {
    *is_null = kind < 2;
    if (kind == 0)
        return 0;
    PyObject *value;
    int broken = 0;
    if (kind == 1) {
        value = Py_NewRef(Py_None);
    } else if (kind == 2) {
        Py_ssize_t n;
        value = take_str(c, &n);
        if (n < 0)
            broken = 1;
        else
            *bytes += n;
    } else {
        value = PyLong_FromLong(7);
        broken = 1;
    }
    PyDict_SetItemString(dict, name, value);
    Py_DECREF(value);
    return broken;
}

/* An int field: a kind byte (bits 0-1: 0 the int, 1 None, 2 the int moved past 64 bits by 2^64, as a JSON
   number a client sends can be, 3 its decimal str: a wrong type), then the int (`bytes` bytes, big-endian,
   signed). Sets dict[name] and *value; returns the kind. */
static int put_int(PyObject *dict, const char *name, Cursor *c, int bytes, long long *value) {
    int kind = take(c) & 3;
    *value = bytes == 8 ? (long long)take_be(c, 8) : (int8_t)take(c);
    PyObject *obj;
    if (kind == 0) {
        obj = PyLong_FromLongLong(*value);
    } else if (kind == 1) {
        obj = Py_NewRef(Py_None);
    } else if (kind == 2) {
        PyObject *v = PyLong_FromLongLong(*value), *big = PyLong_FromString("18446744073709551616", NULL, 10);
        obj = *value >= 0 ? PyNumber_Add(v, big) : PyNumber_Subtract(v, big);
        Py_DECREF(v);
        Py_DECREF(big);
    } else {
        obj = PyUnicode_FromFormat("%lld", *value);
    }
    FUZZ_ASSERT(obj != NULL, "int field");
    PyDict_SetItemString(dict, name, obj);
    Py_DECREF(obj);
    return kind;
}

typedef struct {
    int partitions, compacted;
    long long max_bytes, before, after, round_robin;
} Topic;

/* One record's dict from the cursor; *broken set when it breaks a rule. */
static PyObject *take_item(Cursor *c, const Topic *t, int *broken) {
    uint8_t op = take(c);
    PyObject *item = PyDict_New();
    long long size = 70; /* agents/encode.py's RECORD_OVERHEAD */
    int null_key, null_value;
    *broken = put_text(item, "key", op & 3, c, &size, &null_key);
    *broken |= put_text(item, "value", (op >> 2) & 3, c, &size, &null_value);
    long long ts, partition;
    if (op & 16) {
        int kind = put_int(item, "timestamp", c, 8, &ts);
        if (kind >= 2 || (kind == 0 && (ts < 0 || ts > MAX_TIMESTAMP_MS || NOW_MS - ts > t->before ||
                                        ts - NOW_MS > t->after)))
            *broken = 1;
    }
    if (op & 32) {
        int kind = put_int(item, "partition", c, 1, &partition);
        if (kind >= 2 || (kind == 0 && (partition < 0 || partition >= t->partitions)))
            *broken = 1;
    }
    if (op & 64) {
        int n = take(c) & 3;
        PyObject *headers = PyList_New(n);
        for (int h = 0; h < n; h++) {
            uint8_t kind = take(c);
            PyObject *header = PyDict_New();
            Py_ssize_t name_bytes;
            PyObject *name = take_str(c, &name_bytes);
            if (kind & 4) {
                Py_DECREF(name);
                name = PyLong_FromLong(1);
                *broken = 1;
            } else if (name_bytes < 0) {
                *broken = 1;
            } else {
                size += PyUnicode_GET_LENGTH(name); /* header names count in characters */
            }
            PyDict_SetItemString(header, "name", name);
            Py_DECREF(name);
            int null;
            *broken |= put_text(header, "value", kind & 3, c, &size, &null);
            PyList_SET_ITEM(headers, h, header);
        }
        PyDict_SetItemString(item, "headers", headers);
        Py_DECREF(headers);
    }
    if (size > t->max_bytes || (t->compacted && null_key))
        *broken = 1;
    return item;
}

/* The UTF-8 bytes a str field should have been written as; NULL data for None or absent. */
static void utf8_of(PyObject *dict, const char *name, const char **data, Py_ssize_t *len) {
    PyObject *value = PyDict_GetItemString(dict, name);
    *data = NULL;
    *len = -1;
    if (value != NULL && value != Py_None)
        *data = PyUnicode_AsUTF8AndSize(value, len);
}

static void same_bytes(const char *what, Py_ssize_t i, const char *want, Py_ssize_t want_len, const uint8_t *got,
                       Py_ssize_t got_len) {
    FUZZ_ASSERT(want_len == got_len && (want_len <= 0 || memcmp(want, got, (size_t)want_len) == 0),
                "record %zd: %s of %zd bytes written as %zd bytes", i, what, want_len, got_len);
}

/* The records of an assembled batch, read back in order: `count` fields. */
static FxFields *read_back(const uint8_t *batch, Py_ssize_t size, int count) {
    Batch b;
    fuzz_batch(batch, (size_t)size, &b);
    FxBatchInfo info = {.base_timestamp = b.base_timestamp, .last_delta = b.last_delta};
    FxFields *fields = calloc((size_t)count + 1, sizeof *fields);
    Py_ssize_t pos = BATCH_HEADER_SIZE;
    int64_t previous = -1;
    for (int j = 0; j < count; j++)
        FUZZ_ASSERT(fx_read_record(batch, &pos, size, &info, &previous, &fields[j]) == 0, "record %d does not read", j);
    return fields;
}

/* Record i of the request against what its batch holds at its index. */
static void check_record(PyObject *item, Py_ssize_t i, const uint8_t *batch, const FxFields *f, int32_t index) {
    FUZZ_ASSERT(f->offset == index, "record %zd has offset delta %lld, not %d", i, (long long)f->offset, index);
    PyObject *ts = PyDict_GetItemString(item, "timestamp");
    long long want = ts != NULL && ts != Py_None ? PyLong_AsLongLong(ts) : NOW_MS;
    FUZZ_ASSERT(f->timestamp == want, "record %zd: timestamp %lld, not %lld", i, (long long)f->timestamp, want);
    const char *data;
    Py_ssize_t len;
    utf8_of(item, "key", &data, &len);
    same_bytes("key", i, data, len, f->key, f->key_len);
    utf8_of(item, "value", &data, &len);
    same_bytes("value", i, data, len, f->value, f->value_len);
    PyObject *headers = PyDict_GetItemString(item, "headers");
    Py_ssize_t n = headers ? PyList_GET_SIZE(headers) : 0;
    FUZZ_ASSERT(f->headers == n, "record %zd: %zd headers written as %zd", i, n, f->headers);
    Py_ssize_t at = f->headers_at;
    for (Py_ssize_t h = 0; h < n; h++) {
        const uint8_t *name, *value;
        Py_ssize_t name_len, value_len;
        FUZZ_ASSERT(fx_record_header(batch, &at, f->end, &name, &name_len, &value, &value_len) == 0, "header");
        PyObject *header = PyList_GET_ITEM(headers, h);
        utf8_of(header, "name", &data, &len);
        same_bytes("header name", i, data, len, name, name_len);
        utf8_of(header, "value", &data, &len);
        same_bytes("header value", i, data, len, value, value_len);
    }
}

/* The answer of an accepted request against the items it encodes. */
static void check_answer(PyObject *items, const Topic *t, PyObject *result) {
    PyObject *parts = PyTuple_GET_ITEM(result, 0), *order = PyTuple_GET_ITEM(result, 1);
    Py_ssize_t n = PyList_GET_SIZE(items), nparts = PyList_GET_SIZE(parts);
    FUZZ_ASSERT(PyBytes_GET_SIZE(order) == n * 8, "order of %zd bytes for %zd records", PyBytes_GET_SIZE(order), n);
    const int32_t *pairs = (const int32_t *)PyBytes_AS_STRING(order);
    PyObject *joined = fx_assemble_batches(parts);
    FUZZ_ASSERT(joined != NULL, "assemble_batches raised");
    const uint8_t *buf = (const uint8_t *)PyByteArray_AS_STRING(joined);
    Py_ssize_t *at = calloc(nparts + 1, sizeof *at), pos = 0;
    FxFields **fields = calloc(nparts + 1, sizeof *fields);
    int *counts = calloc(nparts + 1, sizeof *counts);
    for (Py_ssize_t b = 0; b < nparts; b++) {
        PyObject *part = PyList_GET_ITEM(parts, b);
        int count = (int)PyLong_AsLong(PyTuple_GET_ITEM(part, 2));
        long long lowest = PyLong_AsLongLong(PyTuple_GET_ITEM(part, 4)),
                  highest = PyLong_AsLongLong(PyTuple_GET_ITEM(part, 5));
        Batch batch;
        FUZZ_ASSERT(fuzz_batch(buf + pos, (size_t)(PyByteArray_GET_SIZE(joined) - pos), &batch) == 0, "batch %zd", b);
        Py_ssize_t size = 12 + (Py_ssize_t)batch.batch_length;
        FUZZ_ASSERT(size >= BATCH_HEADER_SIZE && pos + size <= PyByteArray_GET_SIZE(joined), "batch %zd size", b);
        int64_t index, smallest, largest;
        int verdict = fx_check(buf + pos, BATCH_HEADER_SIZE, size, batch.count, batch.last_delta,
                               batch.base_timestamp, batch.max_timestamp, t->compacted, &index, &smallest, &largest);
        FUZZ_ASSERT(verdict == FX_RC_OK && batch.count == count && smallest == lowest && largest == highest,
                    "batch %zd: verdict %d at %lld, %d records (part: %d), timestamps %lld..%lld (part: %lld..%lld)", b,
                    verdict, (long long)index, batch.count, count, (long long)smallest, (long long)largest, lowest,
                    highest);
        at[b] = pos;
        counts[b] = count;
        fields[b] = read_back(buf + pos, size, count);
        pos += size;
    }
    FUZZ_ASSERT(pos == PyByteArray_GET_SIZE(joined), "assembled %zd of %zd bytes", pos, PyByteArray_GET_SIZE(joined));
    long long null_keys = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t b = pairs[2 * i], j = pairs[2 * i + 1];
        FUZZ_ASSERT(b >= 0 && b < nparts, "record %zd: batch %d of %zd", i, b, nparts);
        PyObject *item = PyList_GET_ITEM(items, i), *part = PyList_GET_ITEM(parts, b);
        long partition = PyLong_AsLong(PyTuple_GET_ITEM(part, 0));
        PyObject *given = PyDict_GetItemString(item, "partition");
        const char *key;
        Py_ssize_t key_len;
        utf8_of(item, "key", &key, &key_len);
        long want;
        if (given != NULL && given != Py_None)
            want = PyLong_AsLong(given);
        else if (key != NULL)
            want = (long)((fx_murmur2((const uint8_t *)key, key_len) & 0x7fffffff) % (uint32_t)t->partitions);
        else
            want = (long)((t->round_robin + null_keys++) % t->partitions);
        FUZZ_ASSERT(partition == want, "record %zd in partition %ld, not %ld", i, partition, want);
        FUZZ_ASSERT(j >= 0 && j < counts[b], "record %zd: index %d of %d", i, j, counts[b]);
        check_record(item, i, buf + at[b], &fields[b][j], j);
    }
    FUZZ_ASSERT(PyLong_AsLongLong(PyTuple_GET_ITEM(result, 2)) == null_keys, "null-key count");
    for (Py_ssize_t b = 0; b < nparts; b++)
        free(fields[b]);
    free(fields), free(counts), free(at);
    Py_DECREF(joined);
}

static const long long WINDOWS[4][2] = {{INT64_MAX, HOUR_MS}, {HOUR_MS, HOUR_MS}, {0, 0}, {INT64_MAX, INT64_MAX}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 7)
        return 0;
    Cursor c = {data, size};
    uint8_t topic = take(&c);
    Topic t = {
        .partitions = (topic & 31) + 1,
        .compacted = (topic >> 5) & 1,
        .before = WINDOWS[topic >> 6][0],
        .after = WINDOWS[topic >> 6][1],
    };
    t.max_bytes = 16 * (long long)take_be(&c, 2);
    t.round_robin = (long long)take_be(&c, 4);
    PyObject *items = PyList_New(0);
    int broken = 0;
    while (c.n) {
        int item_broken;
        PyObject *item = take_item(&c, &t, &item_broken);
        broken |= item_broken;
        PyList_Append(items, item);
        Py_DECREF(item);
    }
    PyObject *args = Py_BuildValue("(OiiLLLLLL)", items, t.partitions, t.compacted, t.max_bytes, NOW_MS, t.before,
                                   t.after, MAX_TIMESTAMP_MS, t.round_robin);
    PyObject *result = fx_encode_records(args);
    FUZZ_ASSERT(result != NULL, "encode_records raised");
    FUZZ_ASSERT((result == Py_None) == broken, "encode_records %s a request that %s a rule",
                result == Py_None ? "declines" : "encodes", broken ? "breaks" : "breaks no");
    if (result != Py_None)
        check_answer(items, &t, result);
    Py_DECREF(result);
    Py_DECREF(args);
    Py_DECREF(items);
    return 0;
}
