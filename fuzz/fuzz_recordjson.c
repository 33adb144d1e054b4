/* fuzz/fuzz_recordjson.c: api/_recordjson.c, HTTP fetch's JSON rendering of stored records: render() over
one batch (what render_batch runs), or render_run's walk over a chunk of batches, on arbitrary records,
with its UTF-8 validation and JSON escaping of client bytes.

Input (fuzz/fuzz.h): the knobs, then the payload. Flags: bit 0 base64 (else utf8), bit 1 the answer
already holds a record (`nonempty`, with `size` = 100 x bits 5-7), bit 2 run mode, bit 3 (run mode) set
each batch's CRC-32C right first, so that the walk gets past it, bit 4 an answer buffer with 4,093
bytes of earlier output and room deleted at its front. Knob a is offset_base (batch mode: the first offset is a +
baseOffset, wrapping; run mode: a & INT64_MAX, render_run refusing a negative one), b start_offset, c
max_bytes (negative: check only). Batch mode reads the payload as one batch (fuzz/fuzz.h); run mode as
a chunk, from position 0.

The oracle: the harness reads the same records with _recordread.h's read_record (in run mode, walking
the batch headers by storage/records/codec.py's read_header rules, as render_run says it does) and hands
them to a few lines of Python (ORACLE below), which render them by agents/chunks.py's decode_fetch rules
(from start_offset, whole records while `size` stays within max_bytes, at least one) and
api/models.py's record_out (UTF-8 text or base64, header names as text). Then:
- declined (None) exactly when the bytes do not read, a batch header is refused (run mode), or, for
  utf8, a key, value or header value the loop reached is not UTF-8 by Python's strict decoder;
- otherwise the returned progress (count, next offset, size, nonempty, stopped; run mode: where it
  stopped) is the oracle's, and the appended bytes are UTF-8 that json.loads reads (after a comma when
  the answer was not empty) as exactly the oracle's objects.
*/
#include "../storage/_crc32c.h"
#include "cores.h"
#include "fuzz.h"

static const char ORACLE[] =
    "import base64, json\n"
    "def text(data, b64):\n"
    "    if data is None:\n"
    "        return None\n"
    "    return base64.b64encode(data).decode('ascii') if b64 else data.decode('utf-8')\n"
    "def expect(records, start_offset, b64, size, max_bytes, nonempty):\n"
    "    if records is None:\n"
    "        return None\n"
    "    stopped, objects, next_offset = max_bytes < 0, [], -1\n"
    "    for offset, timestamp, key, value, headers in records:\n"
    "        if stopped or offset < start_offset:\n"
    "            continue\n"
    "        try:\n"
    "            obj = {'offset': offset, 'key': text(key, b64), 'value': text(value, b64),\n"
    "                   'headers': [{'name': n.decode('utf-8'), 'value': text(v, b64)} for n, v in headers],\n"
    "                   'timestamp': timestamp}\n"
    "        except UnicodeDecodeError:\n"
    "            return None\n"
    "        record_size = 16 + len(key or b'') + len(value or b'')\n"
    "        record_size += sum(len(n.decode('utf-8')) + len(v or b'') for n, v in headers)\n"
    "        if nonempty and size + record_size > max_bytes:\n"
    "            stopped = True\n"
    "            continue\n"
    "        if offset + 1 > 2**63 - 1:\n"
    "            return None\n"
    "        nonempty, size, next_offset = True, size + record_size, offset + 1\n"
    "        objects.append(obj)\n"
    "    return objects, next_offset, size, nonempty, stopped\n"
    "def verify(out, prefix, records, start_offset, b64, size, max_bytes, nonempty, result, stop_pos):\n"
    "    expected = expect(records, start_offset, b64, size, max_bytes, nonempty)\n"
    "    assert (result is None) == (expected is None), (result, expected)\n"
    "    if result is None:\n"
    "        return\n"
    "    objects, *progress = expected\n"
    "    if stop_pos >= 0:\n"
    "        progress.append(stop_pos)\n"
    "    assert tuple(result) == (len(objects), *progress), (result, len(objects), progress)\n"
    "    assert bytes(out[:prefix]) == b'#' * prefix\n"
    "    answer = bytes(out[prefix:]).decode('utf-8')\n"
    "    if nonempty and objects:\n"
    "        assert answer.startswith(','), answer\n"
    "        answer = answer[1:]\n"
    "    assert json.loads('[' + answer + ']') == objects, (answer, objects)\n";

