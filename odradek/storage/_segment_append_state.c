/* SegmentAppendState: the active segment's append state, owned by a C type (docs/native.md).
 *
 * The type holds the .log file's descriptor and size, the bytes since the last index entry, the
 * segment's max timestamp and its offset, the roll check's inputs, and for each index a buffer
 * on its map, its entry count, room and last entry. An append (roll check, write, index
 * entries) is one call. Python reads these facts through the type's getters and gets the
 * buffers back with release(). It takes numbers and buffers as arguments and touches no
 * Python object's attributes; of the producer table append_batch may be given, it calls the
 * public try_next and commit_next only. segment_append_state.py is its twin and oracle.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "batch_validation.h"
#include "kafka_format.h"

#define INT32_MAX_VALUE 2147483647LL
#define OFFSET_ENTRY_SIZE 8
#define TIME_ENTRY_SIZE 12

typedef struct {
    PyObject_HEAD
    int fd;
    int released;
    int busy; /* a write is running without the GIL */
    long long size;
    long long base_offset;
    long long interval;
    long long since_last_entry;
    long long max_timestamp;
    long long offset_of_max_timestamp;
    int time_indexed;
    Py_buffer offset_map;
    int has_offset_map;
    long long offset_entries;
    long long offset_max_entries;
    long long offset_last_relative;
    long long offset_last_position;
    Py_buffer time_map;
    int has_time_map;
    long long time_entries;
    long long time_max_entries;
    long long time_last_timestamp;
    long long time_last_relative;
    int has_rolling;
    long long rolling_based_timestamp;
    long long created_ms;
    long long roll_jitter_ms;
    long long max_write_bytes;
    PyObject *map_indexes; /* () -> (offset index map, time index map): maps them again */
    unsigned long long map_releases; /* release_maps calls, so ensure_maps sees one racing it */
    int drop_maps;                   /* the buffers serve the running append only */
} State;

/* How many times ensure_maps maps the indexes again when release_maps keeps racing it. */
#define MAP_ATTEMPTS 3

typedef struct {
    Py_ssize_t position;
    Py_ssize_t size;
    long long last_offset;
    long long max_timestamp;
} Batch;

static void release_buffers(State *self)
{
    if (self->has_offset_map) {
        PyBuffer_Release(&self->offset_map);
        self->has_offset_map = 0;
    }
    if (self->has_time_map) {
        PyBuffer_Release(&self->time_map);
        self->has_time_map = 0;
    }
}

/* A last entry given as None or a pair of ints. */
static int parse_last(PyObject *last, long long *first, long long *second, long long entries,
                      const char *which)
{
    if (last == Py_None) {
        if (entries > 0) {
            PyErr_Format(PyExc_ValueError, "the %s index has entries but no last entry", which);
            return -1;
        }
        *first = 0;
        *second = 0;
        return 0;
    }
    if (entries <= 0) {
        PyErr_Format(PyExc_ValueError, "the %s index has a last entry but no entries", which);
        return -1;
    }
    if (!PyArg_ParseTuple(last, "LL", first, second))
        return -1;
    return 0;
}

/* A buffer on an index map (None: an empty file, which has room for nothing). */
static int get_map(PyObject *map, Py_buffer *buffer, int *has, long long max_entries,
                   long long entry_size, const char *which)
{
    if (map == Py_None) {
        if (max_entries > 0) {
            PyErr_Format(PyExc_ValueError, "the %s index has room but no map", which);
            return -1;
        }
        return 0;
    }
    if (PyObject_GetBuffer(map, buffer, PyBUF_WRITABLE) < 0)
        return -1;
    if (buffer->len / entry_size < max_entries) {
        PyBuffer_Release(buffer);
        PyErr_Format(PyExc_ValueError, "the %s index map is smaller than its room", which);
        return -1;
    }
    *has = 1;
    return 0;
}

