/*
 * CRC-32C (Castagnoli), the checksum of a v2 record batch (design §3), for odradek's C modules.
 *
 * On x86-64 with SSE4.2 the `crc32` instruction does the work, three streams at a time: it
 * has a latency of three cycles and a throughput of one, so one stream would run at a third
 * of the speed (docs/native.md has the figures). The streams' CRCs are joined by
 * "shifting" one over the bytes of the next with tables, built once, of the operator that
 * appends that many zero bytes (the method of Mark Adler's crc32c.c). Elsewhere (arm64, or an
 * x86 CPU without SSE4.2) a portable slicing-by-8 table loop gives the same values, slower.
 *
 * Where the CPU has AVX-512 and VPCLMULQDQ, buffers of CRC32C_FOLDING_MIN bytes and more are
 * folded instead, 256 bytes a step: a carry-less multiplication by x^n mod P moves each 128-bit
 * lane n bits on, onto the data there (Intel's "Fast CRC Computation for Generic Polynomials
 * Using PCLMULQDQ"), and the `crc32` instruction reduces the last 16 bytes, several times
 * faster than the three streams (docs/native.md).
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
#define CRC32C_FOLDING_MIN 256  /* the least a folding pass takes */

static uint32_t crc32c_table[8][256];       /* slicing-by-8, for the portable loop */
static uint32_t crc32c_long_shift[4][256];  /* appends CRC32C_LONG zero bytes to a CRC */
static uint32_t crc32c_short_shift[4][256]; /* appends CRC32C_SHORT zero bytes to a CRC */
static int crc32c_hardware;
static int crc32c_folding_hardware;
/* x^(n+31) and x^(n-33) mod P: what moves a lane's two 64-bit halves n bits on, for n = 2048
 * (four 512-bit registers at a time), 512 (one register) and 128 (one lane into the next). */
static uint64_t crc32c_fold_constants[3][2];

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
#include <immintrin.h>
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
/* x^n mod P, reflected as the CRC register is (bit 31 is x^0). */
static uint32_t crc32c_x_power(unsigned n)
{
    uint32_t power = 0x80000000u;
    while (n--)
        power = (power & 1) ? (power >> 1) ^ CRC32C_POLY : power >> 1;
    return power;
}

/* A 128-bit lane holds the x^127..x^64 coefficients of its 16 bytes in its low half (the bits
 * come reflected) and x^63..x^0 in its high half. Multiplying a half by a reflected 32-bit
 * constant c gives a product that, read as a lane, is half * c * x^33: so x^(n+31) moves the
 * low half n + 64 bits on and x^(n-33) moves the high half n bits on. */
static void crc32c_fold_by(uint64_t constants[2], unsigned bits)
{
    constants[0] = crc32c_x_power(bits + 31);
    constants[1] = crc32c_x_power(bits - 33);
}

#define CRC32C_FOLDING_TARGET "avx512f,vpclmulqdq,pclmul,sse4.2"

__attribute__((target(CRC32C_FOLDING_TARGET))) static inline __m512i
crc32c_fold512(__m512i lanes, __m512i constants, __m512i next)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(lanes, constants, 0x00),
                                     _mm512_clmulepi64_epi128(lanes, constants, 0x11), next,
                                     0x96 /* a ^ b ^ c */);
}

__attribute__((target(CRC32C_FOLDING_TARGET))) static inline __m128i
crc32c_fold128(__m128i lane, __m128i constants, __m128i next)
{
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(lane, constants, 0x00),
                                       _mm_clmulepi64_si128(lane, constants, 0x11)),
                         next);
}

/* The raw CRC register over data[0:length] (length >= CRC32C_FOLDING_MIN) by folding, copying
 * the bytes to `copy` unless it is NULL. The register is XORed into the first four bytes; four
 * registers of 64 bytes fold 256 bytes on at a time, then into one another, then the lanes
 * into one, whose CRC from 0 is the register after them; the tail goes byte by byte. */
