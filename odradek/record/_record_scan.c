/*
 * The per-batch and per-record checks of the append path, in C (odradek.storage.log_validator
 * and odradek.record.record_framing).
 *
 * Every produce request has each batch header checked and each record of each batch walked
 * before anything is written (design §4 step 1). In Python that costs several times the write of
 * the batch to the page cache; here a small fraction of it (docs/native.md has the figures).
 *
 * validate_batches is the common case in one call: a request of uncompressed batches is
 * checked whole (format, size, CRC-32C, timestamps) and only then given its offsets, in place.
 * scan_batches and walk_records are the pieces the Python validation uses for the rest
 * (compressed batches).
 *
 * This module only gives a verdict. When it says "invalid" the Python checks run over the same
 * bytes and raise the error naming the batch, record and byte at fault, so the messages live
 * in one place, and the two are tested to agree on every input (tests/test_log_validator.py,
 * tests/test_record_scan_native.py). Every read is bounded by the buffer, the batch's end or
 * the record's end, so no input can make it read out of bounds. The checks themselves are in
 * odradek/_native/batch_validation.h, shared with the segment's append state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "batch_validation.h"
#include "crc32c.h"
#include "kafka_format.h"

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

/* The layout tuple of the well-formed batch at data[position:], or NULL with no exception set
 * when it is malformed (NULL with an exception on a memory error). */
static PyObject *scan_batch(const uint8_t *data, Py_ssize_t position, Py_ssize_t total,
                            int keys_required, Py_ssize_t *size)
{
    BatchFormat format = {0};
    int status = check_format(data, position, total, keys_required, &format);
    *size = format.size;
    if (status < 0)
        return NULL;
    const uint8_t *batch = data + position;
    PyObject *framing;
    if ((format.attributes & CODEC_MASK) != 0) {
        framing = Py_NewRef(Py_None);
    }
    else {
        framing = Py_BuildValue("(LLn)", (long long)format.framing.min_delta,
                                (long long)format.framing.max_delta, format.framing.index_of_max);
        if (framing == NULL)
            return NULL;
    }
    return Py_BuildValue("(nnkiiLLN)", position, format.size,
                         (unsigned long)be32u(batch + CRC_AT), format.attributes,
                         (int)format.count, (long long)be64(batch + BASE_TIMESTAMP_AT),
                         (long long)be64(batch + MAX_TIMESTAMP_AT), framing);
}