/* Buffers on the maps the callback returned (one index may already have its buffer). */
static int take_maps(State *self, PyObject *maps)
{
    PyObject *offset_map, *time_map;
    if (!PyArg_ParseTuple(maps, "OO:map_indexes", &offset_map, &time_map))
        return -1;
    if (self->released) {
        PyErr_SetString(PyExc_ValueError, "the segment's append state was released");
        return -1;
    }
    if (!self->has_offset_map && get_map(offset_map, &self->offset_map, &self->has_offset_map,
                                         self->offset_max_entries, OFFSET_ENTRY_SIZE,
                                         "offset") < 0)
        return -1;
    if (!self->has_time_map && get_map(time_map, &self->time_map, &self->has_time_map,
                                       self->time_max_entries, TIME_ENTRY_SIZE, "time") < 0)
        return -1;
    return 0;
}

/* Buffers on both index maps, mapped again by the callback when the idle file cache dropped
 * them (release_maps). The callback runs Python: the cache may evict an index while it runs,
 * after its map was taken, and its release_maps then finds no buffer to give back. Buffers
 * taken on such a map would outlive the cache's hold on it, so they are given back and the
 * indexes mapped again (which puts them back in the cache). Past MAP_ATTEMPTS the buffers
 * serve the running append and are given back at its end. */
static int ensure_maps(State *self)
{
    if (self->has_offset_map && self->has_time_map)
        return 0;
    for (int attempt = 1;; attempt++) {
        unsigned long long releases = self->map_releases;
        PyObject *maps = PyObject_CallNoArgs(self->map_indexes);
        if (maps == NULL)
            return -1;
        int result = take_maps(self, maps);
        Py_DECREF(maps);
        if (result < 0)
            return -1;
        if (self->map_releases == releases)
            return 0;
        if (attempt >= MAP_ATTEMPTS) {
            self->drop_maps = 1;
            return 0;
        }
        release_buffers(self);
    }
}

static int State_init(State *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"fd",
                               "size",
                               "base_offset",
                               "index_interval_bytes",
                               "bytes_since_last_index_entry",
                               "max_timestamp",
                               "offset_of_max_timestamp",
                               "offset_entries",
                               "offset_max_entries",
                               "offset_last",
                               "time_entries",
                               "time_max_entries",
                               "time_last",
                               "rolling_based_timestamp",
                               "created_ms",
                               "roll_jitter_ms",
                               "max_write_bytes",
                               "map_indexes",
                               NULL};
    PyObject *offset_last, *time_last, *rolling, *map_indexes;
    if (self->map_indexes != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the append state is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "$iLLLLLLLLOLLOOLLLO", keywords, &self->fd, &self->size,
            &self->base_offset, &self->interval, &self->since_last_entry, &self->max_timestamp,
            &self->offset_of_max_timestamp, &self->offset_entries, &self->offset_max_entries,
            &offset_last, &self->time_entries, &self->time_max_entries, &time_last, &rolling,
            &self->created_ms, &self->roll_jitter_ms, &self->max_write_bytes, &map_indexes))
        return -1;
    if (!PyCallable_Check(map_indexes)) {
        PyErr_SetString(PyExc_TypeError, "map_indexes must be callable");
        return -1;
    }
    if (self->size < 0 || self->offset_entries < 0 || self->time_entries < 0 ||
        self->max_write_bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "negative size or entry count, or no write size");
        return -1;
    }
    if (parse_last(offset_last, &self->offset_last_relative, &self->offset_last_position,
                   self->offset_entries, "offset") < 0 ||
        parse_last(time_last, &self->time_last_timestamp, &self->time_last_relative,
                   self->time_entries, "time") < 0)
        return -1;
    if (rolling == Py_None) {
        self->has_rolling = 0;
        self->rolling_based_timestamp = 0;
    } else {
        self->rolling_based_timestamp = PyLong_AsLongLong(rolling);
        if (self->rolling_based_timestamp == -1 && PyErr_Occurred())
            return -1;
        self->has_rolling = 1;
    }
    if (self->offset_entries > self->offset_max_entries ||
        self->time_entries > self->time_max_entries) {
        PyErr_SetString(PyExc_ValueError, "an index holds more entries than it has room for");
        return -1;
    }
    Py_INCREF(map_indexes);
    self->map_indexes = map_indexes;
    self->time_indexed = 0;
    self->released = 0;
    self->busy = 0;
    self->map_releases = 0;
    self->drop_maps = 0;
    return 0;
}

static int State_traverse(State *self, visitproc visit, void *arg)
{
    Py_VISIT(self->map_indexes);
    return 0;
}

