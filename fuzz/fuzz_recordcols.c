/* fuzz/fuzz_recordcols.c: storage/_recordcols.c's decode(), Spark's columns of a stored batch, on arbitrary
records.

Input (fuzz/fuzz.h): the knobs, then one batch. Knob a is the chunk's offset_base (the first offset is
a + baseOffset, wrapping as int64: the core takes any), b and c the task's [start, stop) window. Flags:
bit 0 gives each column 4,093 bytes of earlier output (a later batch of the same task appends after the
first ones; the first append then outgrows the bytearray's first allocation), bit 1 leaves room deleted
at the front of each bytearray (storage/_growbuf.h counts it). The batch's
LogAppendTime bit gives every record its maxTimestamp. The bytearrays live in an embedded interpreter
whose allocator is malloc, so AddressSanitizer sees their bounds.

Invariants, besides the sanitizers':
- accepted: the appended columns hold `appended` rows (8, 8, 4, 1, 4, 1 bytes a row), offsets strictly
  increasing inside [start, stop), key and value ends non-decreasing from the earlier output's length to
  the data's end, a null key or value adding no byte; LogAppendTime rows all with maxTimestamp;
- the batch is accepted exactly when storage/_recordcheck.c's check() reads its records (same rules,
  _recordread.h), given offsets that fit in 64 bits; with LogAppendTime check() still computes
  baseTimestamp + delta, so only check()'s acceptance implies decode()'s.
*/
#include "cores.h"
#include "fuzz.h"

#define EARLIER_OUTPUT 4093

static const int WIDTH[8] = {8, 8, 4, 1, 0, 4, 1, 0}; /* the data columns (4, 7) have no fixed width */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    fuzz_python_init();
    return 0;
}

#define AT(i) ((const uint8_t *)PyByteArray_AS_STRING(cols[i]))

/* One binary column (ends, valid, data) of n rows appended after `prefix` bytes of each. */
static void check_binary(PyObject **cols, int ends, Py_ssize_t n, Py_ssize_t prefix) {
    Py_ssize_t data_len = PyByteArray_GET_SIZE(cols[ends + 2]);
    int32_t previous = (int32_t)prefix;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t end;
        memcpy(&end, AT(ends) + prefix + 4 * i, 4);
        uint8_t valid = AT(ends + 1)[prefix + i];
        FUZZ_ASSERT(valid <= 1 && end >= previous && (valid || end == previous), "row %zd: end %d valid %d", i,
                    end, valid);
        previous = end;
    }
    FUZZ_ASSERT(previous == data_len, "ends stop at %d, data is %zd bytes", previous, data_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Knobs k;
    Batch b;
    if (fuzz_knobs(&data, &size, &k) < 0 || fuzz_batch(data, size, &b) < 0 || b.count < 0)
        return 0;
    Py_ssize_t prefix = k.flags & 1 ? EARLIER_OUTPUT : 0;
    PyObject *cols[8];
    for (int i = 0; i < 8; i++) {
        cols[i] = fuzz_bytearray(prefix, k.flags & 2);
        FUZZ_ASSERT(cols[i] != NULL, "bytearray");
    }
    int lat = (b.attributes & LOG_APPEND_TIME) != 0;
    FxBatchInfo info = {
        .first_offset = (int64_t)((uint64_t)k.a + (uint64_t)b.base_offset),
        .base_timestamp = b.base_timestamp,
        .append_time = b.max_timestamp,
        .last_delta = b.last_delta,
        .log_append_time = lat,
    };
    Py_ssize_t n = -1;
    int rc = fx_decode_columns(cols, b.buf, b.start, b.end, b.count, &info, k.b, k.c, &n);
    FUZZ_ASSERT(rc == 0 || rc == -2, "rc %d", rc);
    if (rc == 0) {
        FUZZ_ASSERT(n >= 0 && n <= b.count, "%zd rows of %d records", n, b.count);
        for (int i = 0; i < 8; i++)
            if (WIDTH[i])
                FUZZ_ASSERT(PyByteArray_GET_SIZE(cols[i]) == prefix + WIDTH[i] * n, "column %d: %zd bytes", i,
                            PyByteArray_GET_SIZE(cols[i]));
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t offset, previous, timestamp;
            memcpy(&offset, AT(0) + prefix + 8 * i, 8);
            memcpy(&timestamp, AT(1) + prefix + 8 * i, 8);
            FUZZ_ASSERT(offset >= k.b && offset < k.c, "offset %lld outside the window", (long long)offset);
            if (i) {
                memcpy(&previous, AT(0) + prefix + 8 * (i - 1), 8);
                FUZZ_ASSERT(offset > previous, "offsets out of order at row %zd", i);
            }
            FUZZ_ASSERT(!lat || timestamp == b.max_timestamp, "LogAppendTime row %zd", i);
        }
        check_binary(cols, 2, n, prefix);
        check_binary(cols, 5, n, prefix);
    }
    int64_t index, smallest, largest;
    int verdict = fx_check(b.buf, b.start, b.end, b.count, b.last_delta, b.base_timestamp, b.max_timestamp, 0,
                           &index, &smallest, &largest);
    int parsed = verdict != FX_RC_MALFORMED && verdict != FX_RC_TRAILING;
    int64_t last;
    int offsets_fit = !__builtin_add_overflow(info.first_offset, (int64_t)(b.last_delta > 0 ? b.last_delta : 0),
                                              &last);
    if (offsets_fit && (parsed || !lat))
        FUZZ_ASSERT((rc == 0) == parsed, "recordcols rc %d, check() verdict %d at record %lld", rc, verdict,
                    (long long)index);
    for (int i = 0; i < 8; i++)
        Py_DECREF(cols[i]);
    return 0;
}