PyDoc_STRVAR(scan_batches_doc,
"scan_batches(data, keys_required, /)\n--\n\n"
"The layout of each batch in ``data`` when it is a whole number (at least one) of well-formed\n"
"v2 batches, else None: a list of (position, size, crc, attributes, records_count,\n"
"base_timestamp, max_timestamp, framing), framing being walk_records' tuple for an\n"
"uncompressed batch and None for a compressed one (walked after decompression). Checked:\n"
"lengths, magic, codec id, no control flag, a producer id with the transactional flag, a base\n"
"sequence with a producer id, recordsCount against lastOffsetDelta, and the framing of\n"
"uncompressed records. Not\n"
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

PyDoc_STRVAR(validate_batches_doc,
"validate_batches(records, keys_required, max_message_bytes, now_ms, before_max_ms,\n"
"                 after_max_ms, log_append_time, next_offset, partition_leader_epoch,\n"
"                 result_type=tuple, /)\n--\n\n"
"Validate the uncompressed batches of ``records`` (any buffer, left unchanged) and return a\n"
"copy with their offsets assigned: the checks of scan_batches, then max.message.bytes and the\n"
"CreateTime bounds [now_ms - before_max_ms, now_ms + after_max_ms], then the CRC-32C, checked\n"
"as the bytes are copied (one pass); in the copy, base offsets from ``next_offset``, the leader\n"
"epoch, and where needed the timestamp type, maxTimestamp (now_ms under LogAppendTime) and\n"
"CRC. Returns ValidationResult's fields: (copy, first_offset, last_offset, max_timestamp,\n"
"offset_of_max_timestamp, record_count, batch_count, size_in_bytes,\n"
"first_batch_max_timestamp), as an instance of ``result_type`` when given (a tuple subclass\n"
"such as ValidationResult: building it here saves the append path a call). Returns None on\n"
"any fault, a compressed batch or a value out of range: the Python checks then decide, and\n"
"name the fault.");

static PyObject *validate_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Rules rules;
    int64_t next_offset, epoch, summary[7];
    if (nargs != 9 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "validate_batches takes 9 or 10 arguments");
        return NULL;
    }
    PyTypeObject *result_type = nargs == 10 ? (PyTypeObject *)args[9] : &PyTuple_Type;
    if (!PyType_Check(result_type) || !PyType_IsSubtype(result_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "validate_batches: result_type must be a tuple type");
        return NULL;
    }
    rules.keys_required = PyObject_IsTrue(args[1]);
    rules.log_append_time = PyObject_IsTrue(args[6]);
    if (rules.keys_required < 0 || rules.log_append_time < 0)
        return NULL;
    int status = 0;
    int64_t *targets[] = {&rules.max_message_bytes, &rules.now_ms, &rules.before_max_ms,
                          &rules.after_max_ms, &next_offset, &epoch};
    PyObject *sources[] = {args[2], args[3], args[4], args[5], args[7], args[8]};
    for (int i = 0; i < 6 && status == 0; i++)
        status = as_int64(sources[i], targets[i]);
    if (status == -2)
        return NULL;
    if (status == -1 || epoch < INT32_MIN || epoch > INT32_MAX)
        Py_RETURN_NONE;
    rules.partition_leader_epoch = (int32_t)epoch;
    Py_buffer buffer;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *copy = PyByteArray_FromStringAndSize(NULL, buffer.len);
    if (copy == NULL) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    const uint8_t *data = (const uint8_t *)buffer.buf;
    uint8_t *copy_data = (uint8_t *)PyByteArray_AS_STRING(copy);
    Py_ssize_t total = buffer.len;
    CheckedBatch few[16], *checked = few;
    Py_ssize_t room = 16;
    status = validate(data, copy_data, total, &rules, next_offset, checked, room, summary);
    if (status == -2) { /* many small batches: room for as many as the bytes can hold */
        room = total / HEADER_SIZE;
        checked = PyMem_New(CheckedBatch, room);
        if (checked == NULL) {
            PyBuffer_Release(&buffer);
            Py_DECREF(copy);
            return PyErr_NoMemory();
        }
        status = validate(data, copy_data, total, &rules, next_offset, checked, room, summary);
        PyMem_Free(checked);
    }
    PyBuffer_Release(&buffer);
    if (status < 0) {
        Py_DECREF(copy);
        Py_RETURN_NONE;
    }
    PyObject *fields = Py_BuildValue("(NLLLLLLnL)", copy, (long long)summary[0],
                                     (long long)summary[1], (long long)summary[2],
                                     (long long)summary[3], (long long)summary[4],
                                     (long long)summary[5], total, (long long)summary[6]);
    if (fields == NULL || result_type == &PyTuple_Type)
        return fields;
    /* A tuple subclass instance holding the same items, as tuple.__new__(result_type, ...). */
    PyObject *result = result_type->tp_alloc(result_type, PyTuple_GET_SIZE(fields));
    if (result != NULL)
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); i++)
            PyTuple_SET_ITEM(result, i, Py_NewRef(PyTuple_GET_ITEM(fields, i)));
    Py_DECREF(fields);
    return result;
}

PyDoc_STRVAR(crc32c_doc,
"crc32c(data, crc=0, /)\n--\n\n"
"The CRC-32C of ``data`` continued from ``crc``, as validate_batches computes it (the same\n"
"values as crc32c.crc32c).");

PyDoc_STRVAR(crc32c_each_doc,
"crc32c_each(data, crc=0, /)\n--\n\n"
"crc32c by each implementation this CPU can run, so that each is tested wherever the tests\n"
"run: {name: crc} for 'portable', 'sse4.2' and 'folding', and {name + ' copying': (crc,\n"
"copy)} for the variants that copy as they go. 'folding' is absent below its least length.");

