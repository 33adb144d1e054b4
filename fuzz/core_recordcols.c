/* fuzz/core_recordcols.c: storage/_recordcols.c's decode() for the harnesses (fuzz/cores.h), with the
   columns opened and closed as decode_columns does. */
#include "../storage/_recordcols.c"
#include "cores.h"

int fx_decode_columns(PyObject *columns[8], const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end,
                      Py_ssize_t count, const FxBatchInfo *info, int64_t start, int64_t stop,
                      Py_ssize_t *appended) {
    Out cols[NCOLUMNS];
    for (int c = 0; c < NCOLUMNS; c++)
        out_open(&cols[c], columns[c]);
    BatchInfo b = {
        .first_offset = info->first_offset,
        .base_timestamp = info->base_timestamp,
        .append_time = info->append_time,
        .last_delta = info->last_delta,
        .log_append_time = info->log_append_time,
    };
    Reader r = {buf, pos, end};
    *appended = 0;
    int rc = decode(&r, &b, count, start, stop, cols, appended);
    for (int c = 0; c < NCOLUMNS; c++)
        if (out_close(&cols[c]) < 0)
            rc = -1;
    return rc;
}