static int State_clear(State *self)
{
    Py_CLEAR(self->map_indexes);
    return 0;
}

static void State_dealloc(State *self)
{
    PyObject_GC_UnTrack(self);
    release_buffers(self);
    State_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Each batch's place and the fields indexing reads; -1 with ValueError unless the bytes are
 * whole batches end to end. *batches is `few` (room for FEW_BATCHES) unless there are more,
 * then PyMem_Malloc'd (the caller frees it when it is not `few`): most appends are one batch,
 * and a heap allocation per append cost as much as the rest of the framing. */
#define FEW_BATCHES 8
static Py_ssize_t frame(const uint8_t *data, Py_ssize_t total, Batch *few, Batch **batches)
{
    Py_ssize_t capacity = FEW_BATCHES, count = 0, position = 0;
    Batch *list = few;
    while (position < total) {
        if (total - position < HEADER_SIZE) {
            PyErr_Format(PyExc_ValueError, "records do not frame: a partial batch header at %zd",
                         position);
            goto failed;
        }
        const uint8_t *header = data + position;
        long long size = (long long)be32(header + BATCH_LENGTH_AT) + LOG_OVERHEAD;
        if (size < HEADER_SIZE || size > total - position) {
            PyErr_Format(PyExc_ValueError, "records do not frame: batch length %lld at %zd",
                         size - LOG_OVERHEAD, position);
            goto failed;
        }
        if (count == capacity) {
            capacity *= 2;
            Batch *grown = PyMem_Malloc(capacity * sizeof(Batch));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto failed;
            }
            memcpy(grown, list, count * sizeof(Batch));
            if (list != few)
                PyMem_Free(list);
            list = grown;
        }
        /* Unsigned arithmetic: a corrupt base offset wraps as Python's ints would not, but
         * such a batch never passed validation. */
        list[count].position = position;
        list[count].size = (Py_ssize_t)size;
        list[count].last_offset =
            (long long)((uint64_t)be64(header) + (uint64_t)(int64_t)be32(header + LAST_OFFSET_DELTA_AT));
        list[count].max_timestamp = be64(header + MAX_TIMESTAMP_AT);
        count++;
        position += (Py_ssize_t)size;
    }
    *batches = list;
    return count;
failed:
    if (list != few)
        PyMem_Free(list);
    return -1;
}

/* The write of all of data at position, or none of it (a failure cuts the file back); 0, or
 * -1 with errno set. Runs without the GIL. */
static int write_all(int fd, const uint8_t *data, Py_ssize_t total, long long position,
                     long long max_write, int through)
{
    Py_ssize_t written = 0;
    if (total <= max_write && !through) {
        ssize_t count = pwrite(fd, data, (size_t)total, (off_t)position);
        if (count < 0)
            goto failed;
        written = count;
    }
    while (written < total) {
        Py_ssize_t piece = total - written < max_write ? total - written : (Py_ssize_t)max_write;
        ssize_t count = pwrite(fd, data + written, (size_t)piece, (off_t)(position + written));
        if (count < 0)
            goto failed;
        if (count == 0) {
            errno = ENOSPC;
            goto failed;
        }
#ifdef SYNC_FILE_RANGE_WRITE
        if (through && sync_file_range(fd, (off_t)(position + written), (off_t)count,
                                       SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                           SYNC_FILE_RANGE_WAIT_AFTER) != 0)
            goto failed;
#endif
        written += count;
    }
    return 0;
failed : {
    int saved = errno;
    if (ftruncate(fd, (off_t)position) != 0) {
        /* the original error is the one to report */
    }
    errno = saved;
    return -1;
}
}

static int append_offset_entry(State *self, long long offset, long long position)
{
    long long relative = offset - self->base_offset;
    if (self->offset_entries > 0 && relative <= self->offset_last_relative) {
        PyErr_Format(PyExc_ValueError, "offset index entry %lld is not above the last one", offset);
        return -1;
    }
    if (position < 0 || position > INT32_MAX_VALUE || relative < 0 || relative > INT32_MAX_VALUE) {
        PyErr_Format(PyExc_ValueError, "offset index entry (%lld, %lld) does not fit int32", offset,
                     position);
        return -1;
    }
    if (self->offset_entries >= self->offset_max_entries || !self->has_offset_map) {
        PyErr_SetString(PyExc_ValueError, "the offset index is full");
        return -1;
    }
    uint8_t *slot = (uint8_t *)self->offset_map.buf + self->offset_entries * OFFSET_ENTRY_SIZE;
    put_be32(slot, (uint32_t)relative);
    put_be32(slot + 4, (uint32_t)position);
    self->offset_entries++;
    self->offset_last_relative = relative;
    self->offset_last_position = position;
    return 0;
}

