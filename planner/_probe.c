/* planner._probe: the offset map's batch put and get in C (the map itself is planner/offset_map.py).

Why native code: the map is probed once per keyed record in each compaction pass. Probing in numpy, one
probe step for all pending items at a time, still cost a large share of a compaction (py-spy,
docs/benchmarks.md): every step is a dozen array operations, and the last items of each batch were
probed one by one in Python. No library offers an open-addressing table over a caller's buffer with
Kafka's SkimpyOffsetMap semantics, so these two loops are written here, over the map's own numpy table.

The table layout, the probe sequence and the put rules are the ones documented at the top of
planner/offset_map.py: S slots of three native u64 words (h1, h2, offset + 1; word 2 == 0 means empty);
probe k of a hash is (h1 + k * (1 + h2 mod (S - 1))) mod S. A put overwrites the slot already holding
its hash, else claims the first empty slot of its sequence unless the map holds `capacity` entries,
where the batch stops: the caller gets how many leading items were stored (Kafka's partial cleaning).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The slot holding (h1, h2), or else the first empty slot of its probe sequence; *found says which.
   Terminates: the map never holds more than capacity < S entries and S is prime (every step is coprime
   to S, so the sequence visits every slot and reaches an empty one). */
static inline uint64_t *find(uint64_t *table, uint64_t slots, uint64_t h1, uint64_t h2, int *found) {
    uint64_t pos = h1 % slots;
    uint64_t step = 1 + h2 % (slots - 1);
    for (;;) {
        uint64_t *slot = table + 3 * pos;
        if (slot[2] == 0) {
            *found = 0;
            return slot;
        }
        if (slot[0] == h1 && slot[1] == h2) {
            *found = 1;
            return slot;
        }
        pos += step;
        if (pos >= slots)
            pos -= slots;
    }
}

/* Checks shared by both calls: the table is S * 3 words and every column holds n items. */
static int check(Py_buffer *table, unsigned long long slots, Py_buffer **columns, int ncolumns, Py_ssize_t *n,
                 int writable) {
    if (slots < 3 || (unsigned long long)table->len != slots * 3 * sizeof(uint64_t)) {
        PyErr_SetString(PyExc_ValueError, "the table must hold slots * 3 u64 words, slots >= 3");
        return -1;
    }
    if (writable && table->readonly) {
        PyErr_SetString(PyExc_ValueError, "the table must be writable");
        return -1;
    }
    *n = columns[0]->len / 8;
    for (int c = 0; c < ncolumns; c++) {
        if (columns[c]->len % 8 || columns[c]->len / 8 != *n) {
            PyErr_SetString(PyExc_ValueError, "every column must hold the same number of 8-byte items");
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(put_many_doc,
"put_many(table, slots, capacity, size, h1, h2, offsets)\n--\n\n"
"Put (h1[i], h2[i]) -> offsets[i] in order into ``table`` (writable, slots * 3 u64 words) holding\n"
"``size`` entries; stop before the first new hash once ``size`` reaches ``capacity``. The columns are\n"
"buffers of native u64 (hashes) and int64 (offsets >= 0). Returns (items stored, the new size).");

static PyObject *put_many(PyObject *self, PyObject *args) {
    Py_buffer table, h1, h2, offsets;
    unsigned long long slots, capacity, size;
    if (!PyArg_ParseTuple(args, "w*KKKy*y*y*", &table, &slots, &capacity, &size, &h1, &h2, &offsets))
        return NULL;
    PyObject *result = NULL;
    Py_buffer *columns[3] = {&h1, &h2, &offsets};
    Py_ssize_t n;
    if (check(&table, slots, columns, 3, &n, 1) < 0)
        goto done;
    if (capacity >= slots) {
        PyErr_SetString(PyExc_ValueError, "capacity must be below slots (a probe must find an empty slot)");
        goto done;
    }
    uint64_t *words = (uint64_t *)table.buf;
    const uint64_t *a = (const uint64_t *)h1.buf, *b = (const uint64_t *)h2.buf;
    const int64_t *off = (const int64_t *)offsets.buf;
    Py_ssize_t i;
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < n; i++) {
        int found;
        uint64_t *slot = find(words, slots, a[i], b[i], &found);
        if (!found) {
            if (size >= capacity)
                break;
            slot[0] = a[i];
            slot[1] = b[i];
            size++;
        }
        slot[2] = (uint64_t)off[i] + 1;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("nK", i, size);
done:
    PyBuffer_Release(&table);
    PyBuffer_Release(&h1);
    PyBuffer_Release(&h2);
    PyBuffer_Release(&offsets);
    return result;
}

PyDoc_STRVAR(get_many_doc,
"get_many(table, slots, h1, h2)\n--\n\n"
"The offset stored for each (h1[i], h2[i]), or -1 where the hash is absent: native int64 as bytes.");

static PyObject *get_many(PyObject *self, PyObject *args) {
    Py_buffer table, h1, h2;
    unsigned long long slots;
    if (!PyArg_ParseTuple(args, "y*Ky*y*", &table, &slots, &h1, &h2))
        return NULL;
    PyObject *result = NULL;
    Py_buffer *columns[2] = {&h1, &h2};
    Py_ssize_t n;
    if (check(&table, slots, columns, 2, &n, 0) < 0)
        goto done;
    result = PyBytes_FromStringAndSize(NULL, n * 8);
    if (result == NULL)
        goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
    uint64_t *words = (uint64_t *)table.buf;
    const uint64_t *a = (const uint64_t *)h1.buf, *b = (const uint64_t *)h2.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int found;
        uint64_t *slot = find(words, slots, a[i], b[i], &found);
        /* A miss ends on an empty slot, whose word 2 is 0: stored - 1 is then the -1 of "absent". */
        out[i] = (int64_t)slot[2] - 1;
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&table);
    PyBuffer_Release(&h1);
    PyBuffer_Release(&h2);
    return result;
}

static PyMethodDef methods[] = {
    {"put_many", put_many, METH_VARARGS, put_many_doc},
    {"get_many", get_many, METH_VARARGS, get_many_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "planner._probe",
    .m_doc = "The offset map's batch put and get in C (documented in planner/_probe.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__probe(void) { return PyModule_Create(&module); }
