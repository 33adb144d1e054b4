/* fuzz/core_recordcheck.c: storage/_recordcheck.c's check() and scan_refs() for the harnesses
   (fuzz/cores.h). */
#include "../storage/_recordcheck.c"
#include "cores.h"

int fx_check(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int64_t count, int64_t last_delta,
             int64_t base_timestamp, int64_t max_timestamp, int compacted, int64_t *index, int64_t *smallest,
             int64_t *largest) {
    return check(buf, start, end, count, last_delta, base_timestamp, max_timestamp, compacted, index, smallest,
                 largest);
}

PyObject *fx_schema_refs(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int64_t count, int64_t last_delta,
                         int key, int indexes, int each) {
    const char *header = key ? "__key_schema_id" : "__value_schema_id";
    return scan_refs(buf, start, end, count, last_delta, key, header, (Py_ssize_t)strlen(header), indexes, each);
}
