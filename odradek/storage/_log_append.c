/*
 * The Log's append in C: Log.append's common case (odradek.storage.log) in one call, done on
 * the log's own Python attributes.
 *
 * The two C calls of an append (the validation in _record_scan.c, the segment append in
 * _segment_append.c) and the write they make cost ~12 us for a 16 KB batch. The Python around
 * them (the validation's arguments, the active segment, the new log end offset and the
 * LogAppendInfo, each a call or an object of its own) cost ~1.7 us more: a tenth of the
 * append's time. Here those steps take a fraction of that, and they call the same two
 * functions, so the checks and the write are the ones the Python steps run.
 *
 * It reads and writes the attributes Log.append's Python steps use (listed in `names`), so the
 * log's state lives in one place. Anything but the common case is declined (None is returned)
 * before any state changes, and Log's Python steps then run the whole append again: a codec
 * other than the producer's, a validation the C call leaves to Python (it returns None where
 * the error message needs the Python checks), a request larger than segment.bytes, a segment
 * that must roll first, and every case _segment_append declines. Validation has no effects,
 * and the segment append declines before writing, so running them again is safe. Once the
 * records are written nothing declines: a failure after that (no memory) raises, as it would
 * in the Python steps.
 *
 * The caller holds the Log's lock, as the Python steps do.
 *
 * tests/test_log_append_native.py drives both paths with the same appends and compares what
 * each returns or raises and the log's state after each.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "python_values.h"

/* What the append calls and makes, imported once. */
static struct {
    PyObject *validate_batches, *try_append, *validation_result, *log_offset_metadata,
        *log_append_info, *max_write_bytes;
} bound;

/* Attribute names, interned once. */
static struct {
    PyObject *config, *next_offset_metadata, *segments, *snapshot, *high_watermark,
        *log_start_offset, *compression_type, *compact, *max_message_bytes,
        *timestamp_before_max_ms, *timestamp_after_max_ms, *log_append_time, *segment_bytes,
        *segment_ms, *base_offset, *log, *size;
} names;

/* The topic config values an append reads (new references), from log._config. */
typedef struct {
    PyObject *compact, *max_message_bytes, *timestamp_before_max_ms, *timestamp_after_max_ms,
        *log_append_time, *segment_bytes, *segment_ms;
} AppendConfig;

static void release_config(AppendConfig *config)
{
    Py_XDECREF(config->compact);
    Py_XDECREF(config->max_message_bytes);
    Py_XDECREF(config->timestamp_before_max_ms);
    Py_XDECREF(config->timestamp_after_max_ms);
    Py_XDECREF(config->log_append_time);
    Py_XDECREF(config->segment_bytes);
    Py_XDECREF(config->segment_ms);
}

/* DONE, DECLINE where the broker recompresses (compression.type other than "producer"), or
 * FAILED. */
static int read_config(PyObject *log, AppendConfig *config)
{
    PyObject *topic_config = PyObject_GetAttr(log, names.config);
    if (topic_config == NULL)
        return FAILED;
    int status = FAILED;
    PyObject *compression = PyObject_GetAttr(topic_config, names.compression_type);
    if (compression == NULL)
        goto done;
    int producer = PyUnicode_Check(compression)
                   && PyUnicode_CompareWithASCIIString(compression, "producer") == 0;
    Py_DECREF(compression);
    if (!producer) {
        status = DECLINE;
        goto done;
    }
    if ((config->compact = PyObject_GetAttr(topic_config, names.compact)) != NULL
        && (config->max_message_bytes = PyObject_GetAttr(topic_config, names.max_message_bytes))
               != NULL
        && (config->timestamp_before_max_ms
            = PyObject_GetAttr(topic_config, names.timestamp_before_max_ms))
               != NULL
        && (config->timestamp_after_max_ms
            = PyObject_GetAttr(topic_config, names.timestamp_after_max_ms))
               != NULL
        && (config->log_append_time = PyObject_GetAttr(topic_config, names.log_append_time))
               != NULL
        && (config->segment_bytes = PyObject_GetAttr(topic_config, names.segment_bytes)) != NULL
        && (config->segment_ms = PyObject_GetAttr(topic_config, names.segment_ms)) != NULL)
        status = DONE;
done:
    Py_DECREF(topic_config);
    return status;
}

