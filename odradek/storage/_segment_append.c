/*
 * The Log's append to its active segment in C: LogSegment.try_append (the roll check, then the
 * write and its sparse index entries, odradek.storage.log_segment) in one call, done on the
 * segment's own Python attributes.
 *
 * An append of a 16 KB batch writes it in ~10 us and validates it (in C) in ~2 us. The Python
 * around those two calls (the roll check, the write's bookkeeping, one entry in each index and
 * the segment's counters) cost ~4 us more through a dozen method calls, so that the append ran
 * at half the speed of a raw write. Here the same steps take ~0.5 us.
 *
 * It reads and writes the attributes the Python methods use (listed in `names`), so the
 * segment's state lives in one place and either path may run next. Anything but the common
 * case is declined (None is returned) before any state changes, and the Python steps then run
 * and decide: the first append to a segment, indexes not yet opened, an index's last entry not
 * cached, values out of int64, a failed or short write, and every case where the Python steps
 * raise. A declined append may have written bytes past the file's size; no reader looks there,
 * and the Python steps write the same bytes at the same position.
 *
 * No index lock is taken. The state is read and the index entries planned before the
 * write(2), which runs without the GIL; nothing read can change meanwhile, since every other
 * change to the active segment (truncate, resize, trim, close) runs under the Log's lock, as
 * appends do, and readers only fill caches an append requires filled. The GIL is then held
 * from the first write of state to the last: readers see the size and the entry count before
 * or after an append, never an entry half written.
 *
 * tests/test_segment_append_native.py drives both paths with the same appends and compares
 * the verdicts, the files, the index entries and the segment's counters after each.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "kafka_format.h"
#include "python_values.h"

#define INDEXED_HEADER_BYTES (MAX_TIMESTAMP_AT + 8) /* what indexing a batch reads */
#define MAX_PLANNED_ENTRIES 32 /* more in one append (many small batches): Python does it */
#define OFFSET_ENTRY_SIZE 8    /* relative offset int32, position int32 */
#define TIME_ENTRY_SIZE 12     /* timestamp int64, relative offset int32 */

/* Attribute names, interned once. */
static struct {
    PyObject *log, *checked_indexes, *base_offset, *index_interval_bytes,
        *bytes_since_last_index_entry, *max_timestamp_and_offset,
        *rolling_based_timestamp, *created_ms, *roll_jitter_ms, *fd, *size, *mmap, *entries,
        *max_entries, *last, *index_base_offset;
} names;

static int set_int64(PyObject *owner, PyObject *name, int64_t value)
{
    PyObject *number = PyLong_FromLongLong((long long)value);
    if (number == NULL)
        return FAILED;
    int status = PyObject_SetAttr(owner, name, number) < 0 ? FAILED : DONE;
    Py_DECREF(number);
    return status;
}

static int set_pair(PyObject *owner, PyObject *name, int64_t first, int64_t second)
{
    PyObject *pair = Py_BuildValue("(LL)", (long long)first, (long long)second);
    if (pair == NULL)
        return FAILED;
    int status = PyObject_SetAttr(owner, name, pair) < 0 ? FAILED : DONE;
    Py_DECREF(pair);
    return status;
}

/* getattr(owner, name) as a pair of int64 (a 2-tuple of ints): DONE, DECLINE when it is
 * anything else (None: not yet known), FAILED with an exception set. */
static int get_pair(PyObject *owner, PyObject *name, int64_t *first, int64_t *second)
{
    PyObject *pair = PyObject_GetAttr(owner, name);
    if (pair == NULL)
        return FAILED;
    int status = DECLINE;
    if (PyTuple_CheckExact(pair) && PyTuple_GET_SIZE(pair) == 2
        && (status = to_int64(PyTuple_GET_ITEM(pair, 0), first)) == DONE)
        status = to_int64(PyTuple_GET_ITEM(pair, 1), second);
    Py_DECREF(pair);
    return status;
}

static int is_int32(int64_t value) { return value >= 0 && value <= INT32_MAX; }

/* One index as an append sees it (AbstractIndex's attributes). `last` is the cached last
 * entry's stored fields; has_last is 0 for an empty index. */