/* The arguments of crc32c and crc32c_each: a buffer (to release) and a starting CRC. */
static int checksum_arguments(PyObject *const *args, Py_ssize_t nargs, Py_buffer *buffer,
                              uint32_t *crc)
{
    *crc = 0;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32c takes 1 or 2 arguments");
        return -1;
    }
    if (nargs == 2) {
        unsigned long value = PyLong_AsUnsignedLong(args[1]);
        if (PyErr_Occurred())
            return -1;
        if (value > UINT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "crc32c: crc must fit 32 bits");
            return -1;
        }
        *crc = (uint32_t)value;
    }
    return PyObject_GetBuffer(args[0], buffer, PyBUF_SIMPLE);
}

static PyObject *crc32c_function(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buffer;
    uint32_t crc;
    if (checksum_arguments(args, nargs, &buffer, &crc) < 0)
        return NULL;
    crc = crc32c(crc, (const uint8_t *)buffer.buf, (size_t)buffer.len);
    PyBuffer_Release(&buffer);
    return PyLong_FromUnsignedLong(crc);
}

typedef uint32_t (*Checksum)(uint32_t, const uint8_t *, size_t);
typedef uint32_t (*CopyingChecksum)(uint32_t, const uint8_t *, uint8_t *, size_t);

/* Add name: crc and name + " copying": (crc, copy) to `results`; 0, or -1 with an exception. */
static int add_checksums(PyObject *results, const char *name, const char *copying_name,
                         Checksum checksum, CopyingChecksum copying, uint32_t crc,
                         const Py_buffer *buffer)
{
    const uint8_t *data = (const uint8_t *)buffer->buf;
    size_t length = (size_t)buffer->len;
    PyObject *copy = PyBytes_FromStringAndSize(NULL, buffer->len);
    if (copy == NULL)
        return -1;
    uint32_t copied = ~copying(~crc, data, (uint8_t *)PyBytes_AS_STRING(copy), length);
    PyObject *plain = PyLong_FromUnsignedLong(~checksum(~crc, data, length));
    PyObject *pair = Py_BuildValue("(kN)", (unsigned long)copied, copy);
    int status = plain == NULL || pair == NULL || PyDict_SetItemString(results, name, plain) < 0
                         || PyDict_SetItemString(results, copying_name, pair) < 0
                     ? -1
                     : 0;
    Py_XDECREF(plain);
    Py_XDECREF(pair);
    return status;
}

static uint32_t portable_copy(uint32_t crc, const uint8_t *data, uint8_t *copy, size_t length)
{
    memcpy(copy, data, length);
    return crc32c_portable(crc, data, length);
}

static PyObject *crc32c_each(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buffer;
    uint32_t crc;
    if (checksum_arguments(args, nargs, &buffer, &crc) < 0)
        return NULL;
    PyObject *results = PyDict_New();
    int status = results == NULL ? -1
                                 : add_checksums(results, "portable", "portable copying",
                                                 crc32c_portable, portable_copy, crc, &buffer);
#ifdef CRC32C_X86
    if (status == 0 && crc32c_hardware)
        status = add_checksums(results, "sse4.2", "sse4.2 copying", crc32c_sse42,
                               crc32c_sse42_copy, crc, &buffer);
    if (status == 0 && crc32c_folding_hardware && buffer.len >= CRC32C_FOLDING_MIN)
        status = add_checksums(results, "folding", "folding copying", crc32c_folding,
                               crc32c_folding_copy, crc, &buffer);
#endif
    PyBuffer_Release(&buffer);
    if (status < 0) {
        Py_XDECREF(results);
        return NULL;
    }
    return results;
}

PyDoc_STRVAR(whole_batches_doc,
"whole_batches(buffer, length, /)\n--\n\n"
"Recovery's walk of one chunk read from a segment: the (offset, size) of each whole batch at\n"
"the start of ``buffer[:length]``, the bytes they take, and whether a header with an\n"
"impossible length (below a header's) ends them. Nothing but the lengths is looked at.");

