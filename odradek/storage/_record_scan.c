/*
 * The per-batch and per-record checks of the append path, in C (odradek.storage.log_validator
 * and odradek.storage.record_framing).
 *
 * Every produce request has each batch header checked and each record of each batch walked
 * before anything is written (SPEC 4 step 1). In Python that costs microseconds a batch and
 * 0.2-1 us a record, several times the cost of writing the batch to the page cache; here it
 * costs a few nanoseconds a record.
 *
 * This module only gives a verdict. When it says "invalid" the Python checks run over the same
 * bytes and raise the error naming the batch, record and byte at fault, so the messages live
 * in one place, and the two are tested to agree on every input (tests/test_log_validator.py).
 * Every read is bounded by the buffer, the batch's end or the record's end, so no input can
 * make it read out of bounds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "kafka_format.h"

/* Step over a length-prefixed field (key, value, header key or value); `min_length` is the
 * least length allowed (-1 where null is allowed, 0 where not). */
static int skip_field(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t limit,
                      int64_t min_length, int64_t *length)
{
    if (read_varint(data, pos, limit, 32, length) < 0 || *length < min_length)
        return -1;
    if (*length > 0) {
        if (*length > limit - *pos)
            return -1;
        *pos += (Py_ssize_t)*length;
    }
    return 0;
}

static int skip_headers(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t limit)
{
    int64_t count, length;
    if (read_varint(data, pos, limit, 32, &count) < 0 || count < 0)
        return -1;
    for (int64_t header = 0; header < count; header++) {
        if (skip_field(data, pos, limit, 0, &length) < 0)
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
        if (read_varint(data, &pos, end, 32, &value) < 0 || value < 0 || value > end - pos)
            return -1;
        Py_ssize_t record_end = pos + (Py_ssize_t)value;
        if (pos >= record_end)
            return -1; /* no attributes byte */
        pos++; /* attributes, which Kafka ignores */
        if (read_varint(data, &pos, record_end, 64, &value) < 0)
            return -1;
        if (value > framing->max_delta) {
            framing->max_delta = value;
            framing->index_of_max = index;
        }
        if (value < framing->min_delta)
            framing->min_delta = value;
        if (read_varint(data, &pos, record_end, 32, &value) < 0 || value != index)
            return -1;
        if (skip_field(data, &pos, record_end, -1, &value) < 0)
            return -1;
        if (value == -1 && keys_required)
            return -1;
        if (skip_field(data, &pos, record_end, -1, &value) < 0)
            return -1;
        if (skip_headers(data, &pos, record_end) < 0 || pos != record_end)
            return -1;
    }
    return pos == end ? 0 : -1;
}

PyDoc_STRVAR(walk_records_doc,
"walk_records(data, position, end, count, keys_required, /)\n--\n\n"
"(min timestamp delta, max timestamp delta, index of the max) when the ``count`` records in\n"
"``data[position:end]`` frame exactly (and all have keys, if ``keys_required``), else None.");

static PyObject *walk_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buffer;
    Py_ssize_t position, end, count;
    int keys_required;
    Framing framing;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "walk_records takes 5 arguments");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    position = PyLong_AsSsize_t(args[1]);
    end = PyLong_AsSsize_t(args[2]);
    count = PyLong_AsSsize_t(args[3]);
    keys_required = PyObject_IsTrue(args[4]);
    if (PyErr_Occurred() || keys_required < 0) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    if (position < 0 || end > buffer.len || position > end || count < 0) {
        PyBuffer_Release(&buffer);
        PyErr_SetString(PyExc_ValueError, "walk_records: position and end must lie in data");
        return NULL;
    }
    int status = walk((const uint8_t *)buffer.buf, position, end, count, keys_required,
                      &framing);
    PyBuffer_Release(&buffer);
    if (status < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLn)", (long long)framing.min_delta, (long long)framing.max_delta,
                         framing.index_of_max);
}

enum {
    MIN_RECORD_SIZE = 7,
    SUPPORTED_MAGIC = 2,
    CODEC_COUNT = 5,
    TRANSACTIONAL_OR_CONTROL = 0x30,
};