static PyObject *verify;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    fuzz_python_init();
    PyObject *globals = PyDict_New();
    PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
    PyObject *done = PyRun_String(ORACLE, Py_file_input, globals, globals);
    FUZZ_ASSERT(done != NULL, "the oracle does not load");
    Py_DECREF(done);
    verify = PyDict_GetItemString(globals, "verify");
    Py_INCREF(verify);
    Py_DECREF(globals);
    return 0;
}

static PyObject *bytes_or_none(const uint8_t *s, Py_ssize_t n) {
    return n < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)s, n);
}

/* Append the records of one batch to `records` as (offset, timestamp, key, value, [(name, value)]);
   -1 if they do not read as read_record reads them (or bytes follow the last). */
static int read_batch(PyObject *records, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count,
                      const FxBatchInfo *info) {
    int64_t previous = -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        FxFields f;
        if (fx_read_record(buf, &pos, end, info, &previous, &f) < 0)
            return -1;
        PyObject *headers = PyList_New(0);
        Py_ssize_t at = f.headers_at;
        for (Py_ssize_t h = 0; h < f.headers; h++) {
            const uint8_t *name, *value;
            Py_ssize_t name_len, value_len;
            FUZZ_ASSERT(fx_record_header(buf, &at, f.end, &name, &name_len, &value, &value_len) == 0, "header");
            PyObject *pair = Py_BuildValue("(NN)", bytes_or_none(name, name_len), bytes_or_none(value, value_len));
            PyList_Append(headers, pair);
            Py_DECREF(pair);
        }
        PyObject *record = Py_BuildValue("(LLNNN)", (long long)f.offset, (long long)f.timestamp,
                                         bytes_or_none(f.key, f.key_len), bytes_or_none(f.value, f.value_len),
                                         headers);
        FUZZ_ASSERT(record != NULL, "record tuple");
        PyList_Append(records, record);
        Py_DECREF(record);
    }
    return pos == end ? 0 : -1;
}

/* Run mode's walk: the records of the chunk's batches up to the first compressed one (its position in
   *stop_pos), by read_header's rules; -1 where render_run declines. */
static int read_run(PyObject *records, const uint8_t *buf, Py_ssize_t end, int64_t offset_base,
                    Py_ssize_t *stop_pos) {
    Py_ssize_t pos = 0;
    for (; pos < end; ) {
        const uint8_t *h = buf + pos;
        Py_ssize_t remaining = end - pos;
        if (remaining < BATCH_HEADER_SIZE || h[16] != 2)
            return -1;
        Batch b;
        fuzz_batch(h, (size_t)remaining, &b);
        Py_ssize_t size = 12 + (Py_ssize_t)b.batch_length;
        if (size < BATCH_HEADER_SIZE || size > remaining)
            return -1;
        if (crc32c_update(0, h + 21, (size_t)(size - 21)) != (uint32_t)be(h + 17, 4))
            return -1;
        if (b.attributes & 0x07)
            break;
        if ((b.attributes & 0x20) || b.count < 0 || (int64_t)b.count * 7 > size - BATCH_HEADER_SIZE ||
            b.last_delta < 0 || (b.count && b.last_delta < b.count - 1))
            return -1;
        int64_t first;
        if (__builtin_add_overflow(offset_base, b.base_offset, &first) || first < 0)
            return -1;
        FxBatchInfo info = {.first_offset = first,
                            .base_timestamp = b.base_timestamp,
                            .append_time = b.max_timestamp,
                            .last_delta = b.last_delta,
                            .log_append_time = (b.attributes & LOG_APPEND_TIME) != 0};
        if (read_batch(records, h, BATCH_HEADER_SIZE, size, b.count, &info) < 0)
            return -1;
        pos += size;
    }
    *stop_pos = pos;
    return 0;
}

