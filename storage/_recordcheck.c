/* storage._recordcheck: Kafka's per-record checks of a producer's batch (its LogValidator), in C.

Why native code: every record of every batch a producer sends is walked before it is stored (a record
that no reader can decode would make its partition unreadable), on the produce path of both doors. In
Python that walk costs several times what storing the batch does; this loop reads the fields in place,
builds no object, and releases the GIL while it runs, so a large decompressed batch checked in a worker
thread does not hold the event loop. It is a fast path, never the authority: the reference decoder
(storage/records/decode.py) applies the same rules, and tests/unit/test_record_check.py holds the two
to the same verdict on valid, mutated and random batches.

check_records(buffer, start, end, count, last_delta, base_timestamp, max_timestamp, compacted)
    walks the ``count`` records in buffer[start:end] (a batch's records section, decompressed if the batch
    is compressed; the layout is storage/records/codec.py's) with _recordread.h's read_record: lengths
    and varints inside the record and the batch, offset deltas strictly increasing from 0 and at most
    ``last_delta`` (with count = last_delta + 1, exactly 0..n-1), key and value lengths -1 or within the
    record, header names UTF-8 with their lengths, each record ending exactly at its length. Then:
    no bytes after the last record; the largest record timestamp equal to ``max_timestamp`` (a CreateTime
    batch's header says what its records say); and on a compacted topic (``compacted``) a key on every
    record. Returns (verdict, index, smallest, largest): verdict 0 for a valid batch, else one of the RC_*
    codes below, with the index of the record at fault (-1 when no one record is); and the smallest and
    largest record timestamps (what the topic's timestamp window is checked against).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_recordread.h"

/* Verdicts; storage/records/check.py names them. */
#define RC_OK 0
#define RC_MALFORMED 1        /* a record does not parse, or the records run past the batch */
#define RC_TRAILING 2         /* bytes after the last record */
#define RC_NO_KEY 3           /* a record without a key, on a compacted topic */
#define RC_MAX_TIMESTAMP 4    /* the header's maxTimestamp is not the largest record timestamp */

static int check(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int64_t count, int64_t last_delta,
                 int64_t base_timestamp, int64_t max_timestamp, int compacted, int64_t *index,
                 int64_t *smallest, int64_t *largest) {
    Reader r = {buf, start, end};
    BatchInfo b = {0, base_timestamp, 0, last_delta, 0};
    int64_t previous = -1;
    *smallest = INT64_MAX;
    *largest = INT64_MIN;
    Fields f;
    for (int64_t i = 0; i < count; i++) {
        *index = i;
        if (read_record(&r, &b, &previous, &f) < 0)
            return RC_MALFORMED;
        if (compacted && f.key_len < 0)
            return RC_NO_KEY;
        if (f.timestamp > *largest)
            *largest = f.timestamp;
        if (f.timestamp < *smallest)
            *smallest = f.timestamp;
        r.pos = f.end;
    }
    *index = -1;
    if (r.pos != end)
        return RC_TRAILING;
    if (count > 0 && *largest != max_timestamp)
        return RC_MAX_TIMESTAMP;
    return RC_OK;
}

static PyObject *check_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    long long count, last_delta, base_timestamp, max_timestamp;
    int compacted;
    if (!PyArg_ParseTuple(args, "y*nnLLLLp", &view, &start, &end, &count, &last_delta, &base_timestamp,
                          &max_timestamp, &compacted))
        return NULL;
    if (start < 0 || end < start || end > view.len || count < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "check_records: start, end or count out of range");
        return NULL;
    }
    int64_t index = -1, smallest = 0, largest = 0;
    int verdict;
    /* The buffer stays valid while it is held (view), whatever other threads do with its owner. */
    Py_BEGIN_ALLOW_THREADS
    verdict = check((const uint8_t *)view.buf, start, end, count, last_delta, base_timestamp, max_timestamp,
                    compacted, &index, &smallest, &largest);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(iLLL)", verdict, (long long)index, (long long)smallest, (long long)largest);
}

static PyMethodDef methods[] = {
    {"check_records", check_records, METH_VARARGS,
     "check_records(buffer, start, end, count, last_delta, base_ts, max_ts, compacted)"
     " -> (verdict, index, smallest_ts, largest_ts)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_recordcheck", NULL, -1, methods};

PyMODINIT_FUNC PyInit__recordcheck(void) { return PyModule_Create(&module); }
