/*
 * The validation of a produce request's uncompressed batches (design §4), as the append path's
 * C modules run it: the record walk, the format checks of a batch, the checks the topic's config
 * and the clock make, and the offsets, leader epoch and timestamps assigned in a copy.
 *
 * One definition for odradek/record/_record_scan.c (validate_batches, scan_batches) and
 * odradek/storage/_segment_append_state.c (append_batch, which validates and writes in one
 * call). Everything here gives a verdict only: the errors naming a fault are raised by the
 * Python checks (log_validator.py), tested to agree. Every read is bounded by the buffer, the
 * batch's end or the record's end. crc32c_init() must have run (module init).
 */
#ifndef ODRADEK_BATCH_VALIDATION_H
#define ODRADEK_BATCH_VALIDATION_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "crc32c.h"
#include "kafka_format.h"

/* read_varint with the one- and two-byte varints of a record's fields decoded inline: they
 * are most of a record's varints, and the general loop costs more than the walk's other work. */
static inline int next_varint(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t limit, int bits,
                              int64_t *value)
{
    Py_ssize_t at = *pos;
    if (limit - at >= 2) {
        uint64_t code = data[at];
        if (code < 0x80) {
            *value = (int64_t)(code >> 1) ^ -(int64_t)(code & 1);
            *pos = at + 1;
            return 0;
        }
        if (data[at + 1] < 0x80) {
            code = (code & 0x7F) | ((uint64_t)data[at + 1] << 7);
            *value = (int64_t)(code >> 1) ^ -(int64_t)(code & 1);
            *pos = at + 2;
            return 0;
        }
    }
    return read_varint(data, pos, limit, bits, value);
}

/* Step over a length-prefixed field (key, value, header key or value); `min_length` is the
 * least length allowed (-1 where null is allowed, 0 where not). */
static int skip_field(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t limit,
                      int64_t min_length, int64_t *length)
{
    if (next_varint(data, pos, limit, 32, length) < 0 || *length < min_length)
        return -1;
    if (*length > 0) {
        if (*length > limit - *pos)
            return -1;
        *pos += (Py_ssize_t)*length;
    }
    return 0;
}

/* 1 when text[0:length] is UTF-8 as Python's strict decoder reads it (no overlong forms, no
 * surrogates, nothing above U+10FFFF), else 0. Header keys are strings to every client, and
 * some (kafka-python among them) fail the whole fetch on a key that does not decode. */
static int is_utf8(const uint8_t *text, Py_ssize_t length)
{
    Py_ssize_t at = 0;
    while (at < length) {
        uint8_t lead = text[at];
        if (lead < 0x80) {
            at++;
            continue;
        }
        Py_ssize_t following;
        uint32_t code_point;
        if (lead >= 0xC2 && lead <= 0xDF)
            following = 1, code_point = lead & 0x1F;
        else if (lead >= 0xE0 && lead <= 0xEF)
            following = 2, code_point = lead & 0x0F;
        else if (lead >= 0xF0 && lead <= 0xF4)
            following = 3, code_point = lead & 0x07;
        else
            return 0;
        if (length - at <= following)
            return 0;
        for (Py_ssize_t k = 1; k <= following; k++) {
            if ((text[at + k] & 0xC0) != 0x80)
                return 0;
            code_point = (code_point << 6) | (text[at + k] & 0x3F);
        }
        if (following == 2
            && (code_point < 0x800 || (code_point >= 0xD800 && code_point <= 0xDFFF)))
            return 0;
        if (following == 3 && (code_point < 0x10000 || code_point > 0x10FFFF))
            return 0;
        at += following + 1;
    }
    return 1;
}

static int skip_headers(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t limit)
{
    int64_t count, length;
    if (next_varint(data, pos, limit, 32, &count) < 0 || count < 0)
        return -1;
    for (int64_t header = 0; header < count; header++) {
        if (skip_field(data, pos, limit, 0, &length) < 0
            || !is_utf8(data + *pos - length, (Py_ssize_t)length))
            return -1;
        if (skip_field(data, pos, limit, -1, &length) < 0)
            return -1;
    }
    return 0;
}

typedef struct {
    int64_t min_delta;
    int64_t max_delta;
    Py_ssize_t index_of_max;
} Framing;

