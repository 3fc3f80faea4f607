/* ProducerTable: one partition's producers, owned by a C type (docs/native.md).
 *
 * Per producer id: its epoch, the time of its last batch and the metadata of its last five
 * batches (last sequence, last offset, offset delta, max timestamp), kept in insertion order
 * (a dense array, compacted when producers expire) with an open-addressing index on the id,
 * and whether the producer's transaction is open in the partition (set by the producer state
 * manager). The append path asks one question of it, try_next: is this request one batch that
 * goes on where its known producer left off, inside its open transaction if it has one (a
 * transactional batch with none opens one, a plain batch with one is refused: both are the
 * manager's to decide)? Then the batch is noted, and commit_next adds it once the batch is
 * written. A producer whose transaction is open never expires. Everything else (new producers, epochs, gaps, retries, several batches)
 * is decided by producer_append_info.py, which reads entries with get and writes them with
 * put. The type takes numbers and buffers and touches no Python object's attributes.
 * producer_table.py is its twin and oracle.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "kafka_format.h"

#define PRODUCER_EPOCH_AT 51
#define TRANSACTIONAL_FLAG 0x10 /* in the low byte of the attributes */
#define BATCHES_TO_RETAIN 5
#define INT32_MAX_VALUE 2147483647LL

typedef struct {
    int64_t last_offset;
    int64_t timestamp;
    int32_t last_seq;
    int32_t offset_delta;
} BatchMetadata;

typedef struct {
    int64_t producer_id;
    int64_t last_timestamp;
    int32_t epoch;
    int32_t count; /* batches held, oldest first */
    BatchMetadata batches[BATCHES_TO_RETAIN];
    int32_t in_transaction; /* its transaction is open */
} Entry;

typedef struct {
    PyObject_HEAD
    Entry *entries; /* insertion order */
    Py_ssize_t length;
    Py_ssize_t allocated;
    Py_ssize_t *index; /* position in entries, or -1; size a power of two, at most half full */
    Py_ssize_t index_size;
    int has_next; /* a batch noted by try_next */
    int64_t next_producer_id;
    BatchMetadata next;
} Table;

static uint64_t slot_of(int64_t producer_id, Py_ssize_t index_size)
{
    uint64_t h = (uint64_t)producer_id * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
    return h & (uint64_t)(index_size - 1);
}

static Entry *find(Table *self, int64_t producer_id)
{
    if (self->index_size == 0)
        return NULL;
    uint64_t mask = (uint64_t)(self->index_size - 1);
    for (uint64_t slot = slot_of(producer_id, self->index_size);; slot = (slot + 1) & mask) {
        Py_ssize_t at = self->index[slot];
        if (at < 0)
            return NULL;
        if (self->entries[at].producer_id == producer_id)
            return &self->entries[at];
    }
}

/* Put every entry into index, a fresh block of index_size slots, in place of the old one. */
static void install_index(Table *self, Py_ssize_t *index, Py_ssize_t index_size)
{
    for (Py_ssize_t i = 0; i < index_size; i++)
        index[i] = -1;
    uint64_t mask = (uint64_t)(index_size - 1);
    for (Py_ssize_t at = 0; at < self->length; at++) {
        uint64_t slot = slot_of(self->entries[at].producer_id, index_size);
        while (index[slot] >= 0)
            slot = (slot + 1) & mask;
        index[slot] = at;
    }
    PyMem_Free(self->index);
    self->index = index;
    self->index_size = index_size;
}

static Py_ssize_t *new_index(Py_ssize_t index_size)
{
    Py_ssize_t *index = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)index_size);
    if (index == NULL)
        PyErr_NoMemory();
    return index;
}

/* The smallest index that holds length entries at most half full. */
static Py_ssize_t index_size_for(Py_ssize_t length)
{
    Py_ssize_t index_size = 16;
    while (length * 2 > index_size)
        index_size *= 2;
    return index_size;
}

/* Give back most of the entries' memory once at most a quarter of it is in use (after many
 * producers expired), so the table is as large as the producers it holds, not the most it
 * ever held. */
static void shrink(Table *self)
{
    if (self->allocated <= 8 || self->length * 4 > self->allocated)
        return;
    Py_ssize_t allocated = self->length * 2 > 8 ? self->length * 2 : 8;
    Entry *entries = PyMem_Realloc(self->entries, sizeof(Entry) * (size_t)allocated);
    if (entries == NULL)
        return; /* the larger block stays: nothing lost */
    self->entries = entries;
    self->allocated = allocated;
}

