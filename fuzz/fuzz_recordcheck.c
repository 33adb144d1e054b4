/* fuzz/fuzz_recordcheck.c: storage/_recordcheck.c's check(), the walk of every record of a producer's
batch before it is stored (check_records), on arbitrary records.

Input (fuzz/fuzz.h): the knobs (unused here; the same layout as the other record targets, so their
corpora mix) and one batch, whose header gives check() its count, lastOffsetDelta, baseTimestamp and
maxTimestamp, as storage/records/check.py passes them. check() runs twice, on an ordinary and on a
compacted topic.

Invariants, besides AddressSanitizer's and UndefinedBehaviorSanitizer's:
- the verdict is one of the five, its record index -1 or a record of the batch, as check_records says;
- the compacted run differs only by naming the first record without a key (RC_NO_KEY);
- the records parse (no RC_MALFORMED or RC_TRAILING) exactly when storage/_recordcols.c's decode(),
  which reads with the same rules, accepts the batch; and then storage/_keyscan.c's scan(), which reads
  less (no headers), accepts it too, with the same offsets, timestamps, null keys and null values, and
  each key's SipHash; and check()'s smallest and largest timestamps are the records'.
- on records that parse, scan_refs() (validation on produce's walk of schema references), for the key and
  the value, with and without message indexes, one tuple per record or per run: never an exception;
  records in order and in the batch, kinds 1-3, a BAD one only last, fields inside the records section
  (an id's at least 5 bytes); per record, every non-null field but those after a BAD one, with the nulls;
  per run, a subsequence of the per-record tuples.
*/
#include "cores.h"
#include "fuzz.h"

static const uint64_t K0 = 0x0706050403020100ULL, K1 = 0x0f0e0d0c0b0a0908ULL;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    fuzz_python_init();
    return 0;
}

typedef struct {
    PyObject *array[8];
} Columns;

static void columns_free(Columns *c) {
    for (int i = 0; i < 8; i++)
        Py_XDECREF(c->array[i]);
}

#define COLUMN(c, i) ((const uint8_t *)PyByteArray_AS_STRING((c)->array[i]))

/* recordcols' columns against keyscan's, record by record. */
static void compare_columns(const Batch *b, Columns *cols, Py_ssize_t n) {
    Py_ssize_t room = (b->end - b->start) / 7;
    FUZZ_ASSERT(n <= room, "%zd records in %zd bytes", n, b->end - b->start);
    int64_t *offsets = calloc(n + 1, 8), *timestamps = calloc(n + 1, 8), *starts = calloc(n + 1, 8),
            *ends = calloc(n + 1, 8);
    uint64_t *h1 = calloc(n + 1, 8), *h2 = calloc(n + 1, 8);
    uint8_t *flags = calloc(n + 1, 1);
    FxColumns kc = {offsets, timestamps, starts, ends, h1, h2, flags};
    FxScanInput in = {.buf = b->buf,
                      .pos = b->start,
                      .end = b->end,
                      .count = b->count,
                      .base_timestamp = b->base_timestamp,
                      .last_delta = b->last_delta,
                      .ka0 = K0,
                      .ka1 = K1,
                      .kb0 = K1,
                      .kb1 = K0};
    char message[128];
    int rc = fx_scan(&in, n, &kc, message);
    FUZZ_ASSERT(rc == 0, "keyscan refuses a batch whose records parse: %s", message);
    const uint8_t *key_data = COLUMN(cols, 4);
    int32_t key_start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t offset, timestamp;
        int32_t key_end;
        memcpy(&offset, COLUMN(cols, 0) + 8 * i, 8);
        memcpy(&timestamp, COLUMN(cols, 1) + 8 * i, 8);
        memcpy(&key_end, COLUMN(cols, 2) + 4 * i, 4);
        int keyed = COLUMN(cols, 3)[i], valued = COLUMN(cols, 6)[i];
        FUZZ_ASSERT(offsets[i] == offset && timestamps[i] == timestamp,
                    "record %zd: keyscan (%lld, %lld), recordcols (%lld, %lld)", i, (long long)offsets[i],
                    (long long)timestamps[i], (long long)offset, (long long)timestamp);
        FUZZ_ASSERT((flags[i] & 1) == keyed && ((flags[i] >> 1) & 1) == !valued,
                    "record %zd: keyscan flags %d, recordcols key %d value %d", i, flags[i], keyed, valued);
        uint64_t expect = keyed ? fx_siphash24(K0, K1, key_data + key_start, (size_t)(key_end - key_start)) : 0;
        FUZZ_ASSERT(h1[i] == expect, "record %zd: key hash", i);
        FUZZ_ASSERT(i == 0 ? starts[i] == b->start : starts[i] == ends[i - 1], "record %zd: span", i);
        key_start = key_end;
    }
    FUZZ_ASSERT(n == 0 || ends[n - 1] == b->end, "last span ends at %lld", (long long)ends[n - 1]);
    free(offsets), free(timestamps), free(starts), free(ends), free(h1), free(h2), free(flags);
}