/* TimeIndex.maybe_append's rule: only a timestamp above the last entry's is added. */
static int maybe_append_time_entry(State *self, long long timestamp, long long offset)
{
    long long relative = offset - self->base_offset;
    int has_last = self->time_entries > 0;
    if (has_last && timestamp == self->time_last_timestamp && relative >= self->time_last_relative)
        return 0;
    if (self->time_entries >= self->time_max_entries - 1 || !self->has_time_map) {
        PyErr_SetString(PyExc_ValueError, "the time index is full");
        return -1;
    }
    if (!has_last) {
        if (timestamp <= -1)
            return 0;
    } else {
        if (relative < self->time_last_relative || timestamp < self->time_last_timestamp) {
            PyErr_Format(PyExc_ValueError, "time index entry (%lld, %lld) is below the last",
                         timestamp, offset);
            return -1;
        }
        if (timestamp == self->time_last_timestamp)
            return 0;
    }
    if (relative < 0 || relative > INT32_MAX_VALUE) {
        PyErr_Format(PyExc_ValueError, "time index entry offset %lld does not fit int32", offset);
        return -1;
    }
    uint8_t *slot = (uint8_t *)self->time_map.buf + self->time_entries * TIME_ENTRY_SIZE;
    put_be64(slot, (uint64_t)timestamp);
    put_be32(slot + 8, (uint32_t)relative);
    self->time_entries++;
    self->time_last_timestamp = timestamp;
    self->time_last_relative = relative;
    return 0;
}

/* The write and the index entries of an append; the caller checked it is not released. */
/* At the end of an append: give back buffers ensure_maps took on maps evicted meanwhile. */
static void drop_maps_if_due(State *self)
{
    if (self->drop_maps) {
        self->drop_maps = 0;
        release_buffers(self);
    }
}

static void free_batches(Batch *batches, Batch *few)
{
    if (batches != few)
        PyMem_Free(batches);
}

