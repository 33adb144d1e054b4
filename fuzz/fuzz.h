/* fuzz/fuzz.h: what the libFuzzer harnesses of fuzz/ share: the layout of an input, reading a batch
header, an embedded Python for the cores that append to bytearrays, and the invariant check.

An input of the record targets (fuzz_recordcheck, fuzz_keyscan, fuzz_recordcols, fuzz_recordjson) is

    knobs    25 bytes   flags (uint8), then a, b, c (int64, big-endian): each harness says what they mean
    payload  the rest   one RecordBatch v2, uncompressed (fuzz_recordjson's run mode: a chunk of batches)

The payload's 61-byte header is read as storage/records/codec.py lays it out, without read_header's
checks (its CRC, batchLength, magic and counts are what the fuzzer may break): the core is given what a
caller would pass for that header (recordsCount, lastOffsetDelta, baseTimestamp, maxTimestamp, the
LogAppendTime bit of attributes), and the records section is the payload from byte 61 to its end. Only
what the extension's Python wrapper itself refuses (a negative count) is skipped. fuzz/inputs.py reads
the same layout for the seed corpus and the regression test.
*/
#ifndef STRATA_FUZZ_H
#define STRATA_FUZZ_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../storage/_bigendian.h"

#define KNOBS_SIZE 25
#define BATCH_HEADER_SIZE 61

typedef struct {
    uint8_t flags;
    int64_t a, b, c;
} Knobs;

typedef struct {
    const uint8_t *buf; /* the batch: its header at 0, its records from 61 to end */
    Py_ssize_t start, end;
    int64_t base_offset, base_timestamp, max_timestamp;
    int32_t batch_length, last_delta, count;
    uint16_t attributes;
} Batch;

/* The knobs at the input's start; the payload follows. -1 if the input is shorter. */
static inline int fuzz_knobs(const uint8_t **data, size_t *size, Knobs *k) {
    if (*size < KNOBS_SIZE)
        return -1;
    k->flags = (*data)[0];
    k->a = (int64_t)be(*data + 1, 8);
    k->b = (int64_t)be(*data + 9, 8);
    k->c = (int64_t)be(*data + 17, 8);
    *data += KNOBS_SIZE;
    *size -= KNOBS_SIZE;
    return 0;
}

/* The header fields of the batch at buf[0..size); -1 if it is shorter than a header. */
static inline int fuzz_batch(const uint8_t *buf, size_t size, Batch *b) {
    if (size < BATCH_HEADER_SIZE)
        return -1;
    b->buf = buf;
    b->start = BATCH_HEADER_SIZE;
    b->end = (Py_ssize_t)size;
    b->base_offset = (int64_t)be(buf, 8);
    b->batch_length = (int32_t)be(buf + 8, 4);
    b->attributes = (uint16_t)be(buf + 21, 2);
    b->last_delta = (int32_t)be(buf + 23, 4);
    b->base_timestamp = (int64_t)be(buf + 27, 8);
    b->max_timestamp = (int64_t)be(buf + 35, 8);
    b->count = (int32_t)be(buf + 57, 4);
    return 0;
}

#define LOG_APPEND_TIME 0x08

/* A wrong answer is a finding: report it and abort, which libFuzzer records as a crash. */
#define FUZZ_ASSERT(cond, ...)                                                                               \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "\n== invariant broken at %s:%d: %s\n== ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fprintf(stderr, "\n");                                                                           \
            if (PyErr_Occurred())                                                                            \
                PyErr_Print();                                                                               \
            abort();                                                                                         \
        }                                                                                                    \
    } while (0)

/* An interpreter for the cores that append to bytearrays (storage/_growbuf.h) or take Python objects.
   Its allocator is plain malloc, so that AddressSanitizer sees every bytearray's bounds (pymalloc would
   hide an overflow inside its arenas). Isolated: no site-packages, no environment; only the standard
   library (json, base64 for fuzz_recordjson's oracle). The harness keeps the GIL throughout. */
static inline void fuzz_python_init(void) {
    PyPreConfig pre;
    PyPreConfig_InitIsolatedConfig(&pre);
    pre.allocator = PYMEM_ALLOCATOR_MALLOC;
    PyStatus status = Py_PreInitialize(&pre);
    if (PyStatus_Exception(status))
        Py_ExitStatusException(status);
    PyConfig config;
    PyConfig_InitIsolatedConfig(&config);
    config.site_import = 0;
    config.install_signal_handlers = 0; /* libFuzzer's handlers stay */
#ifdef FUZZ_PYTHON_HOME
    status = PyConfig_SetBytesString(&config, &config.home, FUZZ_PYTHON_HOME);
    if (PyStatus_Exception(status))
        Py_ExitStatusException(status);
#endif
    status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status))
        Py_ExitStatusException(status);
}

/* A bytearray holding `prefix` bytes of earlier output, and, when `shifted`, some bytes deleted from its
   front (CPython then keeps them allocated before ob_start: storage/_growbuf.h's capacity() counts
   them). What a caller's column or answer buffer looks like midway. */
static inline PyObject *fuzz_bytearray(Py_ssize_t prefix, int shifted) {
    PyObject *array = PyByteArray_FromStringAndSize(NULL, prefix + (shifted ? 5 : 0));
    if (array == NULL)
        return NULL;
    memset(PyByteArray_AS_STRING(array), '#', (size_t)PyByteArray_GET_SIZE(array));
    if (shifted && PySequence_DelSlice(array, 0, 5) < 0) {
        Py_DECREF(array);
        return NULL;
    }
    return array;
}

#endif
