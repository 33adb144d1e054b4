/* fuzz/core_recordcheck.c: storage/_recordcheck.c's check() for the harnesses (fuzz/cores.h). */
#include "../storage/_recordcheck.c"
#include "cores.h"

int fx_check(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int64_t count, int64_t last_delta,
             int64_t base_timestamp, int64_t max_timestamp, int compacted, int64_t *index, int64_t *smallest,
             int64_t *largest) {
    return check(buf, start, end, count, last_delta, base_timestamp, max_timestamp, compacted, index, smallest,
                 largest);
}
