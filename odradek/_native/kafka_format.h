/*
 * The v2 record batch format (design §3) as odradek's C modules read and write it: header field
 * positions, big-endian integers and zigzag varints. One definition for the append path's checks
 * (odradek/record/_record_scan.c) and the cleaner's offset map (odradek/cleaner/_offset_map.c).
 * Every reader is bounded by a limit the caller passes, or reads fixed header fields the caller
 * has checked are there.
 */
#ifndef ODRADEK_KAFKA_FORMAT_H
#define ODRADEK_KAFKA_FORMAT_H

#include <Python.h>
#include <stdint.h>

/* Field positions from a batch's first byte. */
#define BATCH_LENGTH_AT 8
#define MAGIC_AT 16
#define CRC_AT 17
#define ATTRIBUTES_AT 21 /* the CRC covers the attributes to the end of the batch */
#define LAST_OFFSET_DELTA_AT 23
#define BASE_TIMESTAMP_AT 27
#define MAX_TIMESTAMP_AT 35
#define PRODUCER_ID_AT 43
#define BASE_SEQUENCE_AT 53
#define RECORDS_COUNT_AT 57
#define HEADER_SIZE 61
#define LOG_OVERHEAD 12 /* baseOffset and batchLength: the bytes batchLength does not count */
#define CODEC_MASK 0x07

static inline int64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline uint32_t be32u(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline int32_t be32(const uint8_t *p) { return (int32_t)be32u(p); }

static inline int16_t be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }

static inline void put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* Read a zigzag varint of at most `bits` (32 or 64) bits at *pos, not reading at or past
 * `limit`. Returns 0 and advances *pos on success, -1 on a malformed or truncated varint. */
static inline int read_varint(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t limit, int bits,
                              int64_t *value)
{
    uint64_t code = 0;
    int max_bytes = (bits + 6) / 7;
    Py_ssize_t at = *pos;
    for (int i = 0; i < max_bytes; i++, at++) {
        if (at >= limit)
            return -1;
        uint8_t byte = data[at];
        uint64_t part = (uint64_t)(byte & 0x7F);
        int shift = 7 * i;
        if (shift == 63 && part > 1)
            return -1; /* a value of more than 64 bits */
        code |= part << shift;
        if (byte < 0x80) {
            if (bits < 64 && (code >> bits) != 0)
                return -1;
            *value = (int64_t)(code >> 1) ^ -(int64_t)(code & 1);
            *pos = at + 1;
            return 0;
        }
    }
    return -1;
}

#endif
