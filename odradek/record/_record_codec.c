/*
 * The clients' per-record loops: many records written into a batch's records section at once
 * (the producer), and a whole records section read into record tuples at once (the consumer).
 *
 * Bytes and lists of bytes in, bytes or a list of tuples out. `record_codec.py` holds the Python
 * twins, which write and read exactly the same (tests/test_record_codec_native.py compares them
 * on generated, truncated and corrupt input). The reader gives no error of its own: on anything
 * malformed it answers None and the caller's plain decoder names the fault. Every read is
 * bounded by the record's end, itself checked against the data's end.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "kafka_format.h"

#define INT32_MAX_VALUE 2147483647LL

/* --- writing --------------------------------------------------------------------------------- */

static inline Py_ssize_t varint_size(int64_t value)
{
    uint64_t code = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    Py_ssize_t size = 1;
    while (code >= 0x80) {
        code >>= 7;
        size++;
    }
    return size;
}

static inline uint8_t *put_varint(uint8_t *out, int64_t value)
{
    uint64_t code = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (code >= 0x80) {
        *out++ = (uint8_t)((code & 0x7F) | 0x80);
        code >>= 7;
    }
    *out++ = (uint8_t)code;
    return out;
}

/* The length of a key or value (-1 for None), or -2 with TypeError set. */
static inline Py_ssize_t field_length(PyObject *field, const char *what)
{
    if (field == Py_None)
        return -1;
    if (!PyBytes_Check(field)) {
        PyErr_Format(PyExc_TypeError, "a record %s must be bytes or None, not %.100s", what,
                     Py_TYPE(field)->tp_name);
        return -2;
    }
    if (PyBytes_GET_SIZE(field) > INT32_MAX_VALUE) {
        PyErr_Format(PyExc_ValueError, "a record %s of more than 2^31 - 1 bytes", what);
        return -2;
    }
    return PyBytes_GET_SIZE(field);
}

/* The body size of a record (without its length varint). */
static inline Py_ssize_t body_size(int64_t timestamp_delta, int64_t offset_delta,
                                   Py_ssize_t key_length, Py_ssize_t value_length)
{
    return 1 + varint_size(timestamp_delta) + varint_size(offset_delta) +
           varint_size(key_length) + (key_length > 0 ? key_length : 0) +
           varint_size(value_length) + (value_length > 0 ? value_length : 0) + 1;
}

PyDoc_STRVAR(write_records_doc,
"write_records(out, keys, values, start, stop, first_offset_delta, timestamp_delta, limit, /)\n"
"--\n\n"
"Append to the bytearray ``out`` records ``start`` to ``stop`` of ``values`` (bytes or None)\n"
"with their ``keys`` (a list as long, or None for no keys), no headers, offset deltas from\n"
"``first_offset_delta`` on and one timestamp delta, as write_record writes each. Stops before\n"
"a record that would take ``out`` past ``limit`` bytes; returns the index of the first record\n"
"not written.");

