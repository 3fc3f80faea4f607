/*
 * CRC-32C (Castagnoli), the checksum of a v2 record batch (SPEC 3), for odradek's C modules.
 *
 * On x86-64 with SSE4.2 the `crc32` instruction does the work, three streams at a time: it
 * has a latency of three cycles and a throughput of one, so one stream would run at a third
 * of the speed (a 64 KB batch in ~8 us instead of ~3). The streams' CRCs are joined by
 * "shifting" one over the bytes of the next with tables, built once, of the operator that
 * appends that many zero bytes (the method of Mark Adler's crc32c.c). Elsewhere (arm64, or an
 * x86 CPU without SSE4.2) a portable slicing-by-8 table loop gives the same values, slower.
 *
 * crc32c_init() must run once before crc32c(); module init does it. Tested against the
 * `crc32c` package (tests/test_record_scan_native.py).
 */
#ifndef ODRADEK_CRC32C_H
#define ODRADEK_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CRC32C_POLY 0x82f63b78u /* reflected */
#define CRC32C_LONG 8192        /* bytes per stream in a long block of three */
#define CRC32C_SHORT 256        /* bytes per stream in a short block of three */

static uint32_t crc32c_table[8][256];       /* slicing-by-8, for the portable loop */
static uint32_t crc32c_long_shift[4][256];  /* appends CRC32C_LONG zero bytes to a CRC */
static uint32_t crc32c_short_shift[4][256]; /* appends CRC32C_SHORT zero bytes to a CRC */
static int crc32c_hardware;

/* A 32x32 matrix over GF(2) times a vector: the XOR of the rows where the vector has a 1. */
static uint32_t gf2_times(const uint32_t *matrix, uint32_t vector)
{
    uint32_t sum = 0;
    for (; vector; vector >>= 1, matrix++)
        if (vector & 1)
            sum ^= *matrix;
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *matrix)
{
    for (int row = 0; row < 32; row++)
        square[row] = gf2_times(matrix, matrix[row]);
}

/* The tables of the operator that appends `length` (a power of two) zero bytes to a CRC. */
static void crc32c_zeros_tables(uint32_t tables[4][256], size_t length)
{
    uint32_t even[32], odd[32];
    odd[0] = CRC32C_POLY; /* one zero bit */
    for (int row = 1; row < 32; row++)
        odd[row] = 1u << (row - 1);
    gf2_square(even, odd); /* two zero bits */
    gf2_square(odd, even); /* four */
    uint32_t *result = odd;
    for (;;) {
        gf2_square(even, odd); /* 1 byte, then 4, 16, ... */
        result = even;
        length >>= 1;
        if (length == 0)
            break;
        gf2_square(odd, even); /* 2 bytes, then 8, 32, ... */
        result = odd;
        length >>= 1;
        if (length == 0)
            break;
    }
    for (uint32_t byte = 0; byte < 256; byte++)
        for (int lane = 0; lane < 4; lane++)
            tables[lane][byte] = gf2_times(result, byte << (8 * lane));
}

static inline uint32_t crc32c_shift(uint32_t tables[4][256], uint32_t crc)
{
    return tables[0][crc & 0xff] ^ tables[1][(crc >> 8) & 0xff] ^ tables[2][(crc >> 16) & 0xff]
           ^ tables[3][crc >> 24];
}