static PyObject *whole_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "whole_batches takes 2 arguments");
        return NULL;
    }
    Py_ssize_t length = PyLong_AsSsize_t(args[1]);
    if (length == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer buffer;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    if (length < 0 || length > buffer.len) {
        PyBuffer_Release(&buffer);
        PyErr_SetString(PyExc_ValueError, "whole_batches: length outside the buffer");
        return NULL;
    }
    const uint8_t *data = (const uint8_t *)buffer.buf;
    Py_ssize_t consumed = 0;
    int impossible = 0;
    PyObject *batches = PyList_New(0);
    while (batches != NULL && consumed + HEADER_SIZE <= length) {
        Py_ssize_t size = (Py_ssize_t)be32(data + consumed + BATCH_LENGTH_AT) + LOG_OVERHEAD;
        if (size < HEADER_SIZE) {
            impossible = 1;
            break;
        }
        if (size > length - consumed)
            break;
        PyObject *batch = Py_BuildValue("(nn)", consumed, size);
        if (batch == NULL || PyList_Append(batches, batch) < 0)
            Py_CLEAR(batches);
        Py_XDECREF(batch);
        consumed += size;
    }
    PyBuffer_Release(&buffer);
    if (batches == NULL)
        return NULL;
    return Py_BuildValue("(NnO)", batches, consumed, impossible ? Py_True : Py_False);
}

PyDoc_STRVAR(crc_matches_doc,
"crc_matches(buffer, batches, /)\n--\n\n"
"For each (offset, size) of ``batches`` (whole batches in ``buffer``, as whole_batches gives\n"
"them), whether the batch's CRC-32C matches its header's. Computed without the GIL, so the\n"
"threads recovering other logs at startup run meanwhile.");

static PyObject *crc_matches(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "crc_matches takes a buffer and a list");
        return NULL;
    }
    Py_buffer buffer;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(args[1]);
    Py_ssize_t *spans = PyMem_New(Py_ssize_t, 2 * count + 1);
    uint8_t *matches = PyMem_New(uint8_t, count + 1);
    PyObject *result = NULL;
    if (spans == NULL || matches == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *batch = PyList_GET_ITEM(args[1], index);
        if (!PyArg_ParseTuple(batch, "nn", &spans[2 * index], &spans[2 * index + 1]))
            goto done;
        if (spans[2 * index] < 0 || spans[2 * index + 1] < HEADER_SIZE
            || spans[2 * index + 1] > buffer.len - spans[2 * index]) {
            PyErr_SetString(PyExc_ValueError, "crc_matches: a batch outside the buffer");
            goto done;
        }
    }
    const uint8_t *data = (const uint8_t *)buffer.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t index = 0; index < count; index++) {
        const uint8_t *batch = data + spans[2 * index];
        size_t covered = (size_t)(spans[2 * index + 1] - ATTRIBUTES_AT);
        matches[index] = be32u(batch + CRC_AT) == crc32c(0, batch + ATTRIBUTES_AT, covered);
    }
    Py_END_ALLOW_THREADS
    result = PyList_New(count);
    for (Py_ssize_t index = 0; result != NULL && index < count; index++)
        PyList_SET_ITEM(result, index, Py_NewRef(matches[index] ? Py_True : Py_False));
done:
    PyMem_Free(spans);
    PyMem_Free(matches);
    PyBuffer_Release(&buffer);
    return result;
}

static PyMethodDef methods[] = {
    {"walk_records", (PyCFunction)(void (*)(void))walk_records, METH_FASTCALL,
     walk_records_doc},
    {"scan_batches", (PyCFunction)(void (*)(void))scan_batches, METH_FASTCALL,
     scan_batches_doc},
    {"validate_batches", (PyCFunction)(void (*)(void))validate_batches, METH_FASTCALL,
     validate_batches_doc},
    {"whole_batches", (PyCFunction)(void (*)(void))whole_batches, METH_FASTCALL,
     whole_batches_doc},
    {"crc_matches", (PyCFunction)(void (*)(void))crc_matches, METH_FASTCALL, crc_matches_doc},
    {"crc32c", (PyCFunction)(void (*)(void))crc32c_function, METH_FASTCALL, crc32c_doc},
    {"crc32c_each", (PyCFunction)(void (*)(void))crc32c_each, METH_FASTCALL, crc32c_each_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_record_scan",
    "The batch and record checks of the append and recovery paths, in C (see log_validator.py).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__record_scan(void)
{
    crc32c_init();
    return PyModule_Create(&module);
}
