/*
 * The record-framing walk of odradek.storage.record_framing, in C.
 *
 * Every produce request has each record of each batch walked before anything is written
 * (SPEC 4 step 1). In Python that walk costs 0.2-1 us a record, several times the cost of
 * writing the batch to the page cache; here it costs a few nanoseconds a record.
 *
 * This module only gives a verdict. When it says "invalid" the Python walk runs over the same
 * bytes and raises the error naming the record and byte at fault, so the messages live in one
 * place, and the two walks are tested to agree on every input (tests/test_record_scan.py).
 * Every read is bounded by the record's end, so no input can make it read out of bounds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Read a zigzag varint of at most `bits` (32 or 64) bits at *pos, not reading at or past
 * `limit`. Returns 0 and advances *pos on success, -1 on a malformed or truncated varint. */
static int read_varint(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t limit, int bits,
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

static PyMethodDef methods[] = {
    {"walk_records", (PyCFunction)(void (*)(void))walk_records, METH_FASTCALL,
     walk_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_record_scan",
    "The record-framing walk of the append path, in C (see record_framing.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__record_scan(void)
{
    return PyModule_Create(&module);
}
