/*
 * SipHash-1-3 with a 128-bit output (Aumasson and Bernstein's SipHash, one compression and
 * three finalization rounds, the variant CPython hashes bytes with), keyed by the caller.
 *
 * The offset map hashes keys with it under a secret of its own, drawn from os.urandom when the
 * map is made: unlike Python's hash(), whose secret is the process's and is zero under
 * PYTHONHASHSEED=0, nobody who writes keys to a topic can know it, so nobody can craft keys
 * that share a slot and a probe sequence and slow the cleaner down, or share a hash and make
 * the cleaner drop one for the other. Tested against a reference written from the paper, whose
 * 64-bit output is checked against CPython's own hash() under PYTHONHASHSEED=0
 * (tests/test_offset_map_hashing.py).
 */
#ifndef ODRADEK_SIPHASH_H
#define ODRADEK_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define SIPHASH_KEY_BYTES 16

static inline uint64_t siphash_le64(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

#define SIPHASH_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPHASH_ROUND(v0, v1, v2, v3)                                                          \
    do {                                                                                       \
        v0 += v1;                                                                              \
        v1 = SIPHASH_ROTL(v1, 13);                                                             \
        v1 ^= v0;                                                                              \
        v0 = SIPHASH_ROTL(v0, 32);                                                             \
        v2 += v3;                                                                              \
        v3 = SIPHASH_ROTL(v3, 16);                                                             \
        v3 ^= v2;                                                                              \
        v0 += v3;                                                                              \
        v3 = SIPHASH_ROTL(v3, 21);                                                             \
        v3 ^= v0;                                                                              \
        v2 += v1;                                                                              \
        v1 = SIPHASH_ROTL(v1, 17);                                                             \
        v1 ^= v2;                                                                              \
        v2 = SIPHASH_ROTL(v2, 32);                                                             \
    } while (0)

/* SipHash-1-3-128 of data[0:length] under `key` (16 bytes): the two 64-bit halves of the
 * output, in the order the reference implementation writes them (little-endian). */
static inline void siphash13_128(const uint8_t key[SIPHASH_KEY_BYTES], const uint8_t *data,
                                 size_t length, uint64_t *first, uint64_t *second)
{
    uint64_t k0 = siphash_le64(key), k1 = siphash_le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1 ^ 0xee;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    const uint8_t *end = data + (length & ~(size_t)7);
    for (; data != end; data += 8) {
        uint64_t m = siphash_le64(data);
        v3 ^= m;
        SIPHASH_ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t last = (uint64_t)length << 56;
    switch (length & 7) {
    case 7: last |= (uint64_t)data[6] << 48; /* fall through */
    case 6: last |= (uint64_t)data[5] << 40; /* fall through */
    case 5: last |= (uint64_t)data[4] << 32; /* fall through */
    case 4: last |= (uint64_t)data[3] << 24; /* fall through */
    case 3: last |= (uint64_t)data[2] << 16; /* fall through */
    case 2: last |= (uint64_t)data[1] << 8;  /* fall through */
    case 1: last |= (uint64_t)data[0];       /* fall through */
    case 0: break;
    }
    v3 ^= last;
    SIPHASH_ROUND(v0, v1, v2, v3);
    v0 ^= last;
    v2 ^= 0xee;
    SIPHASH_ROUND(v0, v1, v2, v3);
    SIPHASH_ROUND(v0, v1, v2, v3);
    SIPHASH_ROUND(v0, v1, v2, v3);
    *first = v0 ^ v1 ^ v2 ^ v3;
    v1 ^= 0xdd;
    SIPHASH_ROUND(v0, v1, v2, v3);
    SIPHASH_ROUND(v0, v1, v2, v3);
    SIPHASH_ROUND(v0, v1, v2, v3);
    *second = v0 ^ v1 ^ v2 ^ v3;
}

#endif