/* validate_and_assign_offsets' C call: the ValidationResult (new reference), None (declined:
 * the Python steps give the error) or NULL. */
static PyObject *validate(PyObject *log, PyObject *records, PyObject *leader_epoch,
                          PyObject *now_ms, const AppendConfig *config)
{
    PyObject *log_end = PyObject_GetAttr(log, names.next_offset_metadata);
    if (log_end == NULL)
        return NULL;
    if (!PyTuple_Check(log_end) || PyTuple_GET_SIZE(log_end) < 1) {
        Py_DECREF(log_end);
        Py_RETURN_NONE;
    }
    PyObject *args[] = {records,
                        config->compact,
                        config->max_message_bytes,
                        now_ms,
                        config->timestamp_before_max_ms,
                        config->timestamp_after_max_ms,
                        config->log_append_time,
                        PyTuple_GET_ITEM(log_end, 0) /* the next offset */,
                        leader_epoch,
                        bound.validation_result};
    PyObject *validated = PyObject_Vectorcall(bound.validate_batches, args, 10, NULL);
    Py_DECREF(log_end);
    return validated;
}

/* The ValidationResult's fields the append reads (borrowed). */
enum {
    RECORDS,
    FIRST_OFFSET,
    LAST_OFFSET,
    MAX_TIMESTAMP,
    OFFSET_OF_MAX_TIMESTAMP,
    RECORD_COUNT,
    BATCH_COUNT,
    SIZE_IN_BYTES,
    VALIDATION_FIELDS = 9
};

/* log._segments.active_segment (a new reference), or None when the log has none. */
static PyObject *active_segment(PyObject *log)
{
    PyObject *segments = PyObject_GetAttr(log, names.segments);
    if (segments == NULL)
        return NULL;
    PyObject *snapshot = PyObject_GetAttr(segments, names.snapshot);
    Py_DECREF(segments);
    if (snapshot == NULL)
        return NULL;
    PyObject *segment = Py_None; /* (bases, by_base), as LogSegments.active_segment reads it */
    if (PyTuple_Check(snapshot) && PyTuple_GET_SIZE(snapshot) == 2) {
        PyObject *bases = PyTuple_GET_ITEM(snapshot, 0), *by_base = PyTuple_GET_ITEM(snapshot, 1);
        if (PyTuple_Check(bases) && PyTuple_GET_SIZE(bases) > 0 && PyDict_Check(by_base)) {
            segment = PyDict_GetItemWithError(by_base,
                                              PyTuple_GET_ITEM(bases, PyTuple_GET_SIZE(bases) - 1));
            if (segment == NULL && !PyErr_Occurred())
                segment = Py_None;
        }
    }
    Py_XINCREF(segment);
    Py_DECREF(snapshot);
    return segment;
}

/* A tuple subclass instance of `type` holding `items` (references stolen, NULL allowed: the
 * whole call then fails), as tuple.__new__(type, items) makes it. */
static PyObject *new_named_tuple(PyObject *type, PyObject **items, Py_ssize_t count)
{
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < count; i++)
        if (items[i] == NULL)
            goto done;
    result = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, count);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyTuple_SET_ITEM(result, i, items[i]);
        items[i] = NULL;
    }
done:
    for (Py_ssize_t i = 0; i < count; i++)
        Py_XDECREF(items[i]);
    return result;
}

