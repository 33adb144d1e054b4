/* storage/_crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) for the C loops, as the crc32c
package computes it for Python code: crc32c_update(crc32c_update(0, a), b) == crc32c(a + b).

On x86-64 with SSE 4.2 the CRC32 instruction does eight bytes at a time (chosen once, at first use);
elsewhere a byte-at-a-time table. Callers: agents/_encode.c, which writes whole record batches (their CRC
covers attributes to the end).
*/
#ifndef STRATA_CRC32C_H
#define STRATA_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t crc32c_table[256];
static int crc32c_ready; /* 0 not chosen, 1 table, 2 SSE 4.2 */

static uint32_t crc32c_soft(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n--)
        crc = crc32c_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc32c_hard(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = ~crc & 0xFFFFFFFFu;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#define CRC32C_HAVE_HARD 1
#endif

static void crc32c_choose(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[i] = c;
    }
    crc32c_ready = 1;
#ifdef CRC32C_HAVE_HARD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        crc32c_ready = 2;
#endif
}

/* The CRC-32C of p[0..n) continuing from ``crc`` (0 to start). */
static uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n) {
    if (!crc32c_ready)
        crc32c_choose();
#ifdef CRC32C_HAVE_HARD
    if (crc32c_ready == 2)
        return crc32c_hard(crc, p, n);
#endif
    return crc32c_soft(crc, p, n);
}

#endif