static PyObject *write_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "write_records takes 8 arguments");
        return NULL;
    }
    PyObject *out = args[0], *keys = args[1], *values = args[2];
    if (!PyByteArray_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "write_records: out must be a bytearray");
        return NULL;
    }
    if (!PyList_Check(values) || (keys != Py_None && !PyList_Check(keys))) {
        PyErr_SetString(PyExc_TypeError, "write_records: values and keys must be lists");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[3]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[4]);
    long long first_offset_delta = PyLong_AsLongLong(args[5]);
    long long timestamp_delta = PyLong_AsLongLong(args[6]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[7]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(values);
    if (keys != Py_None && PyList_GET_SIZE(keys) != count) {
        PyErr_SetString(PyExc_ValueError, "write_records: keys and values differ in length");
        return NULL;
    }
    if (start < 0 || stop > count || start > stop) {
        PyErr_SetString(PyExc_ValueError, "write_records: start and stop must lie in values");
        return NULL;
    }
    if (first_offset_delta < 0 || first_offset_delta + (stop - start) - 1 > INT32_MAX_VALUE) {
        PyErr_SetString(PyExc_ValueError, "write_records: offset deltas must lie in [0, 2^31)");
        return NULL;
    }
    /* First pass: how many records fit, and their bytes. The lists are not changed in between
     * (no Python code runs), so the second pass sees the same objects. */
    Py_ssize_t size = PyByteArray_GET_SIZE(out);
    Py_ssize_t stop_at = start;
    for (Py_ssize_t i = start; i < stop; i++) {
        Py_ssize_t key_length =
            keys == Py_None ? -1 : field_length(PyList_GET_ITEM(keys, i), "key");
        Py_ssize_t value_length = field_length(PyList_GET_ITEM(values, i), "value");
        if (key_length < -1 || value_length < -1)
            return NULL;
        Py_ssize_t body = body_size(timestamp_delta, first_offset_delta + (i - start),
                                    key_length, value_length);
        Py_ssize_t record = varint_size(body) + body;
        if (record > limit - size)
            break;
        size += record;
        stop_at = i + 1;
    }
    Py_ssize_t written_from = PyByteArray_GET_SIZE(out);
    if (stop_at == start)
        return PyLong_FromSsize_t(start);
    if (PyByteArray_Resize(out, size) < 0)
        return NULL;
    uint8_t *at = (uint8_t *)PyByteArray_AS_STRING(out) + written_from;
    for (Py_ssize_t i = start; i < stop_at; i++) {
        PyObject *key = keys == Py_None ? Py_None : PyList_GET_ITEM(keys, i);
        PyObject *value = PyList_GET_ITEM(values, i);
        Py_ssize_t key_length = key == Py_None ? -1 : PyBytes_GET_SIZE(key);
        Py_ssize_t value_length = value == Py_None ? -1 : PyBytes_GET_SIZE(value);
        int64_t offset_delta = first_offset_delta + (i - start);
        at = put_varint(at, body_size(timestamp_delta, offset_delta, key_length, value_length));
        *at++ = 0; /* attributes */
        at = put_varint(at, timestamp_delta);
        at = put_varint(at, offset_delta);
        at = put_varint(at, key_length);
        if (key_length > 0) {
            memcpy(at, PyBytes_AS_STRING(key), (size_t)key_length);
            at += key_length;
        }
        at = put_varint(at, value_length);
        if (value_length > 0) {
            memcpy(at, PyBytes_AS_STRING(value), (size_t)value_length);
            at += value_length;
        }
        *at++ = 0; /* no headers */
    }
    return PyLong_FromSsize_t(stop_at);
}

/* --- reading --------------------------------------------------------------------------------- */

/* read_varint with one-byte varints inline: most of a record's are. */
static inline int next_varint(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t limit, int bits,
                              int64_t *value)
{
    Py_ssize_t at = *pos;
    if (at < limit && data[at] < 0x80) {
        uint64_t code = data[at];
        *value = (int64_t)(code >> 1) ^ -(int64_t)(code & 1);
        *pos = at + 1;
        return 0;
    }
    return read_varint(data, pos, limit, bits, value);
}

/* a + b as a Python int, also where it leaves int64 (the Python twin's ints are unbounded). */
static PyObject *sum_of(int64_t a, int64_t b)
{
    int64_t sum;
    if (!__builtin_add_overflow(a, b, &sum))
        return PyLong_FromLongLong(sum);
    PyObject *left = PyLong_FromLongLong(a), *right = PyLong_FromLongLong(b), *result = NULL;
    if (left != NULL && right != NULL)
        result = PyNumber_Add(left, right);
    Py_XDECREF(left);
    Py_XDECREF(right);
    return result;
}

/* A key, value or header value at *pos within `end`: a new bytes object, Py_None (a new
 * reference) for a null one, or NULL: malformed (no error set) or out of memory (error set). */