__attribute__((target(CRC32C_FOLDING_TARGET))) static inline uint32_t
crc32c_folding_copying(uint32_t crc, const uint8_t *data, uint8_t *copy, size_t length)
{
    const __m512i by_2048 =
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)crc32c_fold_constants[0]));
    const __m512i by_512 =
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)crc32c_fold_constants[1]));
    const __m128i by_128 = _mm_loadu_si128((const __m128i *)crc32c_fold_constants[2]);
    __m512i block[4], next[4];
    for (int i = 0; i < 4; i++) {
        block[i] = _mm512_loadu_si512(data + 64 * i);
        if (copy != NULL)
            _mm512_storeu_si512(copy + 64 * i, block[i]);
    }
    block[0] = _mm512_xor_si512(block[0], _mm512_castsi128_si512(_mm_cvtsi32_si128((int)crc)));
    data += 256, length -= 256, copy = copy != NULL ? copy + 256 : NULL;
    for (; length >= 256; data += 256, length -= 256) {
        for (int i = 0; i < 4; i++) {
            next[i] = _mm512_loadu_si512(data + 64 * i);
            if (copy != NULL)
                _mm512_storeu_si512(copy + 64 * i, next[i]);
        }
        for (int i = 0; i < 4; i++)
            block[i] = crc32c_fold512(block[i], by_2048, next[i]);
        copy = copy != NULL ? copy + 256 : NULL;
    }
    __m512i folded = block[0];
    for (int i = 1; i < 4; i++)
        folded = crc32c_fold512(folded, by_512, block[i]);
    for (; length >= 64; data += 64, length -= 64) {
        __m512i more = _mm512_loadu_si512(data);
        if (copy != NULL) {
            _mm512_storeu_si512(copy, more);
            copy += 64;
        }
        folded = crc32c_fold512(folded, by_512, more);
    }
    __m128i lane = _mm512_extracti32x4_epi32(folded, 0);
    lane = crc32c_fold128(lane, by_128, _mm512_extracti32x4_epi32(folded, 1));
    lane = crc32c_fold128(lane, by_128, _mm512_extracti32x4_epi32(folded, 2));
    lane = crc32c_fold128(lane, by_128, _mm512_extracti32x4_epi32(folded, 3));
    uint64_t result = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(lane));
    result = _mm_crc32_u64(result, (uint64_t)_mm_extract_epi64(lane, 1));
    for (; length; data++, length--) {
        result = _mm_crc32_u8((uint32_t)result, *data);
        if (copy != NULL)
            *copy++ = *data;
    }
    return (uint32_t)result;
}

__attribute__((target(CRC32C_FOLDING_TARGET))) static uint32_t
crc32c_folding(uint32_t crc, const uint8_t *data, size_t length)
{
    return crc32c_folding_copying(crc, data, NULL, length);
}

__attribute__((target(CRC32C_FOLDING_TARGET))) static uint32_t
crc32c_folding_copy(uint32_t crc, const uint8_t *data, uint8_t *copy, size_t length)
{
    return crc32c_folding_copying(crc, data, copy, length);
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
    crc32c_folding_hardware = crc32c_hardware && __builtin_cpu_supports("avx512f")
                              && __builtin_cpu_supports("vpclmulqdq")
                              && __builtin_cpu_supports("pclmul");
    if (crc32c_folding_hardware) {
        crc32c_fold_by(crc32c_fold_constants[0], 2048);
        crc32c_fold_by(crc32c_fold_constants[1], 512);
        crc32c_fold_by(crc32c_fold_constants[2], 128);
    }
#endif
}

/* The CRC-32C of data[0:length], continuing from `crc` (0 to start), as crc32c.crc32c gives. */
static inline uint32_t crc32c(uint32_t crc, const uint8_t *data, size_t length)
{
#ifdef CRC32C_X86
    if (crc32c_folding_hardware && length >= CRC32C_FOLDING_MIN)
        return ~crc32c_folding(~crc, data, length);
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
    if (crc32c_folding_hardware && length >= CRC32C_FOLDING_MIN)
        return ~crc32c_folding_copy(~crc, data, copy, length);
    if (crc32c_hardware)
        return ~crc32c_sse42_copy(~crc, data, copy, length);
#endif
    memcpy(copy, data, length);
    return ~crc32c_portable(~crc, data, length);
}

#endif