static int do_append(State *self, const uint8_t *data, Py_ssize_t length, int through)
{
    Batch few[FEW_BATCHES], *batches = NULL;
    Py_ssize_t count = frame(data, length, few, &batches);
    if (count < 0)
        return -1;
    long long position = self->size;
    int failed, saved_errno = 0;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    failed = write_all(self->fd, data, length, position, self->max_write_bytes, through);
    if (failed)
        saved_errno = errno;
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (failed) {
        free_batches(batches, few);
        errno = saved_errno;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    self->size = position + length;
    if (position == 0)
        self->rolling_based_timestamp = batches[0].max_timestamp, self->has_rolling = 1;
    long long since_last_entry = self->since_last_entry;
    for (Py_ssize_t i = 0; i < count; i++) {
        Batch *batch = &batches[i];
        if (batch->max_timestamp > self->max_timestamp) {
            self->max_timestamp = batch->max_timestamp;
            self->offset_of_max_timestamp = batch->last_offset;
            self->time_indexed = 0;
        }
        if (since_last_entry > self->interval) {
            if (ensure_maps(self) < 0)
                goto failed;
            since_last_entry = 0;
            self->since_last_entry = 0;
            if (append_offset_entry(self, batch->last_offset, position + batch->position) < 0)
                goto failed;
            if (!self->time_indexed) {
                if (maybe_append_time_entry(self, self->max_timestamp,
                                            self->offset_of_max_timestamp) < 0)
                    goto failed;
                self->time_indexed = 1;
            }
        }
        since_last_entry += batch->size;
    }
    self->since_last_entry = since_last_entry;
    free_batches(batches, few);
    drop_maps_if_due(self);
    return 0;
failed:
    free_batches(batches, few);
    drop_maps_if_due(self);
    return -1;
}

static int check_usable(State *self)
{
    if (self->released || self->map_indexes == NULL) {
        PyErr_SetString(PyExc_ValueError, "the segment's append state was released");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the segment's append state is writing");
        return -1;
    }
    return 0;
}

/* The roll check (design §4 step 4): 1 when `length` more bytes ending at `largest_offset`
 * must go to a new segment: size (segment.bytes), age (segment.ms less the jitter, by record
 * time from the first batch's max timestamp, by the clock from the segment's creation when that
 * batch has none), a full index, or a relative offset overflow. */
static int must_roll(const State *self, Py_ssize_t length, long long largest_offset,
                     long long largest_timestamp, long long now_ms, long long segment_bytes,
                     long long segment_ms)
{
    long long size = self->size;
    long long waited = 0;
    if (size > 0) {
        waited = self->has_rolling && self->rolling_based_timestamp >= 0
                     ? largest_timestamp - self->rolling_based_timestamp
                     : now_ms - self->created_ms;
    }
    long long relative = largest_offset - self->base_offset;
    return size > segment_bytes - (long long)length ||
           (size > 0 && waited > segment_ms - self->roll_jitter_ms) ||
           self->offset_entries >= self->offset_max_entries ||
           self->time_entries >= self->time_max_entries - 1 || relative < 0 ||
           relative > INT32_MAX_VALUE;
}

static PyObject *State_try_append(State *self, PyObject *args)
{
    Py_buffer records;
    long long largest_offset, largest_timestamp, now_ms, segment_bytes, segment_ms;
    if (!PyArg_ParseTuple(args, "y*LLLLL:try_append", &records, &largest_offset,
                          &largest_timestamp, &now_ms, &segment_bytes, &segment_ms))
        return NULL;
    if (check_usable(self) < 0) {
        PyBuffer_Release(&records);
        return NULL;
    }
    if (must_roll(self, records.len, largest_offset, largest_timestamp, now_ms, segment_bytes,
                  segment_ms)) {
        PyBuffer_Release(&records);
        Py_RETURN_FALSE;
    }
    int result = records.len > 0 ? do_append(self, records.buf, records.len, 0) : 0;
    PyBuffer_Release(&records);
    if (result < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* A tuple of `type` (a tuple subclass such as a named tuple) holding `count` int64 values, as
 * tuple.__new__(type, values) makes it, without the class's Python __new__. */
static PyObject *new_tuple_of(PyTypeObject *type, const long long *values, Py_ssize_t count)
{
    PyObject *result = type->tp_alloc(type, count);
    if (result == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = PyLong_FromLongLong(values[i]);
        if (value == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyTuple_SET_ITEM(result, i, value);
    }
    return result;
}

/* The system clock's milliseconds, as odradek.clock.Clock.milliseconds reads them
 * (time.time_ns() // 1_000_000); 0, or -2 with OSError set. */
static int system_clock_ms(int64_t *now_ms)
{
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -2;
    }
    long long nanoseconds = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    *now_ms = nanoseconds / 1000000 - (nanoseconds % 1000000 < 0); /* floor, as Python's // */
    return 0;
}

/* A request this small is validated into a copy on the stack; a larger one into the heap. */
#define STACK_COPY_BYTES 4096

/* The producer table's two methods append_batch calls (interned at module init). */
static PyObject *try_next_name, *commit_next_name;

/* producers.try_next(records): 1 when the table noted the batch, 0 when it did not, -1 with
 * an exception set. */
static int producer_goes_on(PyObject *producers, PyObject *records)
{
    PyObject *noted = PyObject_CallMethodOneArg(producers, try_next_name, records);
    if (noted == NULL)
        return -1;
    int goes_on = PyObject_IsTrue(noted);
    Py_DECREF(noted);
    return goes_on;
}

/* append_batch's work once its arguments are read and the request is one batch, of no
 * producer or (`producers` not NULL) of a producer: see its docstring. */
static PyObject *append_one_batch(State *self, const uint8_t *data, Py_ssize_t total,
                                  Rules *rules, const int64_t limits[2], int64_t next_offset,
                                  int64_t log_start_offset, PyTypeObject *info_type,
                                  PyTypeObject *end_type, PyObject *producers)
{
    uint8_t stack_copy[STACK_COPY_BYTES];
    /* A producer's batch is validated into a bytes object, which the producer table reads
     * with its offsets assigned (the batch it notes ends at the offset the log gives it). */
    PyObject *copy_object = NULL;
    uint8_t *copy;
    if (producers != NULL) {
        copy_object = PyBytes_FromStringAndSize(NULL, total);
        if (copy_object == NULL)
            return NULL;
        copy = (uint8_t *)PyBytes_AS_STRING(copy_object);
    } else {
        copy = total <= STACK_COPY_BYTES ? stack_copy : PyMem_Malloc((size_t)total);
        if (copy == NULL)
            return PyErr_NoMemory();
    }
    CheckedBatch checked;
    int64_t summary[7];
    PyObject *result = NULL;
    if (validate(data, copy, total, rules, next_offset, &checked, 1, summary) < 0 ||
        must_roll(self, total, summary[1], summary[2], rules->now_ms, limits[0], limits[1])) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* Last of the checks, as the general path asks it after validation: a batch that does not
     * go on where its producer left off (a new producer or epoch, a gap, a retry) is declined
     * here, before anything is written, and the general path checks it against every rule.
     * The table's try_next runs no code that could touch this state. */
    if (producers != NULL) {
        int goes_on = producer_goes_on(producers, copy_object);
        if (goes_on <= 0) {
            result = goes_on < 0 ? NULL : Py_NewRef(Py_None);
            goto done;
        }
    }
    if (do_append(self, copy, total, 0) < 0)
        goto done;
    if (producers != NULL) {
        PyObject *committed = PyObject_CallMethodNoArgs(producers, commit_next_name);
        if (committed == NULL)
            goto done;
        Py_DECREF(committed);
    }
    long long info[9] = {summary[0], summary[1], summary[2], summary[3],
                         rules->log_append_time ? rules->now_ms : -1, log_start_offset,
                         summary[4], summary[5], total};
    long long end[3] = {summary[1] + 1, self->base_offset, self->size};
    PyObject *info_tuple = new_tuple_of(info_type, info, 9);
    PyObject *end_tuple = info_tuple == NULL ? NULL : new_tuple_of(end_type, end, 3);
    if (end_tuple == NULL) {
        Py_XDECREF(info_tuple);
        goto done;
    }
    result = PyTuple_New(2);
    if (result == NULL) {
        Py_DECREF(info_tuple);
        Py_DECREF(end_tuple);
        goto done;
    }
    PyTuple_SET_ITEM(result, 0, info_tuple);
    PyTuple_SET_ITEM(result, 1, end_tuple);
done:
    if (copy_object != NULL)
        Py_DECREF(copy_object);
    else if (copy != stack_copy)
        PyMem_Free(copy);
    return result;
}

static PyObject *State_append_batch(State *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "append_batch takes 9 arguments");
        return NULL;
    }
    PyObject *rule_values = args[1];
    PyTypeObject *info_type = (PyTypeObject *)args[6], *end_type = (PyTypeObject *)args[7];
    PyObject *producers = args[8] == Py_None ? NULL : args[8];
    if (!PyTuple_Check(rule_values) || PyTuple_GET_SIZE(rule_values) != 7 ||
        !PyType_Check(info_type) || !PyType_FastSubclass(info_type, Py_TPFLAGS_TUPLE_SUBCLASS) ||
        !PyType_Check(end_type) || !PyType_FastSubclass(end_type, Py_TPFLAGS_TUPLE_SUBCLASS)) {
        PyErr_SetString(PyExc_TypeError,
                        "append_batch: rules must be a 7-tuple, and the result types tuple types");
        return NULL;
    }
    if (check_usable(self) < 0)
        return NULL;
    Py_buffer records;
    if (PyObject_GetBuffer(args[0], &records, PyBUF_SIMPLE) < 0)
        return NULL;
    /* One batch spanning the request, of no producer (or of one, given the producer table):
     * anything else goes the general way, told so before any other argument is read. */
    const uint8_t *data = (const uint8_t *)records.buf;
    if (records.len < HEADER_SIZE ||
        (int64_t)be32(data + BATCH_LENGTH_AT) + LOG_OVERHEAD != records.len ||
        (be64(data + PRODUCER_ID_AT) >= 0 && producers == NULL)) {
        PyBuffer_Release(&records);
        Py_RETURN_NONE;
    }
    if (be64(data + PRODUCER_ID_AT) < 0)
        producers = NULL; /* a batch of no producer: the table has nothing to say of it */
    Rules rules;
    int64_t limits[2], now_ms, next_offset, epoch, log_start_offset, values[3];
    rules.keys_required = PyObject_IsTrue(PyTuple_GET_ITEM(rule_values, 0));
    rules.log_append_time = PyObject_IsTrue(PyTuple_GET_ITEM(rule_values, 4));
    if (rules.keys_required < 0 || rules.log_append_time < 0) {
        PyBuffer_Release(&records);
        return NULL;
    }
    int64_t *targets[] = {&values[0], &values[1], &values[2], &limits[0], &limits[1]};
    PyObject *sources[] = {PyTuple_GET_ITEM(rule_values, 1), PyTuple_GET_ITEM(rule_values, 2),
                           PyTuple_GET_ITEM(rule_values, 3), PyTuple_GET_ITEM(rule_values, 5),
                           PyTuple_GET_ITEM(rule_values, 6)};
    int status = 0;
    for (int i = 0; i < 5 && status == 0; i++)
        status = as_int64(sources[i], targets[i]);
    int64_t *more[] = {&next_offset, &epoch, &log_start_offset, &now_ms};
    PyObject *more_sources[] = {args[3], args[4], args[5], args[2]};
    for (int i = 0; i < 4 && status == 0; i++)
        status = i == 3 && args[2] == Py_None ? system_clock_ms(&now_ms)
                                              : as_int64(more_sources[i], more[i]);
    PyObject *result;
    if (status == -2)
        result = NULL;
    else if (status == -1 || epoch < INT32_MIN || epoch > INT32_MAX)
        result = Py_NewRef(Py_None); /* out of range: the general path decides */
    else {
        rules.now_ms = now_ms;
        rules.max_message_bytes = values[0];
        rules.before_max_ms = values[1];
        rules.after_max_ms = values[2];
        rules.partition_leader_epoch = (int32_t)epoch;
        result = append_one_batch(self, data, records.len, &rules, limits, next_offset,
                                  log_start_offset, info_type, end_type, producers);
    }
    PyBuffer_Release(&records);
    return result;
}

static PyObject *State_append(State *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"records", "write_through", NULL};
    Py_buffer records;
    int through = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|p:append", keywords, &records, &through))
        return NULL;
    if (check_usable(self) < 0) {
        PyBuffer_Release(&records);
        return NULL;
    }
    int result = records.len > 0 ? do_append(self, records.buf, records.len, through) : 0;
    PyBuffer_Release(&records);
    if (result < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *State_release(State *self, PyObject *Py_UNUSED(ignored))
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the segment's append state is writing");
        return NULL;
    }
    self->released = 1;
    release_buffers(self);
    Py_CLEAR(self->map_indexes);
    Py_RETURN_NONE;
}