/* The entry of producer_id, added empty (epoch -1, no batch) at the end if new. */
static Entry *find_or_add(Table *self, int64_t producer_id)
{
    Entry *entry = find(self, producer_id);
    if (entry != NULL)
        return entry;
    if (self->length == self->allocated) {
        Py_ssize_t allocated = self->allocated ? self->allocated * 2 : 8;
        Entry *entries = PyMem_Realloc(self->entries, sizeof(Entry) * (size_t)allocated);
        if (entries == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        self->entries = entries;
        self->allocated = allocated;
    }
    if ((self->length + 1) * 2 > self->index_size) {
        Py_ssize_t index_size = index_size_for(self->length + 1);
        Py_ssize_t *index = new_index(index_size);
        if (index == NULL)
            return NULL;
        install_index(self, index, index_size);
    }
    entry = &self->entries[self->length];
    memset(entry, 0, sizeof(Entry));
    entry->producer_id = producer_id;
    entry->epoch = -1;
    entry->last_timestamp = -1;
    uint64_t mask = (uint64_t)(self->index_size - 1);
    uint64_t slot = slot_of(producer_id, self->index_size);
    while (self->index[slot] >= 0)
        slot = (slot + 1) & mask;
    self->index[slot] = self->length;
    self->length++;
    return entry;
}

/* Add a batch at the newest end; the oldest of five goes. */
static void push_batch(Entry *entry, const BatchMetadata *batch)
{
    if (entry->count == BATCHES_TO_RETAIN) {
        memmove(&entry->batches[0], &entry->batches[1],
                sizeof(BatchMetadata) * (BATCHES_TO_RETAIN - 1));
        entry->count--;
    }
    entry->batches[entry->count++] = *batch;
    entry->last_timestamp = batch->timestamp;
}

static int Table_init(Table *self, PyObject *args, PyObject *kwargs)
{
    if (!PyArg_ParseTuple(args, ":ProducerTable"))
        return -1;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        PyErr_SetString(PyExc_TypeError, "ProducerTable takes no arguments");
        return -1;
    }
    return 0;
}

