/* fuzz/core_keyscan.c: storage/_keyscan.c's scan() and SipHash for the harnesses (fuzz/cores.h). */
#include "../storage/_keyscan.c"
#include "cores.h"

int fx_scan(const FxScanInput *in, Py_ssize_t stored, FxColumns *cols, char message[128]) {
    ScanInput input = {
        .buf = in->buf,
        .pos = in->pos,
        .end = in->end,
        .count = in->count,
        .offset_base = in->offset_base,
        .batch_base_offset = in->batch_base_offset,
        .base_timestamp = in->base_timestamp,
        .append_time = in->append_time,
        .last_delta = in->last_delta,
        .log_append_time = in->log_append_time,
        .ka0 = in->ka0,
        .ka1 = in->ka1,
        .kb0 = in->kb0,
        .kb1 = in->kb1,
    };
    Columns columns = {
        .offsets = cols->offsets,
        .timestamps = cols->timestamps,
        .starts = cols->starts,
        .ends = cols->ends,
        .h1 = cols->h1,
        .h2 = cols->h2,
        .flags = cols->flags,
    };
    ScanError err;
    err.message[0] = '\0';
    int rc = scan(&input, stored, &columns, &err);
    memcpy(message, err.message, sizeof err.message);
    return rc;
}

uint64_t fx_siphash24(uint64_t k0, uint64_t k1, const uint8_t *in, size_t len) {
    return siphash24(k0, k1, in, len);
}