/* 0 when the `count` records in data[position:end] frame exactly, -1 otherwise. */
static int walk(const uint8_t *data, Py_ssize_t position, Py_ssize_t end, Py_ssize_t count,
                int keys_required, Framing *framing)
{
    Py_ssize_t pos = position;
    int64_t value;
    framing->min_delta = INT64_MAX;
    framing->max_delta = INT64_MIN;
    framing->index_of_max = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        if (next_varint(data, &pos, end, 32, &value) < 0 || value < 0 || value > end - pos)
            return -1;
        /* The fields are walked from `field`, and the next record starts at record_end once
         * they end there: so the next record's length does not wait for this record's walk,
         * and the CPU overlaps the two. */
        Py_ssize_t record_end = pos + (Py_ssize_t)value, field = pos;
        if (field >= record_end)
            return -1; /* no attributes byte */
        field++; /* attributes, which Kafka ignores */
        if (next_varint(data, &field, record_end, 64, &value) < 0)
            return -1;
        if (value > framing->max_delta) {
            framing->max_delta = value;
            framing->index_of_max = index;
        }
        if (value < framing->min_delta)
            framing->min_delta = value;
        if (next_varint(data, &field, record_end, 32, &value) < 0 || value != index)
            return -1;
        if (skip_field(data, &field, record_end, -1, &value) < 0)
            return -1;
        if (value == -1 && keys_required)
            return -1;
        if (skip_field(data, &field, record_end, -1, &value) < 0)
            return -1;
        if (skip_headers(data, &field, record_end) < 0 || field != record_end)
            return -1;
        pos = record_end;
    }
    return pos == end ? 0 : -1;
}

enum {
    MIN_RECORD_SIZE = 7,
    SUPPORTED_MAGIC = 2,
    CODEC_COUNT = 5,
    TIMESTAMP_TYPE_MASK = 0x08,
    TRANSACTIONAL = 0x10,
    CONTROL = 0x20,
    PARTITION_LEADER_EPOCH_AT = 12,
};

/* What the format checks learn of a batch. */
typedef struct {
    Py_ssize_t size;
    int attributes;
    int32_t count;
    Framing framing; /* set for an uncompressed batch only */
} BatchFormat;

/* 0 when the batch at data[position:] is well formed (the checks scan_batches lists), -1
 * otherwise; format->size is set as soon as the batch's length is known to fit. */
static int check_format(const uint8_t *data, Py_ssize_t position, Py_ssize_t total,
                        int keys_required, BatchFormat *format)
{
    const uint8_t *batch = data + position;
    if (total - position < HEADER_SIZE)
        return -1;
    int64_t batch_size = (int64_t)be32(batch + BATCH_LENGTH_AT) + LOG_OVERHEAD;
    if (batch_size < HEADER_SIZE || batch_size > total - position)
        return -1;
    format->size = (Py_ssize_t)batch_size;
    format->attributes = be16(batch + ATTRIBUTES_AT);
    format->count = be32(batch + RECORDS_COUNT_AT);
    int attributes = format->attributes;
    int32_t count = format->count;
    /* A control batch is the transaction coordinator's, never a client's; a transactional
     * one must name its producer. */
    if (batch[MAGIC_AT] != SUPPORTED_MAGIC || (attributes & CODEC_MASK) >= CODEC_COUNT
        || (attributes & CONTROL) != 0
        || ((attributes & TRANSACTIONAL) != 0 && be64(batch + PRODUCER_ID_AT) < 0))
        return -1;
    if (be64(batch + PRODUCER_ID_AT) >= 0 && be32(batch + BASE_SEQUENCE_AT) < 0)
        return -1;
    if (count <= 0 || be32(batch + LAST_OFFSET_DELTA_AT) != count - 1)
        return -1;
    if ((attributes & CODEC_MASK) == 0) {
        Py_ssize_t start = position + HEADER_SIZE, end = position + format->size;
        if (count > (end - start) / MIN_RECORD_SIZE
            || walk(data, start, end, count, keys_required, &format->framing) < 0)
            return -1;
    }
    return 0;
}

/* What the topic's config and the clock let through, and what the broker stamps. */
typedef struct {
    int keys_required;
    int64_t max_message_bytes;
    int64_t now_ms;
    int64_t before_max_ms; /* message.timestamp.before.max.ms */
    int64_t after_max_ms;  /* message.timestamp.after.max.ms */
    int log_append_time;
    int32_t partition_leader_epoch;
} Rules;

/* A batch that passed every check, and the maxTimestamp it is to carry. */
typedef struct {
    Py_ssize_t position;
    Py_ssize_t size;
    int attributes;
    int32_t count;
    int64_t max_timestamp;
    int64_t index_of_max;
} CheckedBatch;

/* 0 when the batch at data[position:] passes every check the Python validation makes of an
 * uncompressed batch but the CRC's (checked as the batch is copied); -1 on any fault, on a
 * compressed batch, or where a sum would overflow (the Python checks then decide). */
