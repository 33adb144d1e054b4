/* storage._recordcols: a batch's records decoded into column buffers in C, for Arrow (Spark's reader).

Why native code: Spark's executors decoded each record into a Python Record, then seven Python lists, then
Arrow arrays: the Record objects and the lists were nearly all of the decode's time (docs/benchmarks.md).
pyarrow builds arrays from buffers without any per-row object, and no library decodes RecordBatch v2 into such
buffers; this loop does, appending to caller-owned bytearrays that become the Arrow buffers as they are.

It is a fast path, never the authority: records are read by storage/_recordread.h (the reference
decoder's checks), and on anything but plainly valid bytes the call returns None, so the caller decodes
the batch through the reference (storage.records.decode_records), which raises the precise error.

Columns appended per record whose offset is in [start, stop) (native-endian):
    offsets      int64    offset
    timestamps   int64    timestamp in milliseconds (baseTimestamp + delta, or maxTimestamp: LogAppendTime)
    key_ends     int32    end of the key in key_data (Arrow binary offsets, without the leading 0)
    key_valid    uint8    1, or 0 for a null key
    key_data              the keys' bytes, back to back
    value_ends, value_valid, value_data: the same for values
Every record of the batch is checked, also those outside [start, stop).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_growbuf.h"
#include "_recordread.h"

enum { OFFSETS, TIMESTAMPS, KEY_ENDS, KEY_VALID, KEY_DATA, VALUE_ENDS, VALUE_VALID, VALUE_DATA, NCOLUMNS };

static int append(Out *out, const void *data, Py_ssize_t n) {
    if (grow(out, n) < 0)
        return -1;
    put(out, data, n);
    return 0;
}

/* One binary column's value: its bytes, its end offset (int32: Arrow's binary offsets) and validity. */
static int append_binary(Out *ends, Out *valid, Out *data, const uint8_t *at, Py_ssize_t length) {
    uint8_t is_valid = length >= 0;
    if (length > 0 && append(data, at, length) < 0)
        return -1;
    if (data->len > INT32_MAX)
        return -2; /* past Arrow's int32 offsets: the caller's reference path uses large arrays */
    int32_t end = (int32_t)data->len;
    if (append(ends, &end, sizeof end) < 0 || append(valid, &is_valid, 1) < 0)
        return -1;
    return 0;
}

/* 0 and the count appended, -1 out of memory, -2 not decodable here. */
static int decode(Reader *r, const BatchInfo *b, Py_ssize_t count, int64_t start, int64_t stop, Out *cols,
                  Py_ssize_t *appended) {
    int64_t previous = -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        Fields f;
        if (read_record(r, b, &previous, &f) < 0)
            return -2;
        r->pos = f.end;
        if (f.offset < start || f.offset >= stop)
            continue;
        int rc;
        if (append(&cols[OFFSETS], &f.offset, 8) < 0 || append(&cols[TIMESTAMPS], &f.timestamp, 8) < 0)
            return -1;
        if ((rc = append_binary(&cols[KEY_ENDS], &cols[KEY_VALID], &cols[KEY_DATA], f.key, f.key_len)) < 0)
            return rc;
        if ((rc = append_binary(&cols[VALUE_ENDS], &cols[VALUE_VALID], &cols[VALUE_DATA], f.value, f.value_len)) <
            0)
            return rc;
        (*appended)++;
    }
    return r->pos == r->end ? 0 : -2;
}

PyDoc_STRVAR(decode_columns_doc,
"decode_columns(columns, buf, pos, end, count, first_offset, base_timestamp, append_time, last_delta,\n"
"               start, stop)\n--\n\n"
"Append to ``columns`` (a tuple of eight bytearrays: offsets, timestamps, key_ends, key_valid, key_data,\n"
"value_ends, value_valid, value_data; layout in the module source) the records of one batch (``count``\n"
"records from ``pos`` to ``end`` of ``buf``, offsets ``first_offset`` + offsetDelta) whose offset is in\n"
"[start, stop). Returns how many, or None when the batch is not plainly valid (the columns are then\n"
"partly written: the caller starts again through the reference decoder).");

static PyObject *decode_columns(PyObject *self, PyObject *args) {
    PyObject *columns, *append_obj;
    Py_buffer view;
    Py_ssize_t pos, end, count;
    long long first_offset, base_timestamp, last_delta, start, stop;
    if (!PyArg_ParseTuple(args, "O!y*nnnLLOLLL", &PyTuple_Type, &columns, &view, &pos, &end, &count,
                          &first_offset, &base_timestamp, &append_obj, &last_delta, &start, &stop))
        return NULL;
    PyObject *result = NULL;
    Out cols[NCOLUMNS];
    int opened = 0;
    if (PyTuple_GET_SIZE(columns) != NCOLUMNS) {
        PyErr_SetString(PyExc_ValueError, "columns must be a tuple of eight bytearrays");
        goto done;
    }
    for (; opened < NCOLUMNS; opened++) {
        PyObject *array = PyTuple_GET_ITEM(columns, opened);
        if (!PyByteArray_Check(array)) {
            PyErr_SetString(PyExc_TypeError, "columns must be a tuple of eight bytearrays");
            goto done;
        }
        out_open(&cols[opened], array);
    }
    if (pos < 0 || end < pos || end > view.len || count < 0) {
        PyErr_SetString(PyExc_ValueError, "pos, end and count must lie within the buffer");
        goto done;
    }
    BatchInfo b = {.first_offset = first_offset, .base_timestamp = base_timestamp, .last_delta = last_delta};
    if (append_obj != Py_None) {
        b.log_append_time = 1;
        b.append_time = PyLong_AsLongLong(append_obj);
        if (b.append_time == -1 && PyErr_Occurred())
            goto done;
    }
    Reader r = {(const uint8_t *)view.buf, pos, end};
    Py_ssize_t appended = 0;
    int rc = decode(&r, &b, count, start, stop, cols, &appended);
    if (rc == -1) {
        PyErr_NoMemory();
        goto done;
    }
    result = rc == -2 ? Py_NewRef(Py_None) : PyLong_FromSsize_t(appended);
done:
    for (int c = 0; c < opened; c++) {
        if (out_close(&cols[c]) < 0)
            Py_CLEAR(result);
    }
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_columns", decode_columns, METH_VARARGS, decode_columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "storage._recordcols",
    .m_doc = "Records decoded into column buffers in C (documented in storage/_recordcols.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__recordcols(void) { return PyModule_Create(&module); }