typedef struct {
    PyObject *index; /* borrowed from the segment's _checked_indexes */
    PyObject *map;   /* a new reference, or NULL */
    int64_t base_offset, entries, max_entries, last_first, last_second;
    int has_last;
} IndexState;

/* All a roll check and an append read: the entries and room, the base offset, the map (None
 * once closed: DECLINE) and the last entry. */
static int read_index(PyObject *index, IndexState *state)
{
    int status;
    state->index = index;
    if ((status = get_int64(index, names.entries, &state->entries)) != DONE
        || (status = get_int64(index, names.max_entries, &state->max_entries)) != DONE
        || (status = get_int64(index, names.index_base_offset, &state->base_offset)) != DONE)
        return status;
    state->map = PyObject_GetAttr(index, names.mmap);
    if (state->map == NULL)
        return FAILED;
    if (state->map == Py_None)
        return DECLINE;
    state->has_last = state->entries > 0;
    if (!state->has_last)
        return DONE;
    /* None when not cached: the Python path reads it from the file, and caches it */
    return get_pair(index, names.last, &state->last_first, &state->last_second);
}

/* The entries one append adds, decided before any is written. */
typedef struct {
    int64_t first, second;
} Entry;

typedef struct {
    Entry offsets[MAX_PLANNED_ENTRIES], times[MAX_PLANNED_ENTRIES];
    int offset_count, time_count;
    /* the segment's counters after the append, and as they were read (only a change is set) */
    int64_t bytes_since_last_index_entry, max_timestamp, offset_of_max_timestamp;
    int64_t read_bytes_since_last_index_entry, read_max_timestamp;
} Plan;

/* Add the entry (first, second) to `entries` and make it the index's last one. */
static void add_planned_entry(IndexState *index, Entry *entries, int *count, int64_t first,
                              int64_t second)
{
    entries[(*count)++] = (Entry){first, second};
    index->entries++;
    index->has_last = 1;
    index->last_first = first;
    index->last_second = second;
}

/* OffsetIndex.append(offset, position), planned: DECLINE wherever the Python one raises. */
static int plan_offset_entry(IndexState *index, Plan *plan, int64_t offset, int64_t position)
{
    int64_t relative = offset - index->base_offset;
    if ((index->has_last && relative <= index->last_first) || !is_int32(position)
        || !is_int32(relative) || index->entries >= index->max_entries
        || plan->offset_count == MAX_PLANNED_ENTRIES)
        return DECLINE;
    add_planned_entry(index, plan->offsets, &plan->offset_count, relative, position);
    return DONE;
}

/* TimeIndex.maybe_append(timestamp, offset), planned: DECLINE wherever the Python one raises. */
static int plan_time_entry(IndexState *index, Plan *plan, int64_t timestamp, int64_t offset)
{
    int64_t relative = offset - index->base_offset;
    if (index->has_last && timestamp == index->last_first && relative >= index->last_second)
        return DONE; /* the segment's max timestamp has not grown */
    if (index->entries >= index->max_entries - 1)
        return DECLINE; /* full: TimeIndex.is_full keeps the last slot for a roll */
    if (!index->has_last) {
        if (timestamp < 0)
            return DONE;
    } else if (relative < index->last_second || timestamp < index->last_first) {
        return DECLINE;
    } else if (timestamp == index->last_first) {
        return DONE;
    }
    if (!is_int32(relative) || plan->time_count == MAX_PLANNED_ENTRIES)
        return DECLINE;
    add_planned_entry(index, plan->times, &plan->time_count, timestamp, relative);
    return DONE;
}

/* LogSegment._index_batches, planned: the index entries for the batches of data[0:total]
 * written at `position`, and the segment's counters after them. */