static PyObject *read_field(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t end)
{
    int64_t length;
    if (next_varint(data, pos, end, 32, &length) < 0 || length < -1)
        return NULL;
    if (length == -1)
        Py_RETURN_NONE;
    if (length > end - *pos)
        return NULL;
    PyObject *field = PyBytes_FromStringAndSize((const char *)data + *pos, (Py_ssize_t)length);
    *pos += (Py_ssize_t)length;
    return field;
}

/* The headers of a record as a tuple of (str, bytes | None); NULL as read_field. */
static PyObject *read_headers(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t end,
                              PyObject *no_headers)
{
    int64_t count;
    if (next_varint(data, pos, end, 32, &count) < 0 || count < 0 || count > end - *pos)
        return NULL;
    if (count == 0) {
        Py_INCREF(no_headers);
        return no_headers;
    }
    PyObject *headers = PyTuple_New((Py_ssize_t)count);
    if (headers == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length;
        if (next_varint(data, pos, end, 32, &length) < 0 || length < 0 || length > end - *pos)
            goto fail;
        PyObject *key = PyUnicode_DecodeUTF8((const char *)data + *pos, (Py_ssize_t)length,
                                             "replace");
        if (key == NULL)
            goto fail;
        *pos += (Py_ssize_t)length;
        PyObject *value = read_field(data, pos, end);
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        PyObject *pair = PyTuple_Pack(2, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (pair == NULL)
            goto fail;
        PyTuple_SET_ITEM(headers, i, pair);
    }
    return headers;
fail:
    Py_DECREF(headers);
    return NULL;
}

PyDoc_STRVAR(read_records_doc,
"read_records(data, count, base_offset, base_timestamp, log_append_time, first_offset,\n"
"             record_type, topic, partition, timestamp_type, /)\n--\n\n"
"The ``count`` records filling ``data`` (an uncompressed records section) from offset\n"
"``first_offset`` on, each a ``record_type`` (a tuple type) of (topic, partition, offset,\n"
"timestamp, timestamp_type, key, value, headers); ``log_append_time`` (or None) is every\n"
"record's timestamp in a LogAppendTime batch. None when ``data`` is anything but exactly ``count`` well-formed records.");

static PyObject *read_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "read_records takes 10 arguments");
        return NULL;
    }
    Py_buffer buffer;
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    long long base_offset = PyLong_AsLongLong(args[2]);
    long long base_timestamp = PyLong_AsLongLong(args[3]);
    int has_log_append_time = args[4] != Py_None;
    long long log_append_time = has_log_append_time ? PyLong_AsLongLong(args[4]) : 0;
    long long first_offset = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyType_Check(args[6]) || !PyType_IsSubtype((PyTypeObject *)args[6], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "read_records: record_type must be a tuple type");
        return NULL;
    }
    PyTypeObject *record_type = (PyTypeObject *)args[6];
    PyObject *topic = args[7], *partition = args[8], *timestamp_type = args[9];
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "read_records: count is negative");
        return NULL;
    }
    /* A record can be in no reference cycle: it is immutable, and its items (a str, ints,
     * bytes or None, a headers tuple of str and bytes) cannot refer to an object made after
     * them. So the cyclic collector need not watch it, as it stops watching a plain tuple of
     * such items once it has looked at it; a consumer holding a fetch's 100,000 records would
     * otherwise have each one traversed by every collection they live through, and promoted
     * into the oldest generation, whose collections then come often and cost milliseconds. */
    int untrack = PyUnicode_CheckExact(topic) && PyLong_CheckExact(partition) &&
                  PyLong_Check(timestamp_type);
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *data = (const uint8_t *)buffer.buf;
    Py_ssize_t size = buffer.len;
    PyObject *records = PyList_New(0);
    PyObject *no_headers = PyTuple_New(0);
    PyObject *shared_timestamp = has_log_append_time ? PyLong_FromLongLong(log_append_time)
                                                     : NULL;
    if (records == NULL || no_headers == NULL || (has_log_append_time && shared_timestamp == NULL))
        goto error;
    Py_ssize_t pos = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        int64_t length, timestamp_delta, offset_delta;
        if (next_varint(data, &pos, size, 32, &length) < 0 || length < 1 || length > size - pos)
            goto malformed;
        Py_ssize_t end = pos + (Py_ssize_t)length;
        pos++; /* attributes, unused as Kafka does */
        if (next_varint(data, &pos, end, 64, &timestamp_delta) < 0 ||
            next_varint(data, &pos, end, 32, &offset_delta) < 0)
            goto malformed;
        int64_t offset;
        int wanted = __builtin_add_overflow((int64_t)base_offset, offset_delta, &offset)
                         ? offset_delta > 0
                         : offset >= first_offset;
        PyObject *key = read_field(data, &pos, end);
        if (key == NULL)
            goto malformed_or_error;
        PyObject *value = read_field(data, &pos, end);
        if (value == NULL) {
            Py_DECREF(key);
            goto malformed_or_error;
        }
        PyObject *headers = read_headers(data, &pos, end, no_headers);
        if (headers == NULL || pos != end || !wanted) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_XDECREF(headers);
            if (headers == NULL)
                goto malformed_or_error;
            if (pos != end)
                goto malformed;
            continue;
        }
        PyObject *offset_object = sum_of(base_offset, offset_delta);
        PyObject *timestamp_object = shared_timestamp != NULL
                                         ? (Py_INCREF(shared_timestamp), shared_timestamp)
                                         : sum_of(base_timestamp, timestamp_delta);
        /* Allocated last and filled at once: nothing runs while it holds empty slots. */
        PyObject *record = offset_object != NULL && timestamp_object != NULL
                               ? record_type->tp_alloc(record_type, 8)
                               : NULL;
        if (record == NULL || offset_object == NULL || timestamp_object == NULL) {
            Py_XDECREF(record);
            Py_XDECREF(offset_object);
            Py_XDECREF(timestamp_object);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto error;
        }
        Py_INCREF(topic);
        Py_INCREF(partition);
        Py_INCREF(timestamp_type);
        PyTuple_SET_ITEM(record, 0, topic);
        PyTuple_SET_ITEM(record, 1, partition);
        PyTuple_SET_ITEM(record, 2, offset_object);
        PyTuple_SET_ITEM(record, 3, timestamp_object);
        PyTuple_SET_ITEM(record, 4, timestamp_type);
        PyTuple_SET_ITEM(record, 5, key);
        PyTuple_SET_ITEM(record, 6, value);
        PyTuple_SET_ITEM(record, 7, headers);
        if (untrack)
            PyObject_GC_UnTrack(record);
        int appended = PyList_Append(records, record);
        Py_DECREF(record);
        if (appended < 0)
            goto error;
    }
    if (pos != size)
        goto malformed;
    PyBuffer_Release(&buffer);
    Py_DECREF(no_headers);
    Py_XDECREF(shared_timestamp);
    return records;

malformed_or_error:
    if (PyErr_Occurred())
        goto error;
malformed:
    PyBuffer_Release(&buffer);
    Py_DECREF(records);
    Py_DECREF(no_headers);
    Py_XDECREF(shared_timestamp);
    Py_RETURN_NONE;
error:
    PyBuffer_Release(&buffer);
    Py_XDECREF(records);
    Py_XDECREF(no_headers);
    Py_XDECREF(shared_timestamp);
    return NULL;
}

static PyMethodDef methods[] = {
    {"write_records", (PyCFunction)(void (*)(void))write_records, METH_FASTCALL,
     write_records_doc},
    {"read_records", (PyCFunction)(void (*)(void))read_records, METH_FASTCALL, read_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "odradek.record._record_codec",
    "The clients' per-record loops: records written into and read from a batch in bulk.",
    -1,
    methods,
};

PyMODINIT_FUNC PyInit__record_codec(void) { return PyModule_Create(&module); }
