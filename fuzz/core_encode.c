/* fuzz/core_encode.c: agents/_encode.c's functions for the harnesses (fuzz/cores.h). */
#include "../agents/_encode.c"
#include "cores.h"

PyObject *fx_encode_records(PyObject *args) { return encode_records(NULL, args); }

PyObject *fx_assemble_batches(PyObject *parts) { return assemble_batches(NULL, parts); }

uint32_t fx_murmur2(const uint8_t *data, Py_ssize_t length) { return murmur2(data, length); }
