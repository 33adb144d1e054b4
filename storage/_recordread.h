/* storage/_recordread.h: reading RecordBatch v2 records in C, by the reference decoder's rules, as a yes/no.

Shared by the C loops that read stored records without building Python objects (api/_recordjson.c for
HTTP fetch answers, storage/_recordcols.c for Spark's columns). The record layout is the one documented
at the top of storage/records/codec.py; every check here is one of _decode_batch's there (lengths, varint
widths, offset deltas in order and within lastOffsetDelta, null lengths -1, header names UTF-8, the record
ending exactly at its length). These loops never report why a batch fails: their callers then answer
through the reference decoder, which raises the precise error.
*/
#ifndef STRATA_RECORDREAD_H
#define STRATA_RECORDREAD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_bigendian.h"

typedef struct {
    const uint8_t *buf;
    Py_ssize_t pos, end;
} Reader;

/* A varint of at most max_bits bits (storage/records/codec.py's _varint_tail), unsigned; 0 on success. */
static int varint(Reader *r, Py_ssize_t limit, int max_bits, uint64_t *out) {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
        if (r->pos >= limit || shift >= max_bits)
            return -1;
        uint64_t b = r->buf[r->pos++];
        if (shift == 63 && b > 1)
            return -1;
        value |= (b & 0x7F) << shift;
        if (b < 0x80)
            break;
    }
    if (max_bits < 64 && (value >> max_bits))
        return -1;
    *out = value;
    return 0;
}

static inline int64_t zigzag(uint64_t n) { return (int64_t)((n >> 1) ^ (~(n & 1) + 1)); }

/* Eight bytes at once (SWAR): the ASCII test below reads a word where one byte at a time was the cost of
   rendering text values (most of an HTTP fetch's CPU; docs/benchmarks.md). */
#define BYTES_01 0x0101010101010101ULL
#define BYTES_80 0x8080808080808080ULL

static inline uint64_t load8(const uint8_t *s) {
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

/* The length of the UTF-8 sequence at s[0] (a byte >= 0x80) within s[0..avail), exactly as Python's
   strict decoder accepts it (no overlongs, no surrogates, nothing past U+10FFFF): 2 to 4, or -1. */
static inline int utf8_sequence(const uint8_t *s, Py_ssize_t avail) {
    uint8_t c = s[0];
    int extra;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        extra = 1;
    else if (c == 0xE0) {
        extra = 2;
        lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
        extra = 2;
    else if (c == 0xED) {
        extra = 2;
        hi = 0x9F; /* no surrogates */
    } else if (c == 0xF0) {
        extra = 3;
        lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3)
        extra = 3;
    else if (c == 0xF4) {
        extra = 3;
        hi = 0x8F; /* nothing past U+10FFFF */
    } else
        return -1;
    if (extra >= avail) /* the last continuation byte is s[extra] */
        return -1;
    if (s[1] < lo || s[1] > hi)
        return -1;
    for (int k = 2; k <= extra; k++)
        if ((s[k] & 0xC0) != 0x80)
            return -1;
    return extra + 1;
}

/* Whether s[0..n) is UTF-8 exactly as Python's strict decoder accepts it; counts its characters. */
static int utf8(const uint8_t *s, Py_ssize_t n, Py_ssize_t *chars) {
    Py_ssize_t i = 0, count = 0;
    while (i < n) {
        if (i + 8 <= n && !(load8(s + i) & BYTES_80)) { /* eight ASCII characters */
            i += 8;
            count += 8;
            continue;
        }
        count++;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int length = utf8_sequence(s + i, n - i);
        if (length < 0)
            return -1;
        i += length;
    }
    *chars = count;
    return 0;
}

/* What every record of one batch shares. */
typedef struct {
    int64_t first_offset, base_timestamp, append_time, last_delta;
    int log_append_time;
} BatchInfo;

/* Field positions of one record; lengths are -1 for null. */
typedef struct {
    int64_t offset, timestamp;
    const uint8_t *key, *value;
    Py_ssize_t key_len, value_len, headers_at, headers, end;
} Fields;

static int read_record(Reader *r, const BatchInfo *b, int64_t *previous, Fields *f) {
    uint64_t n;
    if (r->pos >= r->end || varint(r, r->end, 32, &n) < 0)
        return -1;
    Py_ssize_t record_end = r->pos + zigzag(n);
    if (record_end > r->end || record_end - r->pos < 6)
        return -1;
    r->pos += 1; /* attributes */
    if (varint(r, record_end, 64, &n) < 0)
        return -1;
    int64_t timestamp_delta = zigzag(n);
    if (varint(r, record_end, 32, &n) < 0)
        return -1;
    int64_t offset_delta = zigzag(n);
    if (offset_delta <= *previous || offset_delta > b->last_delta)
        return -1;
    *previous = offset_delta;
    if (__builtin_add_overflow(b->first_offset, offset_delta, &f->offset))
        return -1;
    if (b->log_append_time)
        f->timestamp = b->append_time;
    else if (__builtin_add_overflow(b->base_timestamp, timestamp_delta, &f->timestamp))
        return -1;
    for (int field = 0; field < 2; field++) {
        if (varint(r, record_end, 32, &n) < 0)
            return -1;
        int64_t length = zigzag(n);
        if (length < -1 || r->pos + (length > 0 ? length : 0) > record_end)
            return -1;
        const uint8_t *at = r->buf + r->pos;
        if (length > 0)
            r->pos += length;
        if (field == 0) {
            f->key = at;
            f->key_len = length;
        } else {
            f->value = at;
            f->value_len = length;
        }
    }
    if (varint(r, record_end, 32, &n) < 0)
        return -1;
    int64_t headers = zigzag(n);
    if (headers < 0 || headers * 2 > record_end - r->pos)
        return -1;
    f->headers = headers;
    f->headers_at = r->pos;
    /* Check the headers now (names UTF-8, lengths in the record); they are written from headers_at. */
    for (int64_t h = 0; h < headers; h++) {
        if (varint(r, record_end, 32, &n) < 0)
            return -1;
        int64_t length = zigzag(n);
        Py_ssize_t chars;
        if (length < 0 || r->pos + length > record_end || utf8(r->buf + r->pos, length, &chars) < 0)
            return -1;
        r->pos += length;
        if (varint(r, record_end, 32, &n) < 0)
            return -1;
        length = zigzag(n);
        if (length < -1 || r->pos + (length > 0 ? length : 0) > record_end)
            return -1;
        if (length > 0)
            r->pos += length;
    }
    if (r->pos != record_end)
        return -1;
    f->end = record_end;
    return 0;
}

#endif