static int check_batch(const uint8_t *data, Py_ssize_t position, Py_ssize_t total,
                       const Rules *rules, CheckedBatch *checked)
{
    BatchFormat format = {0};
    const uint8_t *batch = data + position;
    if (check_format(data, position, total, rules->keys_required, &format) < 0
        || (format.attributes & CODEC_MASK) != 0 || format.size > rules->max_message_bytes)
        return -1;
    checked->position = position;
    checked->size = format.size;
    checked->attributes = format.attributes;
    checked->count = format.count;
    if (rules->log_append_time) {
        checked->max_timestamp = rules->now_ms;
        checked->index_of_max = 0;
        return 0;
    }
    int64_t base_timestamp = be64(batch + BASE_TIMESTAMP_AT), lowest, highest, early, late;
    if (__builtin_add_overflow(base_timestamp, format.framing.min_delta, &lowest)
        || __builtin_add_overflow(base_timestamp, format.framing.max_delta, &highest)
        || __builtin_sub_overflow(rules->now_ms, lowest, &early)
        || __builtin_sub_overflow(highest, rules->now_ms, &late) || early > rules->before_max_ms
        || late > rules->after_max_ms)
        return -1;
    checked->max_timestamp = highest;
    checked->index_of_max = format.framing.index_of_max;
    return 0;
}

/* Stamp base offset and leader epoch; set the timestamp type and maxTimestamp (both inside the
 * CRC, so the CRC too) only where they differ from the producer's, as log_validator._assign. */
static void assign(uint8_t *data, const CheckedBatch *checked, int64_t base_offset,
                   const Rules *rules)
{
    uint8_t *batch = data + checked->position;
    put_be64(batch, (uint64_t)base_offset);
    put_be32(batch + PARTITION_LEADER_EPOCH_AT, (uint32_t)rules->partition_leader_epoch);
    int timestamp_type = rules->log_append_time ? TIMESTAMP_TYPE_MASK : 0;
    if ((checked->attributes & TIMESTAMP_TYPE_MASK) != timestamp_type
        || be64(batch + MAX_TIMESTAMP_AT) != checked->max_timestamp) {
        put_be16(batch + ATTRIBUTES_AT,
                 (uint16_t)((checked->attributes & ~TIMESTAMP_TYPE_MASK) | timestamp_type));
        put_be64(batch + MAX_TIMESTAMP_AT, (uint64_t)checked->max_timestamp);
        put_be32(batch + CRC_AT,
                 crc32c(0, batch + ATTRIBUTES_AT, (size_t)(checked->size - ATTRIBUTES_AT)));
    }
}

/* Check every batch of data[0:total] (into `checked`, room for `room`), then copy each to
 * `copy` checking its CRC on the way, and assign offsets in the copy from `next_offset`. Fills
 * `summary` with ValidationResult's numbers; returns -1 when any batch fails (the copy is then
 * not to be used), -2 when there are more than `room` batches. */
static int validate(const uint8_t *data, uint8_t *copy, Py_ssize_t total, const Rules *rules,
                    int64_t next_offset, CheckedBatch *checked, Py_ssize_t room,
                    int64_t summary[7])
{
    Py_ssize_t batches = 0;
    int64_t last_offset = next_offset - 1;
    for (Py_ssize_t position = 0; position < total; position += checked[batches++].size) {
        if (batches == room)
            return -2;
        if (check_batch(data, position, total, rules, &checked[batches]) < 0
            || __builtin_add_overflow(last_offset, (int64_t)checked[batches].count, &last_offset))
            return -1;
    }
    if (batches == 0)
        return -1;
    for (Py_ssize_t index = 0; index < batches; index++) {
        const uint8_t *batch = data + checked[index].position;
        uint8_t *batch_copy = copy + checked[index].position;
        memcpy(batch_copy, batch, ATTRIBUTES_AT);
        size_t covered = (size_t)(checked[index].size - ATTRIBUTES_AT);
        if (crc32c_copy(0, batch + ATTRIBUTES_AT, batch_copy + ATTRIBUTES_AT, covered)
            != be32u(batch + CRC_AT))
            return -1;
    }
    int64_t max_timestamp = -1, offset_of_max_timestamp = -1, base_offset = next_offset;
    for (Py_ssize_t index = 0; index < batches; index++) {
        assign(copy, &checked[index], base_offset, rules);
        if (checked[index].max_timestamp > max_timestamp) {
            max_timestamp = checked[index].max_timestamp;
            offset_of_max_timestamp = base_offset + checked[index].index_of_max;
        }
        if (index + 1 < batches) /* after the last batch it may pass INT64_MAX */
            base_offset += checked[index].count;
    }
    summary[0] = next_offset;
    summary[1] = last_offset;
    summary[2] = max_timestamp;
    summary[3] = offset_of_max_timestamp;
    summary[4] = last_offset - next_offset + 1;
    summary[5] = batches;
    summary[6] = checked[0].max_timestamp;
    return 0;
}

/* An int argument as int64; 0 on success, -1 (no exception set) when it does not fit, -2 with
 * an exception set when it is no int. */
static int as_int64(PyObject *argument, int64_t *value)
{
    int overflow;
    long long result = PyLong_AsLongLongAndOverflow(argument, &overflow);
    if (result == -1 && PyErr_Occurred())
        return -2;
    if (overflow)
        return -1;
    *value = (int64_t)result;
    return 0;
}

#endif
