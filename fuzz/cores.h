/* fuzz/cores.h: the extensions' static cores, exposed to the harnesses by fuzz/core_*.c.

Each fuzz/core_<module>.c includes one extension's .c file (so that its static functions, and the static
names two extensions share, such as `methods`, `module` and _recordread.h's readers, stay in their own
translation unit) and wraps its core in one of the functions below, with plain C arguments. A harness
links the cores it drives and the ones it checks its answers against. The module boilerplate each .c file
also holds (PyInit_*, the argument parsing) is compiled but not called, except where a harness says so.
*/
#ifndef STRATA_FUZZ_CORES_H
#define STRATA_FUZZ_CORES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* storage/_recordcheck.c: check(). Returns the verdict (RC_*: 0 ok, 1 malformed, 2 trailing, 3 no key,
   4 maxTimestamp). */
enum { FX_RC_OK, FX_RC_MALFORMED, FX_RC_TRAILING, FX_RC_NO_KEY, FX_RC_MAX_TIMESTAMP };
int fx_check(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int64_t count, int64_t last_delta,
             int64_t base_timestamp, int64_t max_timestamp, int compacted, int64_t *index, int64_t *smallest,
             int64_t *largest);
/* storage/_recordcheck.c: scan_refs() with the key's or the value's header name. A new (refs, nulls)
   tuple, or NULL with an exception set. */
PyObject *fx_schema_refs(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int64_t count, int64_t last_delta,
                         int key, int indexes, int each);

/* storage/_keyscan.c: scan(), storing the first `stored` records' columns. 0, or -1 with the reference's
   error message in `message` (128 bytes). */
typedef struct {
    int64_t *offsets, *timestamps, *starts, *ends;
    uint64_t *h1, *h2;
    uint8_t *flags;
} FxColumns;
typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos, end, count;
    int64_t offset_base, batch_base_offset, base_timestamp, append_time, last_delta;
    int log_append_time;
    uint64_t ka0, ka1, kb0, kb1;
} FxScanInput;
int fx_scan(const FxScanInput *in, Py_ssize_t stored, FxColumns *cols, char message[128]);
uint64_t fx_siphash24(uint64_t k0, uint64_t k1, const uint8_t *in, size_t len);

/* storage/_recordcols.c: decode() appending to the eight bytearrays of `columns`, opened and closed as
   decode_columns opens and closes them. 0 and *appended, -1 out of memory (exception set), -2 declined. */
typedef struct {
    int64_t first_offset, base_timestamp, append_time, last_delta;
    int log_append_time;
} FxBatchInfo;
int fx_decode_columns(PyObject *columns[8], const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end,
                      Py_ssize_t count, const FxBatchInfo *info, int64_t start, int64_t stop,
                      Py_ssize_t *appended);

/* api/_recordjson.c: render() into the bytearray `out`, as render_batch calls it (GIL released around the
   loop); and render_run itself (the Python function: its batch walk is in its body), called with `args`.
   fx_render returns render's rc (0, -1, -2) and the progress. */
typedef struct {
    Py_ssize_t size, max_bytes, rendered;
    int nonempty, stopped;
    int64_t next_offset;
} FxProgress;
int fx_render(PyObject *out, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count,
              const FxBatchInfo *info, int64_t start_offset, int base64, FxProgress *progress);
PyObject *fx_render_run(PyObject *args);
PyObject *fx_render_batch(PyObject *args);
/* The record-reading rules the renderers use (storage/_recordread.h), for the harness's own walk:
   read_record's fields of the next record at *pos, 0 or -1. Header i's name and value are read by
   fx_record_header. */
typedef struct {
    int64_t offset, timestamp;
    const uint8_t *key, *value;
    Py_ssize_t key_len, value_len, headers_at, headers, end;
} FxFields;
int fx_read_record(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, const FxBatchInfo *info,
                   int64_t *previous, FxFields *f);
int fx_record_header(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, const uint8_t **name,
                     Py_ssize_t *name_len, const uint8_t **value, Py_ssize_t *value_len);
int fx_utf8(const uint8_t *s, Py_ssize_t n);

/* agents/_encode.c: encode_records, assemble_batches and render_offsets' sibling, the Python functions
   (their cores work on Python objects), called with their arguments. */
PyObject *fx_encode_records(PyObject *args);
PyObject *fx_assemble_batches(PyObject *parts);
uint32_t fx_murmur2(const uint8_t *data, Py_ssize_t length);

#endif