static int plan_index_entries(const uint8_t *data, Py_ssize_t total, int64_t position,
                              int64_t index_interval_bytes, IndexState *offset_index,
                              IndexState *time_index, Plan *plan)
{
    for (Py_ssize_t at = 0; at < total;) {
        if (total - at < INDEXED_HEADER_BYTES)
            return DECLINE;
        const uint8_t *batch = data + at;
        int64_t size = (int64_t)be32(batch + BATCH_LENGTH_AT) + LOG_OVERHEAD;
        int64_t last_offset;
        if (size <= LOG_OVERHEAD || size > total - at
            || __builtin_add_overflow(be64(batch), (int64_t)be32(batch + LAST_OFFSET_DELTA_AT),
                                      &last_offset))
            return DECLINE;
        int64_t max_timestamp = be64(batch + MAX_TIMESTAMP_AT);
        if (max_timestamp > plan->max_timestamp) {
            plan->max_timestamp = max_timestamp;
            plan->offset_of_max_timestamp = last_offset;
        }
        if (plan->bytes_since_last_index_entry > index_interval_bytes) {
            if (plan_offset_entry(offset_index, plan, last_offset, position + at) != DONE
                || plan_time_entry(time_index, plan, plan->max_timestamp,
                                   plan->offset_of_max_timestamp)
                       != DONE)
                return DECLINE;
            plan->bytes_since_last_index_entry = 0;
        }
        plan->bytes_since_last_index_entry += size;
        at += size;
    }
    return DONE;
}

/* Write the planned entries into the index's map and move its count and cached last entry. */
static int commit_entries(IndexState *index, const Entry *entries, int count, int is_time_index)
{
    if (count == 0)
        return DONE;
    Py_ssize_t entry_size = is_time_index ? TIME_ENTRY_SIZE : OFFSET_ENTRY_SIZE;
    int64_t first_slot = index->entries - count;
    Py_buffer buffer; /* fails if the map was closed meanwhile, which the Log's lock prevents */
    if (PyObject_GetBuffer(index->map, &buffer, PyBUF_WRITABLE) < 0)
        return FAILED;
    if (buffer.len < (first_slot + count) * entry_size) {
        PyBuffer_Release(&buffer);
        PyErr_Format(PyExc_ValueError, "index map of %zd bytes has no room for entry %lld",
                     buffer.len, (long long)(first_slot + count - 1));
        return FAILED;
    }
    for (int i = 0; i < count; i++) {
        uint8_t *slot = (uint8_t *)buffer.buf + (first_slot + i) * entry_size;
        if (is_time_index) {
            put_be64(slot, (uint64_t)entries[i].first);
            put_be32(slot + 8, (uint32_t)entries[i].second);
        } else {
            put_be32(slot, (uint32_t)entries[i].first);
            put_be32(slot + 4, (uint32_t)entries[i].second);
        }
    }
    PyBuffer_Release(&buffer);
    if (set_int64(index->index, names.entries, index->entries) != DONE)
        return FAILED;
    return set_pair(index->index, names.last, index->last_first, index->last_second);
}

/* The segment's two indexes, once opened and checked (LogSegment._checked_indexes). */
static int read_indexes(PyObject *segment, IndexState *offset_index, IndexState *time_index)
{
    PyObject *indexes = PyObject_GetAttr(segment, names.checked_indexes);
    if (indexes == NULL)
        return FAILED;
    int status = DECLINE;
    if (PyTuple_CheckExact(indexes) && PyTuple_GET_SIZE(indexes) == 2) {
        status = read_index(PyTuple_GET_ITEM(indexes, 0), offset_index);
        if (status == DONE)
            status = read_index(PyTuple_GET_ITEM(indexes, 1), time_index);
    }
    Py_DECREF(indexes); /* the segment keeps the tuple, and so the indexes, alive */
    return status;
}

static PyObject *verdict(int status, PyObject *done)
{
    if (status == FAILED)
        return NULL;
    if (status == DECLINE)
        Py_RETURN_NONE;
    return Py_NewRef(done);
}

/* LogSegment.should_roll for an append of `messages_size` bytes up to `max_offset` and
 * `max_timestamp` at `now_ms`, on a segment of `size` bytes (more than 0) whose indexes were
 * read. The age is record time, as LogSegment.time_waited_for_roll says why. */
