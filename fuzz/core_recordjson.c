/* fuzz/core_recordjson.c: api/_recordjson.c's render() and render_run for the harnesses (fuzz/cores.h),
   and _recordread.h's reader for the harness's own walk of the same records. */
#include "../api/_recordjson.c"
#include "cores.h"

static BatchInfo batch_info(const FxBatchInfo *info) {
    BatchInfo b = {
        .first_offset = info->first_offset,
        .base_timestamp = info->base_timestamp,
        .append_time = info->append_time,
        .last_delta = info->last_delta,
        .log_append_time = info->log_append_time,
    };
    return b;
}

int fx_render(PyObject *array, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count,
              const FxBatchInfo *info, int64_t start_offset, int base64, FxProgress *progress) {
    static int filled;
    if (!filled) { /* what PyInit__recordjson does */
        fill_b64_pairs();
        filled = 1;
    }
    Out out;
    out_open(&out, array);
    Batch b = {.info = batch_info(info), .start_offset = start_offset, .base64 = base64, .count = count};
    Progress p = {.size = progress->size,
                  .max_bytes = progress->max_bytes,
                  .nonempty = progress->nonempty,
                  .stopped = progress->max_bytes < 0,
                  .next_offset = -1};
    Reader r = {buf, pos, end};
    out_release(&out);
    int rc = render(&r, &b, &p, &out);
    out_reacquire(&out);
    if (out_close(&out) < 0)
        rc = -1;
    progress->size = p.size;
    progress->rendered = p.rendered;
    progress->nonempty = p.nonempty;
    progress->stopped = p.stopped;
    progress->next_offset = p.next_offset;
    return rc;
}

PyObject *fx_render_run(PyObject *args) {
    fill_b64_pairs();
    return render_run(NULL, args);
}

PyObject *fx_render_batch(PyObject *args) {
    fill_b64_pairs();
    return render_batch(NULL, args);
}

int fx_read_record(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, const FxBatchInfo *info,
                   int64_t *previous, FxFields *f) {
    BatchInfo b = batch_info(info);
    Reader r = {buf, *pos, end};
    Fields fields;
    if (read_record(&r, &b, previous, &fields) < 0)
        return -1;
    *pos = fields.end;
    f->offset = fields.offset;
    f->timestamp = fields.timestamp;
    f->key = fields.key;
    f->value = fields.value;
    f->key_len = fields.key_len;
    f->value_len = fields.value_len;
    f->headers_at = fields.headers_at;
    f->headers = fields.headers;
    f->end = fields.end;
    return 0;
}

int fx_utf8(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t chars;
    return utf8(s, n, &chars);
}

/* The next header of a record read by fx_read_record (from f->headers_at): its name and value (value_len
   -1 for null). 0, or -1 if it does not read (read_record checked it: never). */
int fx_record_header(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, const uint8_t **name,
                     Py_ssize_t *name_len, const uint8_t **value, Py_ssize_t *value_len) {
    Reader h = {buf, *pos, end};
    uint64_t n;
    if (varint(&h, end, 32, &n) < 0)
        return -1;
    *name_len = (Py_ssize_t)zigzag(n);
    *name = buf + h.pos;
    h.pos += *name_len;
    if (varint(&h, end, 32, &n) < 0)
        return -1;
    *value_len = (Py_ssize_t)zigzag(n);
    *value = buf + h.pos;
    if (*value_len > 0)
        h.pos += *value_len;
    *pos = h.pos;
    return 0;
}