/* Set each batch's CRC-32C where its length leaves it inside the chunk. */
static void fix_crcs(uint8_t *buf, Py_ssize_t end) {
    Py_ssize_t pos = 0;
    while (end - pos >= BATCH_HEADER_SIZE) {
        Py_ssize_t size = 12 + (Py_ssize_t)(int32_t)be(buf + pos + 8, 4);
        if (size < BATCH_HEADER_SIZE || size > end - pos)
            return;
        put_be(buf + pos + 17, crc32c_update(0, buf + pos + 21, (size_t)(size - 21)), 4);
        pos += size;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Knobs k;
    if (fuzz_knobs(&data, &size, &k) < 0)
        return 0;
    int base64 = k.flags & 1, nonempty = (k.flags >> 1) & 1, run = (k.flags >> 2) & 1;
    Py_ssize_t answered = nonempty ? 100 * (k.flags >> 5) : 0, prefix = k.flags & 16 ? 4093 : 0;
    PyObject *out = fuzz_bytearray(prefix, k.flags & 16);
    PyObject *records = PyList_New(0);
    PyObject *result;
    Py_ssize_t stop_pos = -1;
    int readable;
    if (run) {
        /* A copy: libFuzzer's input is read-only, and its exact size keeps the bounds AddressSanitizer
           checks. */
        uint8_t *chunk = malloc(size ? size : 1);
        memcpy(chunk, data, size);
        if (k.flags & 8)
            fix_crcs(chunk, (Py_ssize_t)size);
        int64_t offset_base = k.a & INT64_MAX;
        readable = read_run(records, chunk, (Py_ssize_t)size, offset_base, &stop_pos) == 0;
        PyObject *view = PyMemoryView_FromMemory((char *)chunk, (Py_ssize_t)size, PyBUF_READ);
        PyObject *args = Py_BuildValue("(OOnLLOnLO)", out, view, (Py_ssize_t)0, (long long)offset_base,
                                       (long long)k.b, base64 ? Py_True : Py_False, answered,
                                       (long long)k.c, nonempty ? Py_True : Py_False);
        result = fx_render_run(args);
        FUZZ_ASSERT(result != NULL, "render_run raised");
        Py_DECREF(args);
        Py_DECREF(view);
        free(chunk);
    } else {
        Batch b;
        if (fuzz_batch(data, size, &b) < 0 || b.count < 0) {
            Py_DECREF(out);
            Py_DECREF(records);
            return 0;
        }
        FxBatchInfo info = {.first_offset = (int64_t)((uint64_t)k.a + (uint64_t)b.base_offset),
                            .base_timestamp = b.base_timestamp,
                            .append_time = b.max_timestamp,
                            .last_delta = b.last_delta,
                            .log_append_time = (b.attributes & LOG_APPEND_TIME) != 0};
        readable = read_batch(records, b.buf, b.start, b.end, b.count, &info) == 0;
        FxProgress p = {.size = answered, .max_bytes = (Py_ssize_t)k.c, .nonempty = nonempty};
        int rc = fx_render(out, b.buf, b.start, b.end, b.count, &info, k.b, base64, &p);
        FUZZ_ASSERT(rc == 0 || rc == -2, "render rc %d", rc);
        result = rc ? Py_NewRef(Py_None)
                    : Py_BuildValue("(nLnNN)", p.rendered, (long long)p.next_offset, p.size,
                                    PyBool_FromLong(p.nonempty), PyBool_FromLong(p.stopped));
    }
    PyObject *checked = PyObject_CallFunction(verify, "OnOLOnLOOn", out, prefix, readable ? records : Py_None,
                                              (long long)k.b, base64 ? Py_True : Py_False, answered,
                                              (long long)k.c, nonempty ? Py_True : Py_False, result, stop_pos);
    FUZZ_ASSERT(checked != NULL, "the rendering is not the oracle's");
    Py_DECREF(checked);
    Py_DECREF(result);
    Py_DECREF(records);
    Py_DECREF(out);
    return 0;
}