static int must_roll(PyObject *segment, int64_t size, int64_t base_offset,
                     const IndexState *offset_index, const IndexState *time_index,
                     int64_t messages_size, int64_t max_offset, int64_t max_timestamp,
                     int64_t now_ms, int64_t segment_bytes, int64_t segment_ms, int *roll)
{
    int64_t rolling_based_timestamp, since, until, jitter, waited;
    int status;
    *roll = 1;
    if (size > segment_bytes - messages_size)
        return DONE;
    if ((status = get_int64(segment, names.rolling_based_timestamp, &rolling_based_timestamp))
            != DONE
        || (status = get_int64(segment, names.roll_jitter_ms, &jitter)) != DONE)
        return status; /* None: the Python path reads it from the first batch */
    if (rolling_based_timestamp >= 0)
        since = rolling_based_timestamp, until = max_timestamp;
    else if ((status = get_int64(segment, names.created_ms, &since)) == DONE)
        until = now_ms;
    else
        return status;
    if (__builtin_sub_overflow(until, since, &waited))
        return DECLINE;
    *roll = waited > segment_ms - jitter || offset_index->entries >= offset_index->max_entries
            || time_index->entries >= time_index->max_entries - 1 /* TimeIndex.is_full */
            || !is_int32(max_offset - base_offset);
    return DONE;
}

/* The segment's counters, and the entries an append of data[0:total] at `position` adds,
 * planned before the write. */
static int plan_append(PyObject *segment, const uint8_t *data, Py_ssize_t total,
                       int64_t position, IndexState *offset_index, IndexState *time_index,
                       Plan *plan)
{
    int64_t index_interval_bytes;
    int status;
    if ((status = get_int64(segment, names.index_interval_bytes, &index_interval_bytes)) != DONE
        || (status = get_int64(segment, names.bytes_since_last_index_entry,
                               &plan->bytes_since_last_index_entry))
               != DONE
        || (status = get_pair(segment, names.max_timestamp_and_offset, &plan->max_timestamp,
                              &plan->offset_of_max_timestamp))
               != DONE)
        return status;
    plan->read_bytes_since_last_index_entry = plan->bytes_since_last_index_entry;
    plan->read_max_timestamp = plan->max_timestamp;
    return plan_index_entries(data, total, position, index_interval_bytes, offset_index,
                              time_index, plan);
}

/* pwrite(2) of the whole buffer without the GIL: DONE, or DECLINE on an error or a short
 * write (the Python path then writes again, and truncates and raises on an error). */
static int write_at(int fd, const uint8_t *data, Py_ssize_t total, int64_t position)
{
    ssize_t written;
    Py_BEGIN_ALLOW_THREADS
    do {
        written = pwrite(fd, data, (size_t)total, (off_t)position);
    } while (written < 0 && errno == EINTR);
    Py_END_ALLOW_THREADS
    return written == total ? DONE : DECLINE;
}

/* set_int64 where the value changed. */
static int update_int64(PyObject *owner, PyObject *name, int64_t read, int64_t value)
{
    return read == value ? DONE : set_int64(owner, name, value);
}

static int commit_append(PyObject *segment, PyObject *log, int64_t new_size,
                         IndexState *offset_index, IndexState *time_index, const Plan *plan)
{
    if (set_int64(log, names.size, new_size) != DONE
        || commit_entries(offset_index, plan->offsets, plan->offset_count, 0) != DONE
        || commit_entries(time_index, plan->times, plan->time_count, 1) != DONE
        || update_int64(segment, names.bytes_since_last_index_entry,
                        plan->read_bytes_since_last_index_entry,
                        plan->bytes_since_last_index_entry)
               != DONE
        || (plan->max_timestamp != plan->read_max_timestamp
            && set_pair(segment, names.max_timestamp_and_offset, plan->max_timestamp,
                        plan->offset_of_max_timestamp)
                   != DONE))
        return FAILED;
    return DONE;
}

/* Arguments after the segment and the records, as try_append's docstring lists them. */
typedef struct {
    int64_t largest_offset, largest_timestamp, now_ms, segment_bytes, segment_ms,
        max_write_bytes;
} AppendArguments;

/* The roll check, then the append unless the segment (of `size` bytes) must roll:
 * *appended says which. */
