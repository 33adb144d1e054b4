/* storage/_bigendian.h: Kafka's fixed-width integers (big-endian) read and written by the C loops.

Readers: storage/_recordread.h (a batch header's fields), broker/_produce.c (a request's int16 and int32
fields). Writers: agents/_encode.c (a batch header), agents/_layout.c (a batch's relative baseOffset).
*/
#ifndef STRATA_BIGENDIAN_H
#define STRATA_BIGENDIAN_H

#include <stdint.h>

/* The n-byte big-endian integer at p, unsigned (callers cast to the field's signed width). */
static inline uint64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* v's low n bytes written big-endian at p. */
static inline void put_be(uint8_t *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)(v & 0xFF);
        v >>= 8;
    }
}

#endif