/* The (record index, kind) of each tuple scan_refs returned, checked; the count, and whether one is BAD. */
static Py_ssize_t check_refs(const Batch *b, PyObject *found, int64_t *indexes, int *bad, int64_t *nulls) {
    FUZZ_ASSERT(found != NULL && PyTuple_Check(found) && PyTuple_GET_SIZE(found) == 2, "scan_refs failed");
    PyObject *refs = PyTuple_GET_ITEM(found, 0);
    *nulls = PyLong_AsLongLong(PyTuple_GET_ITEM(found, 1));
    Py_ssize_t n = PyList_GET_SIZE(refs);
    *bad = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(refs, i);
        FUZZ_ASSERT(PyTuple_GET_SIZE(t) == 6, "a ref of %zd items", PyTuple_GET_SIZE(t));
        int64_t index = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 0));
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
        Py_ssize_t start = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 4)), end = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 5));
        FUZZ_ASSERT(index >= 0 && index < b->count && (i == 0 || index > indexes[i - 1]), "ref %zd: record %lld",
                    i, (long long)index);
        FUZZ_ASSERT(kind >= 1 && kind <= 3 && (kind != 3 || i == n - 1), "ref %zd: kind %ld", i, kind);
        FUZZ_ASSERT(start >= b->start && start <= end && end <= b->end, "ref %zd: field %zd..%zd", i, start, end);
        FUZZ_ASSERT(kind != 1 || end - start >= 5, "ref %zd: an id in %zd bytes", i, end - start);
        indexes[i] = index;
        *bad = kind == 3;
    }
    return n;
}