/* The portable loop, on the raw (pre- and post-inverted) CRC register. */
static uint32_t crc32c_portable(uint32_t crc, const uint8_t *data, size_t length)
{
    for (; length >= 8; data += 8, length -= 8) {
        uint32_t low = crc ^ ((uint32_t)data[0] | (uint32_t)data[1] << 8
                              | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24);
        crc = crc32c_table[7][low & 0xff] ^ crc32c_table[6][(low >> 8) & 0xff]
              ^ crc32c_table[5][(low >> 16) & 0xff] ^ crc32c_table[4][low >> 24]
              ^ crc32c_table[3][data[4]] ^ crc32c_table[2][data[5]]
              ^ crc32c_table[1][data[6]] ^ crc32c_table[0][data[7]];
    }
    for (; length; data++, length--)
        crc = crc32c_table[0][(crc ^ *data) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define CRC32C_X86 1

/* Three streams of `block` bytes each from `data`, joined; on the raw CRC register. Each word
 * is also stored at the same place in `copy` unless it is NULL (the compiler makes the two
 * versions: `copy` is a constant in each caller). */
__attribute__((target("sse4.2"))) static inline uint64_t
crc32c_three_streams(uint64_t crc0, const uint8_t *data, uint8_t *copy, size_t block,
                     uint32_t shift[4][256])
{
    uint64_t crc1 = 0, crc2 = 0, word0, word1, word2;
    for (const uint8_t *end = data + block; data < end; data += 8) {
        memcpy(&word0, data, 8);
        memcpy(&word1, data + block, 8);
        memcpy(&word2, data + 2 * block, 8);
        crc0 = _mm_crc32_u64(crc0, word0);
        crc1 = _mm_crc32_u64(crc1, word1);
        crc2 = _mm_crc32_u64(crc2, word2);
        if (copy != NULL) {
            memcpy(copy, &word0, 8);
            memcpy(copy + block, &word1, 8);
            memcpy(copy + 2 * block, &word2, 8);
            copy += 8;
        }
    }
    crc0 = crc32c_shift(shift, (uint32_t)crc0) ^ crc1;
    return crc32c_shift(shift, (uint32_t)crc0) ^ crc2;
}

/* The raw CRC register over data[0:length], copying the bytes to `copy` unless it is NULL. */
__attribute__((target("sse4.2"))) static inline uint32_t
crc32c_sse42_copying(uint32_t crc, const uint8_t *data, uint8_t *copy, size_t length)
{
    uint64_t crc0 = crc, word;
    for (; length && ((uintptr_t)data & 7); data++, length--) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *data);
        if (copy != NULL)
            *copy++ = *data;
    }
    for (; length >= 3 * CRC32C_LONG; data += 3 * CRC32C_LONG, length -= 3 * CRC32C_LONG) {
        crc0 = crc32c_three_streams(crc0, data, copy, CRC32C_LONG, crc32c_long_shift);
        copy = copy != NULL ? copy + 3 * CRC32C_LONG : NULL;
    }
    for (; length >= 3 * CRC32C_SHORT; data += 3 * CRC32C_SHORT, length -= 3 * CRC32C_SHORT) {
        crc0 = crc32c_three_streams(crc0, data, copy, CRC32C_SHORT, crc32c_short_shift);
        copy = copy != NULL ? copy + 3 * CRC32C_SHORT : NULL;
    }
    for (; length >= 8; data += 8, length -= 8) {
        memcpy(&word, data, 8);
        crc0 = _mm_crc32_u64(crc0, word);
        if (copy != NULL) {
            memcpy(copy, &word, 8);
            copy += 8;
        }
    }
    for (; length; data++, length--) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *data);
        if (copy != NULL)
            *copy++ = *data;
    }
    return (uint32_t)crc0;
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t crc, const uint8_t *data, size_t length)
{
    return crc32c_sse42_copying(crc, data, NULL, length);
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42_copy(uint32_t crc, const uint8_t *data, uint8_t *copy, size_t length)
{
    return crc32c_sse42_copying(crc, data, copy, length);
}
#endif

static void crc32c_init(void)
{
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t crc = byte;
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 1) ? (crc >> 1) ^ CRC32C_POLY : crc >> 1;
        crc32c_table[0][byte] = crc;
    }
    for (uint32_t byte = 0; byte < 256; byte++)
        for (int slice = 1; slice < 8; slice++) {
            uint32_t previous = crc32c_table[slice - 1][byte];
            crc32c_table[slice][byte] = crc32c_table[0][previous & 0xff] ^ (previous >> 8);
        }
#ifdef CRC32C_X86
    __builtin_cpu_init();
    crc32c_hardware = __builtin_cpu_supports("sse4.2");
    if (crc32c_hardware) {
        crc32c_zeros_tables(crc32c_long_shift, CRC32C_LONG);
        crc32c_zeros_tables(crc32c_short_shift, CRC32C_SHORT);
    }
#endif
}

/* The CRC-32C of data[0:length], continuing from `crc` (0 to start), as crc32c.crc32c gives. */
static inline uint32_t crc32c(uint32_t crc, const uint8_t *data, size_t length)
{
#ifdef CRC32C_X86
    if (crc32c_hardware)
        return ~crc32c_sse42(~crc, data, length);
#endif
    return ~crc32c_portable(~crc, data, length);
}

/* crc32c() of data[0:length] that also copies it to `copy` (not overlapping), reading each byte
 * once: the append path copies every request it stamps, and the CRC then costs little more
 * than the copy. */
static inline uint32_t crc32c_copy(uint32_t crc, const uint8_t *data, uint8_t *copy,
                                   size_t length)
{
#ifdef CRC32C_X86
    if (crc32c_hardware)
        return ~crc32c_sse42_copy(~crc, data, copy, length);
#endif
    memcpy(copy, data, length);
    return ~crc32c_portable(~crc, data, length);
}

#endif