/* Log._update_log_end_offset(last_offset + 1, segment): DONE or FAILED. */
static int update_log_end_offset(PyObject *log, PyObject *segment, int64_t end_offset)
{
    PyObject *file = PyObject_GetAttr(segment, names.log);
    if (file == NULL)
        return FAILED;
    PyObject *items[] = {PyLong_FromLongLong((long long)end_offset),
                         PyObject_GetAttr(segment, names.base_offset),
                         PyObject_GetAttr(file, names.size)};
    Py_DECREF(file);
    PyObject *log_end = new_named_tuple(bound.log_offset_metadata, items, 3);
    if (log_end == NULL)
        return FAILED;
    int status = PyObject_SetAttr(log, names.next_offset_metadata, log_end) < 0 ? FAILED : DONE;
    PyObject *high_watermark = status == DONE ? PyObject_GetAttr(log, names.high_watermark) : NULL;
    int64_t high_watermark_offset;
    if (high_watermark == NULL)
        status = FAILED;
    else if (!PyTuple_Check(high_watermark) || PyTuple_GET_SIZE(high_watermark) < 1
             || to_int64(PyTuple_GET_ITEM(high_watermark, 0), &high_watermark_offset) != DONE) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "log._high_watermark: not a LogOffsetMetadata");
        status = FAILED;
    } else if (high_watermark_offset >= end_offset
               && PyObject_SetAttr(log, names.high_watermark, log_end) < 0) {
        status = FAILED;
    }
    Py_XDECREF(high_watermark);
    Py_DECREF(log_end);
    return status;
}

/* The LogAppendInfo of the validated append. */
static PyObject *append_info(PyObject *log, PyObject *validated, PyObject *now_ms,
                             const AppendConfig *config)
{
    int log_append_time = PyObject_IsTrue(config->log_append_time);
    if (log_append_time < 0)
        return NULL;
    PyObject *items[] = {
        Py_NewRef(PyTuple_GET_ITEM(validated, FIRST_OFFSET)),
        Py_NewRef(PyTuple_GET_ITEM(validated, LAST_OFFSET)),
        Py_NewRef(PyTuple_GET_ITEM(validated, MAX_TIMESTAMP)),
        Py_NewRef(PyTuple_GET_ITEM(validated, OFFSET_OF_MAX_TIMESTAMP)),
        log_append_time ? Py_NewRef(now_ms) : PyLong_FromLong(-1), /* log_append_time_ms */
        PyObject_GetAttr(log, names.log_start_offset),
        Py_NewRef(PyTuple_GET_ITEM(validated, RECORD_COUNT)),
        Py_NewRef(PyTuple_GET_ITEM(validated, BATCH_COUNT)),
        Py_NewRef(PyTuple_GET_ITEM(validated, SIZE_IN_BYTES)), /* valid_bytes */
    };
    return new_named_tuple(bound.log_append_info, items, 9);
}

/* Write the validated records to the active segment unless it must roll: DONE (written),
 * DECLINE (nothing written) or FAILED. */
static int append_to_active_segment(PyObject *log, PyObject *validated, PyObject *now_ms,
                                    const AppendConfig *config, PyObject **segment)
{
    int64_t size_in_bytes, segment_bytes;
    int status;
    if ((status = to_int64(PyTuple_GET_ITEM(validated, SIZE_IN_BYTES), &size_in_bytes)) != DONE
        || (status = to_int64(config->segment_bytes, &segment_bytes)) != DONE)
        return status;
    if (size_in_bytes > segment_bytes)
        return DECLINE; /* RecordListTooLargeError, from the Python steps */
    if ((*segment = active_segment(log)) == NULL)
        return FAILED;
    if (*segment == Py_None)
        return DECLINE;
    PyObject *args[] = {*segment,
                        PyTuple_GET_ITEM(validated, LAST_OFFSET),
                        PyTuple_GET_ITEM(validated, MAX_TIMESTAMP),
                        PyTuple_GET_ITEM(validated, RECORDS),
                        now_ms,
                        config->segment_bytes,
                        config->segment_ms,
                        bound.max_write_bytes};
    PyObject *appended = PyObject_Vectorcall(bound.try_append, args, 8, NULL);
    if (appended == NULL)
        return FAILED;
    status = appended == Py_True ? DONE : DECLINE; /* False: roll first; None: Python decides */
    Py_DECREF(appended);
    return status;
}