static PyObject *State_release_maps(State *self, PyObject *Py_UNUSED(ignored))
{
    self->map_releases++;
    release_buffers(self);
    Py_RETURN_NONE;
}

static PyObject *get_fd(State *self, void *closure) { return PyLong_FromLong(self->fd); }
static PyObject *get_size(State *self, void *closure) { return PyLong_FromLongLong(self->size); }
static PyObject *get_since(State *self, void *closure)
{
    return PyLong_FromLongLong(self->since_last_entry);
}
static PyObject *get_max_timestamp_and_offset(State *self, void *closure)
{
    return Py_BuildValue("(LL)", self->max_timestamp, self->offset_of_max_timestamp);
}
static PyObject *get_rolling(State *self, void *closure)
{
    if (!self->has_rolling)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(self->rolling_based_timestamp);
}
static PyObject *get_offset_entries(State *self, void *closure)
{
    return PyLong_FromLongLong(self->offset_entries);
}
static PyObject *get_offset_last(State *self, void *closure)
{
    if (self->offset_entries == 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LL)", self->offset_last_relative, self->offset_last_position);
}
static PyObject *get_time_entries(State *self, void *closure)
{
    return PyLong_FromLongLong(self->time_entries);
}
static PyObject *get_time_last(State *self, void *closure)
{
    if (self->time_entries == 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LL)", self->time_last_timestamp, self->time_last_relative);
}
static PyObject *get_released(State *self, void *closure) { return PyBool_FromLong(self->released); }