static int roll_check_and_append(PyObject *segment, PyObject *log, int64_t size,
                                 const Py_buffer *records, const AppendArguments *arguments,
                                 IndexState *offset_index, IndexState *time_index,
                                 int *appended)
{
    int64_t base_offset, fd;
    int roll, status;
    if ((status = get_int64(segment, names.base_offset, &base_offset)) != DONE
        || (status = read_indexes(segment, offset_index, time_index)) != DONE
        || (status = must_roll(segment, size, base_offset, offset_index, time_index,
                               records->len, arguments->largest_offset,
                               arguments->largest_timestamp, arguments->now_ms,
                               arguments->segment_bytes, arguments->segment_ms, &roll))
               != DONE)
        return status;
    *appended = !roll;
    if (roll)
        return DONE;
    const uint8_t *data = (const uint8_t *)records->buf;
    Plan plan = {.offset_count = 0, .time_count = 0};
    if ((status = plan_append(segment, data, records->len, size, offset_index, time_index,
                              &plan))
            != DONE
        || (status = get_int64(log, names.fd, &fd)) != DONE)
        return status;
    if (fd < 0 || fd > INT32_MAX)
        return DECLINE; /* closed */
    if ((status = write_at((int)fd, data, records->len, size)) != DONE)
        return status;
    return commit_append(segment, log, size + records->len, offset_index, time_index, &plan);
}

static int try_append_status(PyObject *segment, PyObject *log, const Py_buffer *records,
                             const AppendArguments *arguments, int *appended)
{
    int64_t size;
    int status = get_int64(log, names.size, &size);
    if (status != DONE)
        return status;
    if (size == 0 || records->len == 0 || records->len > arguments->max_write_bytes)
        return DECLINE; /* a segment's first batch also sets its rolling timestamp */
    IndexState offset_index = {.map = NULL}, time_index = {.map = NULL};
    status = roll_check_and_append(segment, log, size, records, arguments, &offset_index,
                                   &time_index, appended);
    Py_XDECREF(offset_index.map);
    Py_XDECREF(time_index.map);
    return status;
}

PyDoc_STRVAR(try_append_doc,
"try_append(segment, largest_offset, largest_timestamp, records, now_ms, segment_bytes,\n"
"           segment_ms, max_write_bytes, /)\n--\n\n"
"LogSegment.try_append of the segment in one call: False when it must roll first (nothing\n"
"written), True once the records are written and indexed in one write(2), or None (nothing\n"
"changed) where the Python method must decide.");

static PyObject *try_append(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "try_append takes 8 arguments");
        return NULL;
    }
    AppendArguments arguments;
    int64_t *targets[] = {&arguments.largest_offset, &arguments.largest_timestamp,
                          &arguments.now_ms,         &arguments.segment_bytes,
                          &arguments.segment_ms,     &arguments.max_write_bytes};
    PyObject *sources[] = {args[1], args[2], args[4], args[5], args[6], args[7]};
    int status = DONE, appended = 0;
    for (int i = 0; i < 6 && status == DONE; i++)
        status = to_int64(sources[i], targets[i]);
    if (status != DONE)
        return verdict(status, Py_None);
    Py_buffer records;
    if (PyObject_GetBuffer(args[3], &records, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *log = PyObject_GetAttr(args[0], names.log);
    status = log == NULL ? FAILED : try_append_status(args[0], log, &records, &arguments, &appended);
    Py_XDECREF(log);
    PyBuffer_Release(&records);
    return verdict(status, appended ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"try_append", (PyCFunction)(void (*)(void))try_append, METH_FASTCALL, try_append_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_segment_append",
    "The active segment's roll check and append, in C (see log_segment.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__segment_append(void)
{
    static const InternedName table[] = {
        {&names.log, "log"},
        {&names.checked_indexes, "_checked_indexes"},
        {&names.base_offset, "base_offset"},
        {&names.index_interval_bytes, "index_interval_bytes"},
        {&names.bytes_since_last_index_entry, "_bytes_since_last_index_entry"},
        {&names.max_timestamp_and_offset, "_max_timestamp_and_offset"},
        {&names.rolling_based_timestamp, "_rolling_based_timestamp"},
        {&names.created_ms, "_created_ms"},
        {&names.roll_jitter_ms, "roll_jitter_ms"},
        {&names.fd, "_fd"},
        {&names.size, "_size"},
        {&names.mmap, "_mmap"},
        {&names.entries, "_entries"},
        {&names.max_entries, "_max_entries"},
        {&names.last, "_last"},
        {&names.index_base_offset, "_base_offset"},
        {NULL, NULL},
    };
    if (intern_names(table) < 0)
        return NULL;
    return PyModule_Create(&module);
}