/* scan_refs for both fields, indexes measured or not, per record and per run. */
static void check_schema_refs(const Batch *b) {
    int64_t *each = calloc(b->count + 1, 8), *runs = calloc(b->count + 1, 8);
    for (int combo = 0; combo < 4; combo++) {
        int key = combo & 1, measured = combo >> 1, bad_each, bad_runs;
        int64_t nulls_each, nulls_runs;
        PyObject *one = fx_schema_refs(b->buf, b->start, b->end, b->count, b->last_delta, key, measured, 1);
        Py_ssize_t n = check_refs(b, one, each, &bad_each, &nulls_each);
        PyObject *run = fx_schema_refs(b->buf, b->start, b->end, b->count, b->last_delta, key, measured, 0);
        Py_ssize_t r = check_refs(b, run, runs, &bad_runs, &nulls_runs);
        FUZZ_ASSERT(bad_each || n + nulls_each == b->count, "%zd refs and %lld nulls of %d records", n,
                    (long long)nulls_each, b->count);
        FUZZ_ASSERT(bad_each == bad_runs && nulls_each == nulls_runs, "per run: bad %d nulls %lld", bad_runs,
                    (long long)nulls_runs);
        Py_ssize_t j = 0;
        for (Py_ssize_t i = 0; i < r; i++) {
            while (j < n && each[j] < runs[i])
                j++;
            FUZZ_ASSERT(j < n && each[j] == runs[i], "run %zd starts at record %lld, no such ref", i,
                        (long long)runs[i]);
        }
        Py_DECREF(one);
        Py_DECREF(run);
    }
    free(each), free(runs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Knobs k;
    Batch b;
    if (fuzz_knobs(&data, &size, &k) < 0 || fuzz_batch(data, size, &b) < 0 || b.count < 0)
        return 0;
    int64_t index, smallest, largest, index_c, smallest_c, largest_c;
    int verdict = fx_check(b.buf, b.start, b.end, b.count, b.last_delta, b.base_timestamp, b.max_timestamp, 0,
                           &index, &smallest, &largest);
    int compacted = fx_check(b.buf, b.start, b.end, b.count, b.last_delta, b.base_timestamp, b.max_timestamp, 1,
                             &index_c, &smallest_c, &largest_c);
    FUZZ_ASSERT(verdict >= FX_RC_OK && verdict <= FX_RC_MAX_TIMESTAMP && verdict != FX_RC_NO_KEY, "verdict %d",
                verdict);
    FUZZ_ASSERT(compacted >= FX_RC_OK && compacted <= FX_RC_MAX_TIMESTAMP, "verdict %d", compacted);
    int at_record = verdict == FX_RC_MALFORMED;
    FUZZ_ASSERT(at_record ? index >= 0 && index < b.count : index == -1, "verdict %d index %lld", verdict,
                (long long)index);
    int parsed = verdict != FX_RC_MALFORMED && verdict != FX_RC_TRAILING;
    if (verdict == FX_RC_OK && b.count > 0)
        FUZZ_ASSERT(smallest <= largest && largest == b.max_timestamp, "timestamps %lld..%lld",
                    (long long)smallest, (long long)largest);

    Columns cols = {{NULL}};
    for (int i = 0; i < 8; i++) {
        cols.array[i] = PyByteArray_FromStringAndSize(NULL, 0);
        FUZZ_ASSERT(cols.array[i] != NULL, "bytearray");
    }
    FxBatchInfo info = {.first_offset = 0, .base_timestamp = b.base_timestamp, .last_delta = b.last_delta};
    Py_ssize_t n = 0;
    int rc = fx_decode_columns(cols.array, b.buf, b.start, b.end, b.count, &info, INT64_MIN, INT64_MAX, &n);
    FUZZ_ASSERT(rc != -1, "out of memory");
    FUZZ_ASSERT((rc == 0) == parsed, "recordcols rc %d, recordcheck verdict %d (record %lld)", rc, verdict,
                (long long)index);
    if (parsed) {
        FUZZ_ASSERT(n == b.count, "recordcols appended %zd of %d records", n, b.count);
        compare_columns(&b, &cols, n);
        check_schema_refs(&b);
        /* The first record without a key, and the timestamps' range. */
        Py_ssize_t unkeyed = -1;
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t t;
            memcpy(&t, COLUMN(&cols, 1) + 8 * i, 8);
            lo = t < lo ? t : lo;
            hi = t > hi ? t : hi;
            if (unkeyed < 0 && !COLUMN(&cols, 3)[i])
                unkeyed = i;
        }
        FUZZ_ASSERT(smallest == lo && largest == hi, "check's timestamps %lld..%lld, the records' %lld..%lld",
                    (long long)smallest, (long long)largest, (long long)lo, (long long)hi);
        if (unkeyed >= 0)
            FUZZ_ASSERT(compacted == FX_RC_NO_KEY && index_c == unkeyed, "compacted: verdict %d index %lld, "
                        "first record without a key %zd", compacted, (long long)index_c, unkeyed);
        else
            FUZZ_ASSERT(compacted == verdict, "compacted: verdict %d, ordinary %d", compacted, verdict);
    } else {
        /* The walk stops at the first record without a key, or where the ordinary one fails. */
        FUZZ_ASSERT(compacted == verdict || (compacted == FX_RC_NO_KEY && (verdict == FX_RC_TRAILING ||
                                                                           index_c < index)),
                    "compacted: verdict %d index %lld, ordinary %d index %lld", compacted, (long long)index_c,
                    verdict, (long long)index);
    }
    columns_free(&cols);
    return 0;
}