static PyGetSetDef State_getset[] = {
    {"fd", (getter)get_fd, NULL, "the .log file's descriptor", NULL},
    {"size", (getter)get_size, NULL, "the .log file's size: where the next append goes", NULL},
    {"bytes_since_last_index_entry", (getter)get_since, NULL, NULL, NULL},
    {"max_timestamp_and_offset", (getter)get_max_timestamp_and_offset, NULL,
     "the segment's largest batch timestamp and the offset it came with", NULL},
    {"rolling_based_timestamp", (getter)get_rolling, NULL,
     "the first batch's max timestamp, which the roll check ages the segment by", NULL},
    {"offset_entries", (getter)get_offset_entries, NULL, NULL, NULL},
    {"offset_last", (getter)get_offset_last, NULL,
     "the offset index's last entry (relative offset, position), or None", NULL},
    {"time_entries", (getter)get_time_entries, NULL, NULL, NULL},
    {"time_last", (getter)get_time_last, NULL,
     "the time index's last entry (timestamp, relative offset), or None", NULL},
    {"released", (getter)get_released, NULL, NULL, NULL},
    {NULL}};

static PyMethodDef State_methods[] = {
    {"try_append", (PyCFunction)State_try_append, METH_VARARGS,
     "try_append(records, largest_offset, largest_timestamp, now_ms, segment_bytes, segment_ms)"
     " -> whether it appended (False: the segment must roll first)"},
    {"append_batch", (PyCFunction)(void (*)(void))State_append_batch, METH_FASTCALL,
     "append_batch(records, rules, now_ms, next_offset, leader_epoch, log_start_offset,"
     " info_type, end_type, producers) -> (info, end) or None\n\n"
     "``now_ms`` None: the system clock's time, read here (Clock.milliseconds).\n"
     "A produce request of one uncompressed batch of no producer id, validated, given its\n"
     "offsets and written in one call, when the segment need not roll first. ``rules`` is\n"
     "(keys_required, max_message_bytes, before_max_ms, after_max_ms, log_append_time,\n"
     "segment_bytes, segment_ms). Returns LogAppendInfo's fields as ``info_type`` and the new\n"
     "log end (offset, segment base offset, segment size) as ``end_type``; None, having\n"
     "written nothing, for anything else (a fault, several batches, a producer id, a roll due,\n"
     "a value out of range): the general path then decides and names any fault.\n"
     "``producers`` (the log's ProducerTable, or None) lets a producer's batch through too when\n"
     "its try_next accepts it, asked with the validated batch once no roll is due; its\n"
     "commit_next is called once the batch is written."},
    {"append", (PyCFunction)(void (*)(void))State_append, METH_VARARGS | METH_KEYWORDS,
     "append(records, write_through=False): write whole batches and add the index entries due"},
    {"release", (PyCFunction)State_release, METH_NOARGS,
     "give back the index maps' buffers; the facts stay readable, appends stop"},
    {"release_maps", (PyCFunction)State_release_maps, METH_NOARGS,
     "give back the index maps' buffers until the next index entry maps them again"},
    {NULL}};

static PyTypeObject StateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "odradek.storage._segment_append_state.SegmentAppendState",
    .tp_doc = "The active segment's append state (docs/native.md).",
    .tp_basicsize = sizeof(State),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)State_traverse,
    .tp_clear = (inquiry)State_clear,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)State_init,
    .tp_dealloc = (destructor)State_dealloc,
    .tp_methods = State_methods,
    .tp_getset = State_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_segment_append_state",
    "The active segment's append state as a C type (docs/native.md).", -1, NULL};

PyMODINIT_FUNC PyInit__segment_append_state(void)
{
    crc32c_init();
    try_next_name = PyUnicode_InternFromString("try_next");
    commit_next_name = PyUnicode_InternFromString("commit_next");
    if (try_next_name == NULL || commit_next_name == NULL || PyType_Ready(&StateType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&StateType);
    if (PyModule_AddObject(m, "SegmentAppendState", (PyObject *)&StateType) < 0) {
        Py_DECREF(&StateType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