/* The layout tuple of the well-formed batch at data[position:], or NULL with no exception set
 * when it is malformed (NULL with an exception on a memory error). */
static PyObject *scan_batch(const uint8_t *data, Py_ssize_t position, Py_ssize_t total,
                            int keys_required, Py_ssize_t *size)
{
    const uint8_t *batch = data + position;
    if (total - position < HEADER_SIZE)
        return NULL;
    int64_t batch_size = (int64_t)be32(batch + BATCH_LENGTH_AT) + LOG_OVERHEAD;
    if (batch_size < HEADER_SIZE || batch_size > total - position)
        return NULL;
    *size = (Py_ssize_t)batch_size;
    int attributes = be16(batch + ATTRIBUTES_AT);
    int32_t count = be32(batch + RECORDS_COUNT_AT);
    if (batch[MAGIC_AT] != SUPPORTED_MAGIC || (attributes & CODEC_MASK) >= CODEC_COUNT
        || (attributes & TRANSACTIONAL_OR_CONTROL) != 0)
        return NULL;
    if (be64(batch + PRODUCER_ID_AT) >= 0 && be32(batch + BASE_SEQUENCE_AT) < 0)
        return NULL;
    if (count <= 0 || be32(batch + LAST_OFFSET_DELTA_AT) != count - 1)
        return NULL;
    PyObject *framing;
    if ((attributes & CODEC_MASK) != 0) {
        framing = Py_NewRef(Py_None);
    }
    else {
        Framing walked;
        Py_ssize_t start = position + HEADER_SIZE, end = position + *size;
        if (count > (end - start) / MIN_RECORD_SIZE
            || walk(data, start, end, count, keys_required, &walked) < 0)
            return NULL;
        framing = Py_BuildValue("(LLn)", (long long)walked.min_delta,
                                (long long)walked.max_delta, walked.index_of_max);
        if (framing == NULL)
            return NULL;
    }
    return Py_BuildValue("(nnkiiLLN)", position, *size,
                         (unsigned long)be32u(batch + CRC_AT), attributes,
                         (int)count, (long long)be64(batch + BASE_TIMESTAMP_AT),
                         (long long)be64(batch + MAX_TIMESTAMP_AT), framing);
}

PyDoc_STRVAR(scan_batches_doc,
"scan_batches(data, keys_required, /)\n--\n\n"
"The layout of each batch in ``data`` when it is a whole number (at least one) of well-formed\n"
"v2 batches, else None: a list of (position, size, crc, attributes, records_count,\n"
"base_timestamp, max_timestamp, framing), framing being walk_records' tuple for an\n"
"uncompressed batch and None for a compressed one (walked after decompression). Checked:\n"
"lengths, magic, codec id, no control or transactional flag, a base sequence with a producer\n"
"id, recordsCount against lastOffsetDelta, and the framing of uncompressed records. Not\n"
"checked: the CRC and anything the topic's config decides.");

static PyObject *scan_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buffer;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "scan_batches takes 2 arguments");
        return NULL;
    }
    int keys_required = PyObject_IsTrue(args[1]);
    if (keys_required < 0 || PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *data = (const uint8_t *)buffer.buf;
    PyObject *layouts = PyList_New(0);
    Py_ssize_t position = 0, size = 0;
    while (layouts != NULL && position < buffer.len) {
        PyObject *layout = scan_batch(data, position, buffer.len, keys_required, &size);
        if (layout == NULL || PyList_Append(layouts, layout) < 0)
            Py_CLEAR(layouts);
        Py_XDECREF(layout);
        position += size;
    }
    PyBuffer_Release(&buffer);
    if (layouts != NULL && PyList_GET_SIZE(layouts) > 0)
        return layouts;
    Py_XDECREF(layouts);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk_records", (PyCFunction)(void (*)(void))walk_records, METH_FASTCALL,
     walk_records_doc},
    {"scan_batches", (PyCFunction)(void (*)(void))scan_batches, METH_FASTCALL,
     scan_batches_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_record_scan",
    "The batch and record checks of the append path, in C (see log_validator.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__record_scan(void)
{
    return PyModule_Create(&module);
}
