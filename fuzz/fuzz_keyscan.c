/* fuzz/fuzz_keyscan.c: storage/_keyscan.c's scan(), compaction's per-record scan into columns with the
keys' SipHash, on arbitrary records.

Input (fuzz/fuzz.h): the knobs, then one batch. Knob a is offset_base (the chunk's base offset; offsets
are a + baseOffset + offsetDelta, and may leave 64 bits); the batch's LogAppendTime bit makes every
timestamp its maxTimestamp, as header.append_time does. The columns are allocated as scan_records
allocates them (for min(count, what the bytes can hold) records, the count coming from a header the
fuzzer writes), each exactly that long, so AddressSanitizer sees a write past them.

Invariants, besides the sanitizers':
- a refusal is one of scan_batch_reference's messages (storage/records/scan.py), or one of the two the
  C scan adds (an offset or timestamp outside 64 bits);
- an accepted batch's records tile it: the first starts at the first record, each at the previous one's
  end, the last ends at the batch's end; offsets strictly increase within lastOffsetDelta; flags use two
  bits; a record without a key has hashes 0; LogAppendTime records all have maxTimestamp;
- whenever storage/_recordcheck.c's check() reads the records (it reads more of them: headers) and the
  offsets fit in 64 bits, the scan accepts the batch.
*/
#include "cores.h"
#include "fuzz.h"

static const char *MESSAGES[] = {
    "record runs past the end of its batch",
    "varint longer than ",
    "varint overflows ",
    "record length runs past its batch or is too small",
    "offset delta ",
    "record key runs past its record",
    "record key length ",
    "record value length ",
    "record batch has bytes left after its recordsCount records",
    "record timestamp is outside 64 bits",
    "record offset is outside 64 bits",
};

static int known_message(const char *message) {
    for (size_t i = 0; i < sizeof MESSAGES / sizeof *MESSAGES; i++)
        if (strncmp(message, MESSAGES[i], strlen(MESSAGES[i])) == 0)
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Knobs k;
    Batch b;
    if (fuzz_knobs(&data, &size, &k) < 0 || fuzz_batch(data, size, &b) < 0 || b.count < 0)
        return 0;
    FxScanInput in = {
        .buf = b.buf,
        .pos = b.start,
        .end = b.end,
        .count = b.count,
        .offset_base = k.a,
        .batch_base_offset = b.base_offset,
        .base_timestamp = b.base_timestamp,
        .append_time = b.max_timestamp,
        .last_delta = b.last_delta,
        .log_append_time = (b.attributes & LOG_APPEND_TIME) != 0,
        .ka0 = (uint64_t)k.b,
        .ka1 = (uint64_t)k.c,
        .kb0 = (uint64_t)k.c,
        .kb1 = (uint64_t)k.b,
    };
    /* scan_records: columns for what the bytes can hold, not what the header claims. */
    Py_ssize_t room = (b.end - b.start) / 7, cap = b.count < room ? b.count : room;
    FxColumns cols = {
        .offsets = malloc(cap * 8),
        .timestamps = malloc(cap * 8),
        .starts = malloc(cap * 8),
        .ends = malloc(cap * 8),
        .h1 = malloc(cap * 8),
        .h2 = malloc(cap * 8),
        .flags = malloc(cap),
    };
    char message[128];
    int rc = fx_scan(&in, cap, &cols, message);
    if (rc != 0) {
        FUZZ_ASSERT(known_message(message), "unexpected message: %.128s", message);
    } else {
        Py_ssize_t n = b.count;
        FUZZ_ASSERT(n <= cap, "%zd records scanned in room for %zd", n, cap);
        FUZZ_ASSERT(n > 0 || b.start == b.end, "no record, %zd bytes", b.end - b.start);
        for (Py_ssize_t i = 0; i < n; i++) {
            FUZZ_ASSERT(cols.starts[i] == (i ? cols.ends[i - 1] : b.start), "record %zd starts at %lld", i,
                        (long long)cols.starts[i]);
            FUZZ_ASSERT(cols.ends[i] > cols.starts[i] && cols.ends[i] <= b.end, "record %zd ends at %lld", i,
                        (long long)cols.ends[i]);
            FUZZ_ASSERT(i == 0 || cols.offsets[i] > cols.offsets[i - 1], "offsets out of order at %zd", i);
            FUZZ_ASSERT(!(cols.flags[i] & ~3), "flags %d", cols.flags[i]);
            FUZZ_ASSERT((cols.flags[i] & 1) || (cols.h1[i] == 0 && cols.h2[i] == 0), "hash of a null key");
            FUZZ_ASSERT(!in.log_append_time || cols.timestamps[i] == b.max_timestamp, "LogAppendTime %lld",
                        (long long)cols.timestamps[i]);
        }
        FUZZ_ASSERT(n == 0 || cols.ends[n - 1] == b.end, "records end before the batch");
        FUZZ_ASSERT(n == 0 || (__int128)cols.offsets[n - 1] - cols.offsets[0] <= b.last_delta,
                    "offsets past lastOffsetDelta");
    }
    /* What check() reads, the scan reads, unless an offset leaves 64 bits. */
    int64_t index, smallest, largest;
    int verdict = fx_check(b.buf, b.start, b.end, b.count, b.last_delta, b.base_timestamp, b.max_timestamp, 0,
                           &index, &smallest, &largest);
    __int128 first = (__int128)k.a + b.base_offset, last = first + (b.last_delta > 0 ? b.last_delta : 0);
    int offsets_fit = first >= INT64_MIN && last <= INT64_MAX;
    if (verdict != FX_RC_MALFORMED && verdict != FX_RC_TRAILING && offsets_fit)
        FUZZ_ASSERT(rc == 0, "check() reads the batch, the scan refuses it: %.128s", message);
    free(cols.offsets), free(cols.timestamps), free(cols.starts), free(cols.ends);
    free(cols.h1), free(cols.h2), free(cols.flags);
    return 0;
}