/* The append once configured: the LogAppendInfo, None (declined) or NULL. */
static PyObject *append_with_config(PyObject *log, PyObject *records, PyObject *leader_epoch,
                                    PyObject *now_ms, const AppendConfig *config)
{
    PyObject *validated = validate(log, records, leader_epoch, now_ms, config);
    if (validated == NULL || validated == Py_None)
        return validated;
    PyObject *segment = NULL, *result = NULL;
    int64_t last_offset;
    int status = DECLINE;
    if (PyTuple_Check(validated) && PyTuple_GET_SIZE(validated) == VALIDATION_FIELDS)
        status = to_int64(PyTuple_GET_ITEM(validated, LAST_OFFSET), &last_offset);
    if (status == DONE)
        status = last_offset < INT64_MAX
                     ? append_to_active_segment(log, validated, now_ms, config, &segment)
                     : DECLINE;
    if (status == DONE && update_log_end_offset(log, segment, last_offset + 1) == DONE)
        result = append_info(log, validated, now_ms, config);
    else if (status == DECLINE)
        result = Py_NewRef(Py_None);
    Py_XDECREF(segment);
    Py_DECREF(validated);
    return result;
}

PyDoc_STRVAR(append_doc,
"append(log, records, leader_epoch, now_ms, /)\n--\n\n"
"Log.append's steps in one call, under the log's lock: the LogAppendInfo once the records\n"
"are validated, written and the log end moved, or None (nothing changed) where the Python\n"
"steps must run the append. Exceptions of the validation propagate as they are.");

static PyObject *append(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "append takes 4 arguments");
        return NULL;
    }
    AppendConfig config = {NULL};
    PyObject *result = NULL;
    int status = read_config(args[0], &config);
    if (status == DONE)
        result = append_with_config(args[0], args[1], args[2], args[3], &config);
    else if (status == DECLINE)
        result = Py_NewRef(Py_None);
    release_config(&config);
    return result;
}

static PyMethodDef methods[] = {
    {"append", (PyCFunction)(void (*)(void))append, METH_FASTCALL, append_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_log_append", "Log.append's common case, in C (see log.py).", -1,
    methods,
};

/* What `bound` holds, and where from. Without either C module the Python steps run: its
 * import fails, so this module's does, and log.py's with it falls back to them. */
static const struct {
    PyObject **slot;
    const char *module, *attribute;
} imports[] = {
    {&bound.validate_batches, "odradek.record._record_scan", "validate_batches"},
    {&bound.try_append, "odradek.storage._segment_append", "try_append"},
    {&bound.validation_result, "odradek.storage.log_validator", "ValidationResult"},
    {&bound.log_offset_metadata, "odradek.storage.log_offset_metadata", "LogOffsetMetadata"},
    {&bound.log_append_info, "odradek.storage.log_append_info", "LogAppendInfo"},
    {&bound.max_write_bytes, "odradek.storage.writeback", "MAX_WRITE_BYTES"},
};

static int import_bound(void)
{
    for (size_t i = 0; i < sizeof(imports) / sizeof(imports[0]); i++) {
        PyObject *imported = PyImport_ImportModule(imports[i].module);
        if (imported == NULL)
            return -1;
        *imports[i].slot = PyObject_GetAttrString(imported, imports[i].attribute);
        Py_DECREF(imported);
        if (*imports[i].slot == NULL)
            return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__log_append(void)
{
    static const InternedName table[] = {
        {&names.config, "_config"},
        {&names.next_offset_metadata, "_next_offset_metadata"},
        {&names.segments, "_segments"},
        {&names.snapshot, "_snapshot"},
        {&names.high_watermark, "_high_watermark"},
        {&names.log_start_offset, "_log_start_offset"},
        {&names.compression_type, "compression_type"},
        {&names.compact, "compact"},
        {&names.max_message_bytes, "max_message_bytes"},
        {&names.timestamp_before_max_ms, "message_timestamp_before_max_ms"},
        {&names.timestamp_after_max_ms, "message_timestamp_after_max_ms"},
        {&names.log_append_time, "log_append_time"},
        {&names.segment_bytes, "segment_bytes"},
        {&names.segment_ms, "segment_ms"},
        {&names.base_offset, "base_offset"},
        {&names.log, "log"},
        {&names.size, "_size"},
        {NULL, NULL},
    };
    if (intern_names(table) < 0 || import_bound() < 0)
        return NULL;
    return PyModule_Create(&module);
}