static void Table_dealloc(Table *self)
{
    PyMem_Free(self->entries);
    PyMem_Free(self->index);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* try_next(records) -> bool */
static PyObject *Table_try_next(Table *self, PyObject *records)
{
    Py_buffer view;
    if (PyObject_GetBuffer(records, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *p = view.buf;
    Py_ssize_t length = view.len;
    int noted = 0;
    self->has_next = 0;
    if (length >= HEADER_SIZE && (int64_t)be32(p + BATCH_LENGTH_AT) + LOG_OVERHEAD == length) {
        int64_t producer_id = be64(p + PRODUCER_ID_AT);
        Entry *entry = find(self, producer_id);
        int transactional = (p[ATTRIBUTES_AT + 1] & TRANSACTIONAL_FLAG) != 0;
        if (entry != NULL && entry->count > 0 && be16(p + PRODUCER_EPOCH_AT) == entry->epoch &&
            transactional == (entry->in_transaction != 0)) {
            int64_t seq = be32(p + BASE_SEQUENCE_AT);
            int64_t delta = be32(p + LAST_OFFSET_DELTA_AT);
            int64_t last_offset;
            if (seq == (int64_t)entry->batches[entry->count - 1].last_seq + 1 &&
                seq <= INT32_MAX_VALUE - delta &&
                !__builtin_add_overflow(be64(p), delta, &last_offset)) {
                self->next.last_seq = (int32_t)(seq + delta);
                self->next.last_offset = last_offset;
                self->next.offset_delta = (int32_t)delta;
                self->next.timestamp = be64(p + MAX_TIMESTAMP_AT);
                self->next_producer_id = producer_id;
                self->has_next = 1;
                noted = 1;
            }
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(noted);
}

/* commit_next() */
static PyObject *Table_commit_next(Table *self, PyObject *unused)
{
    Entry *entry = self->has_next ? find(self, self->next_producer_id) : NULL;
    self->has_next = 0;
    if (entry == NULL) {
        PyErr_SetString(PyExc_ValueError, "no batch noted by try_next to commit");
        return NULL;
    }
    push_batch(entry, &self->next);
    Py_RETURN_NONE;
}

static PyObject *batch_tuple(const BatchMetadata *batch)
{
    return Py_BuildValue("(iLiL)", batch->last_seq, (long long)batch->last_offset,
                         batch->offset_delta, (long long)batch->timestamp);
}

static PyObject *entry_tuple(const Entry *entry)
{
    PyObject *batches = PyTuple_New(entry->count);
    if (batches == NULL)
        return NULL;
    for (int i = 0; i < entry->count; i++) {
        PyObject *batch = batch_tuple(&entry->batches[i]);
        if (batch == NULL) {
            Py_DECREF(batches);
            return NULL;
        }
        PyTuple_SET_ITEM(batches, i, batch);
    }
    return Py_BuildValue("(iLN)", entry->epoch, (long long)entry->last_timestamp, batches);
}

/* get(producer_id) -> (epoch, last_timestamp, batches) or None */
static PyObject *Table_get(Table *self, PyObject *arg)
{
    long long producer_id = PyLong_AsLongLong(arg);
    if (producer_id == -1 && PyErr_Occurred())
        return NULL;
    Entry *entry = find(self, producer_id);
    if (entry == NULL)
        Py_RETURN_NONE;
    return entry_tuple(entry);
}

static int parse_batch(PyObject *item, BatchMetadata *batch)
{
    long long last_offset, timestamp;
    int last_seq, offset_delta;
    if (!PyTuple_Check(item)) {
        PyErr_SetString(PyExc_TypeError, "a batch is a tuple (last_seq, last_offset, "
                                         "offset_delta, timestamp)");
        return -1;
    }
    if (!PyArg_ParseTuple(item, "iLiL", &last_seq, &last_offset, &offset_delta, &timestamp))
        return -1;
    batch->last_seq = last_seq;
    batch->last_offset = last_offset;
    batch->offset_delta = offset_delta;
    batch->timestamp = timestamp;
    return 0;
}

/* put(producer_id, epoch, last_timestamp, batches): the entry replaced (the last five
 * batches kept), or added at the end. */
static PyObject *Table_put(Table *self, PyObject *args)
{
    long long producer_id, last_timestamp;
    short epoch;
    PyObject *batches;
    if (!PyArg_ParseTuple(args, "LhLO:put", &producer_id, &epoch, &last_timestamp, &batches))
        return NULL;
    PyObject *items = PySequence_Fast(batches, "batches must be a sequence");
    if (items == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    Py_ssize_t first = count > BATCHES_TO_RETAIN ? count - BATCHES_TO_RETAIN : 0;
    BatchMetadata parsed[BATCHES_TO_RETAIN];
    for (Py_ssize_t i = first; i < count; i++) {
        if (parse_batch(PySequence_Fast_GET_ITEM(items, i), &parsed[i - first]) < 0) {
            Py_DECREF(items);
            return NULL;
        }
    }
    Py_DECREF(items);
    self->has_next = 0;
    Entry *entry = find_or_add(self, producer_id);
    if (entry == NULL)
        return NULL;
    entry->epoch = epoch;
    entry->last_timestamp = last_timestamp;
    entry->count = (int32_t)(count - first);
    memcpy(entry->batches, parsed, sizeof(BatchMetadata) * (size_t)(count - first));
    Py_RETURN_NONE;
}

/* set_in_transaction(producer_id, open): whether the known producer's transaction is open. */
static PyObject *Table_set_in_transaction(Table *self, PyObject *args)
{
    long long producer_id;
    int open;
    if (!PyArg_ParseTuple(args, "Lp:set_in_transaction", &producer_id, &open))
        return NULL;
    Entry *entry = find(self, producer_id);
    if (entry == NULL) {
        PyErr_Format(PyExc_KeyError, "producer %lld is not in the table", producer_id);
        return NULL;
    }
    self->has_next = 0;
    entry->in_transaction = open;
    Py_RETURN_NONE;
}

/* add_batch(producer_id, epoch, last_seq, last_offset, offset_delta, timestamp): a batch read
 * back from the log, unchecked; a new epoch forgets the batches of the old one. */
static PyObject *Table_add_batch(Table *self, PyObject *args)
{
    long long producer_id;
    short epoch;
    BatchMetadata batch;
    long long last_offset, timestamp;
    int last_seq, offset_delta;
    if (!PyArg_ParseTuple(args, "LhiLiL:add_batch", &producer_id, &epoch, &last_seq,
                          &last_offset, &offset_delta, &timestamp))
        return NULL;
    batch.last_seq = last_seq;
    batch.last_offset = last_offset;
    batch.offset_delta = offset_delta;
    batch.timestamp = timestamp;
    self->has_next = 0;
    Entry *entry = find_or_add(self, producer_id);
    if (entry == NULL)
        return NULL;
    if (entry->epoch != epoch) {
        entry->count = 0;
        entry->epoch = epoch;
    }
    push_batch(entry, &batch);
    Py_RETURN_NONE;
}

static int is_expired(const Entry *entry, int64_t now_ms, int64_t expiration_ms)
{
    int64_t idle;
    if (entry->in_transaction)
        return 0; /* Kafka's rule: never while its transaction is open */
    if (__builtin_sub_overflow(now_ms, entry->last_timestamp, &idle))
        return now_ms > entry->last_timestamp; /* further apart than any int64 */
    return idle >= expiration_ms;
}

/* remove_expired(now_ms, expiration_ms) -> how many producers went */
static PyObject *Table_remove_expired(Table *self, PyObject *args)
{
    long long now_ms, expiration_ms;
    if (!PyArg_ParseTuple(args, "LL:remove_expired", &now_ms, &expiration_ms))
        return NULL;
    Py_ssize_t removed = 0;
    for (Py_ssize_t at = 0; at < self->length; at++)
        removed += is_expired(&self->entries[at], now_ms, expiration_ms);
    if (removed == 0)
        return PyLong_FromLong(0);
    /* The new index before anything changes: without memory for it, nothing does. */
    Py_ssize_t index_size = index_size_for(self->length - removed);
    Py_ssize_t *index = new_index(index_size);
    if (index == NULL)
        return NULL;
    Py_ssize_t kept = 0;
    for (Py_ssize_t at = 0; at < self->length; at++) {
        if (is_expired(&self->entries[at], now_ms, expiration_ms))
            continue;
        if (kept != at)
            self->entries[kept] = self->entries[at];
        kept++;
    }
    self->has_next = 0;
    self->length = kept;
    install_index(self, index, index_size);
    shrink(self);
    return PyLong_FromSsize_t(removed);
}

/* clear() */
static PyObject *Table_clear(Table *self, PyObject *unused)
{
    self->has_next = 0;
    self->length = 0;
    PyMem_Free(self->entries);
    PyMem_Free(self->index);
    self->entries = NULL;
    self->index = NULL;
    self->allocated = 0;
    self->index_size = 0;
    Py_RETURN_NONE;
}

/* producer_ids() -> list, in insertion order */
static PyObject *Table_producer_ids(Table *self, PyObject *unused)
{
    PyObject *ids = PyList_New(self->length);
    if (ids == NULL)
        return NULL;
    for (Py_ssize_t at = 0; at < self->length; at++) {
        PyObject *id = PyLong_FromLongLong(self->entries[at].producer_id);
        if (id == NULL) {
            Py_DECREF(ids);
            return NULL;
        }
        PyList_SET_ITEM(ids, at, id);
    }
    return ids;
}

/* rows() -> list of (producer_id, epoch, last_seq, last_offset, offset_delta, timestamp): the
 * snapshot's rows, a producer's oldest batch first, and (-1, -1, 0, last_timestamp) for a
 * producer without a batch. */
static PyObject *Table_rows(Table *self, PyObject *unused)
{
    PyObject *rows = PyList_New(0);
    if (rows == NULL)
        return NULL;
    for (Py_ssize_t at = 0; at < self->length; at++) {
        const Entry *entry = &self->entries[at];
        int count = entry->count ? entry->count : 1;
        for (int i = 0; i < count; i++) {
            PyObject *row;
            if (entry->count == 0)
                row = Py_BuildValue("(LiiLiL)", (long long)entry->producer_id, entry->epoch, -1,
                                    -1LL, 0, (long long)entry->last_timestamp);
            else
                row = Py_BuildValue("(LiiLiL)", (long long)entry->producer_id, entry->epoch,
                                    entry->batches[i].last_seq,
                                    (long long)entry->batches[i].last_offset,
                                    entry->batches[i].offset_delta,
                                    (long long)entry->batches[i].timestamp);
            if (row == NULL || PyList_Append(rows, row) < 0) {
                Py_XDECREF(row);
                Py_DECREF(rows);
                return NULL;
            }
            Py_DECREF(row);
        }
    }
    return rows;
}

/* last_data_offsets() -> {producer_id: last offset written, or -1} */
static PyObject *Table_last_data_offsets(Table *self, PyObject *unused)
{
    PyObject *offsets = PyDict_New();
    if (offsets == NULL)
        return NULL;
    for (Py_ssize_t at = 0; at < self->length; at++) {
        const Entry *entry = &self->entries[at];
        long long last = entry->count ? entry->batches[entry->count - 1].last_offset : -1;
        PyObject *id = PyLong_FromLongLong(entry->producer_id);
        PyObject *offset = id ? PyLong_FromLongLong(last) : NULL;
        if (offset == NULL || PyDict_SetItem(offsets, id, offset) < 0) {
            Py_XDECREF(id);
            Py_XDECREF(offset);
            Py_DECREF(offsets);
            return NULL;
        }
        Py_DECREF(id);
        Py_DECREF(offset);
    }
    return offsets;
}

static Py_ssize_t Table_length(Table *self) { return self->length; }

static int Table_contains(Table *self, PyObject *arg)
{
    if (!PyLong_Check(arg))
        return 0;
    int overflow;
    long long producer_id = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (producer_id == -1 && PyErr_Occurred())
        return -1;
    return !overflow && find(self, producer_id) != NULL;
}

static PySequenceMethods Table_as_sequence = {
    .sq_length = (lenfunc)Table_length,
    .sq_contains = (objobjproc)Table_contains,
};

static PyMethodDef Table_methods[] = {
    {"try_next", (PyCFunction)Table_try_next, METH_O,
     "try_next(records) -> whether records is one batch that goes on where its known producer "
     "left off (same epoch, the next sequence, transactional exactly when its transaction is "
     "open); then it is noted for commit_next"},
    {"commit_next", (PyCFunction)Table_commit_next, METH_NOARGS,
     "commit_next(): add the batch try_next noted (once it is written)"},
    {"get", (PyCFunction)Table_get, METH_O,
     "get(producer_id) -> (epoch, last_timestamp, batches) or None; each batch is "
     "(last_seq, last_offset, offset_delta, timestamp), oldest first"},
    {"put", (PyCFunction)Table_put, METH_VARARGS,
     "put(producer_id, epoch, last_timestamp, batches): set a producer's entry"},
    {"set_in_transaction", (PyCFunction)Table_set_in_transaction, METH_VARARGS,
     "set_in_transaction(producer_id, open): whether the producer's transaction is open "
     "(KeyError for a producer the table does not hold)"},
    {"add_batch", (PyCFunction)Table_add_batch, METH_VARARGS,
     "add_batch(producer_id, epoch, last_seq, last_offset, offset_delta, timestamp): "
     "a batch read back from the log, unchecked"},
    {"remove_expired", (PyCFunction)Table_remove_expired, METH_VARARGS,
     "remove_expired(now_ms, expiration_ms) -> how many idle producers went"},
    {"clear", (PyCFunction)Table_clear, METH_NOARGS, "forget every producer"},
    {"producer_ids", (PyCFunction)Table_producer_ids, METH_NOARGS,
     "the producer ids, in the order they came"},
    {"rows", (PyCFunction)Table_rows, METH_NOARGS,
     "the snapshot's rows (producer_id, epoch, last_seq, last_offset, offset_delta, timestamp)"},
    {"last_data_offsets", (PyCFunction)Table_last_data_offsets, METH_NOARGS,
     "each producer's last written offset (-1 without a batch)"},
    {NULL}};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "odradek.storage._producer_table.ProducerTable",
    .tp_doc = "One partition's producers (docs/native.md).",
    .tp_basicsize = sizeof(Table),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Table_init,
    .tp_dealloc = (destructor)Table_dealloc,
    .tp_methods = Table_methods,
    .tp_as_sequence = &Table_as_sequence,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_producer_table",
    "One partition's producers as a C type (docs/native.md).", -1, NULL};

PyMODINIT_FUNC PyInit__producer_table(void)
{
    if (PyType_Ready(&TableType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&TableType);
    if (PyModule_AddObject(m, "ProducerTable", (PyObject *)&TableType) < 0) {
        Py_DECREF(&TableType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
