/*
 * The log cleaner's offset map and its per-record loops, in C (odradek.cleaner.offset_map).
 *
 * Cleaning reads every record twice: once to map each key to its latest offset, once to decide
 * which records stay, many times faster here than in Python (docs/native.md has the figures).
 * The map is SkimpyOffsetMap's (skimpy_offset_map.py, the fallback and the
 * test oracle): 24 bytes a slot (two 64-bit hashes of the key and its offset), open addressing
 * with double hashing over a prime number of slots. Keys are hashed with SipHash-1-3 (128-bit
 * output, siphash.h) under the map's own secret, 16 bytes from os.urandom drawn when the map is
 * made; the Python map uses keyed BLAKE2b the same way. Both find the same keys equal and fill
 * up at the same moment; which slot a key lands in is each map's own.
 *
 * The batch loops handle only the common case, uncompressed batches, and stop at any batch they
 * cannot finish alone (compressed, wrong magic, a CRC that does not match, records that do not
 * frame, some but not all records kept), returning its position so Python handles that batch,
 * raises the error naming it, or rebuilds it. The CRC of a batch is computed by the project's
 * one CRC-32C in C (crc32c.h), which gives crc32c.crc32c's values. Every read is bounded by the end
 * of the batch or record it belongs to, so no input can make this module read out of bounds.
 *
 * Tracked records (track_records): while map_batches maps the dirty section it also notes, per
 * offset, which records it settled (a keyed record, not a tombstone, of a batch whose CRC it
 * checked and whose records hold exactly its offsets) and which a later record of the same key
 * superseded. filter_batches then decides a batch whose records were all settled from those
 * two bits alone, without reading it again: all superseded, it goes; none, it stays (the rule
 * of retain_section: offset >= the map's offset for the key). The bits hold only while records
 * come in increasing offsets, so that the last offset put for a key is its largest, and while
 * filter_batches meets batches in increasing offsets, so that the batch it decides is the one
 * map_batches settled; the first record or batch out of order stops their use.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "crc32c.h"
#include "kafka_format.h"
#include "siphash.h"

/* Status codes; batch_scan.py defines the same numbers. */
#define STATUS_END 0        /* no whole batch left in the buffer (or: records mapped) */
#define STATUS_BAD_LENGTH 1 /* a batch length shorter than a header: the segment ends here */
#define STATUS_OTHER 2      /* a batch for Python to handle */
#define STATUS_FULL 3       /* the map has no room for another key */
#define STATUS_CORRUPT 4    /* records that do not frame */

#define MIN_BATCH_LENGTH (HEADER_SIZE - LOG_OVERHEAD)

/* --- big-endian header fields -------------------------------------------------------------- */

typedef struct {
    int64_t base_offset;
    int64_t last_offset;
    Py_ssize_t size;
    int32_t count;
    int magic;
    int codec;
    int has_delete_horizon;
    int64_t delete_horizon_ms; /* when it has one */
    int in_transaction; /* transactional or control: Python follows the transactions */
} Header;

#define DELETE_HORIZON_FLAG 0x40 /* attribute bit 6: the base timestamp is the delete horizon */
#define TRANSACTION_FLAGS 0x30   /* attribute bits 4 and 5: transactional, control */

/* STATUS_END when no whole batch starts at pos, STATUS_BAD_LENGTH for an impossible length,
 * else -1 with the header read (the whole batch lies in data[pos:end]). */
static int read_header(const uint8_t *data, Py_ssize_t pos, Py_ssize_t end, Header *h)
{
    if (end - pos < HEADER_SIZE)
        return STATUS_END;
    const uint8_t *p = data + pos;
    int32_t batch_length = be32(p + BATCH_LENGTH_AT);
    if (batch_length < MIN_BATCH_LENGTH)
        return STATUS_BAD_LENGTH;
    h->size = (Py_ssize_t)batch_length + LOG_OVERHEAD;
    if (h->size > end - pos)
        return STATUS_END;
    h->base_offset = be64(p);
    int32_t last_delta = be32(p + LAST_OFFSET_DELTA_AT);
    h->last_offset = (int64_t)((uint64_t)h->base_offset + (uint64_t)(int64_t)last_delta);
    h->magic = (int8_t)p[MAGIC_AT];
    h->codec = p[ATTRIBUTES_AT + 1] & CODEC_MASK; /* the low byte of the attributes */
    h->has_delete_horizon = (p[ATTRIBUTES_AT + 1] & DELETE_HORIZON_FLAG) != 0;
    h->in_transaction = (p[ATTRIBUTES_AT + 1] & TRANSACTION_FLAGS) != 0;
    h->delete_horizon_ms = be64(p + BASE_TIMESTAMP_AT);
    h->count = be32(p + RECORDS_COUNT_AT);
    return -1;
}

/* 1 when the stored CRC of the whole batch at `batch` matches its bytes, 0 when not. */
static int crc_matches(const uint8_t *batch, Py_ssize_t size)
{
    return crc32c(0, batch + ATTRIBUTES_AT, (size_t)(size - ATTRIBUTES_AT)) == be32u(batch + CRC_AT);
}

/* --- records ------------------------------------------------------------------------------- */

typedef struct {
    int64_t offset;
    const uint8_t *key; /* NULL: no key */
    Py_ssize_t key_length;
    int tombstone;
} RecordKey;

/* Read the record at *pos (which ends by `end`) as batch_keys.py does; -1 if it does not
 * frame. The value and headers are not read: the record's length steps over them. */
static int read_record(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t end, int64_t base_offset,
                       RecordKey *record)
{
    int64_t value;
    Py_ssize_t at = *pos;
    if (read_varint(data, &at, end, 32, &value) < 0 || value < 0 || value > end - at)
        return -1;
    Py_ssize_t record_end = at + (Py_ssize_t)value;
    if (at >= record_end)
        return -1;
    at++; /* attributes */
    if (read_varint(data, &at, record_end, 64, &value) < 0) /* timestamp delta */
        return -1;
    if (read_varint(data, &at, record_end, 32, &value) < 0) /* offset delta */
        return -1;
    if (__builtin_add_overflow(base_offset, value, &record->offset))
        return -1;
    if (read_varint(data, &at, record_end, 32, &value) < 0 || value < -1)
        return -1;
    if (value >= 0) {
        if (value > record_end - at)
            return -1;
        record->key = data + at;
        record->key_length = (Py_ssize_t)value;
        at += (Py_ssize_t)value;
    } else {
        record->key = NULL;
        record->key_length = 0;
    }
    if (read_varint(data, &at, record_end, 32, &value) < 0 || value < -1)
        return -1;
    record->tombstone = value == -1;
    *pos = record_end;
    return 0;
}

/* --- the map ------------------------------------------------------------------------------- */

typedef struct {
    int64_t first;
    int64_t second;
    uint64_t stored; /* offset + 1; 0 marks an empty slot */
} Entry;

typedef struct {
    PyObject_HEAD
    Entry *entries;
    Py_ssize_t slots;
    Py_ssize_t max_entries;
    Py_ssize_t size;
    long long latest_offset;
    /* Tracked records (see the top of this file): bit i is about offset tracked_first + i. */
    uint64_t *settled;
    uint64_t *superseded;
    int64_t tracked_first;
    Py_ssize_t tracked_count; /* 0: none */
    int64_t last_tracked;     /* the last record offset map_batches saw */
    int64_t last_decided;     /* the last offset of the batches filter_batches saw */
    int tracking;             /* 0 when none, or once records or batches came out of order */
    uint8_t secret[SIPHASH_KEY_BYTES]; /* the key of the map's hash */
    unsigned long long lookups;        /* keys looked up (put or get), as Kafka's map counts */
    unsigned long long probes;         /* slots those lookups read */
} OffsetMap;

/* --- tracked records ----------------------------------------------------------------------- */

static size_t tracked_words(Py_ssize_t count)
{
    return (size_t)(count / 64) + 1;
}

/* The bits of one 64-bit word that lie in [first, last] (bit numbers of the whole bitset). */
static uint64_t word_mask(Py_ssize_t word, Py_ssize_t first, Py_ssize_t last)
{
    uint64_t mask = ~(uint64_t)0;
    if (word == first >> 6)
        mask &= ~(uint64_t)0 << (first & 63);
    if (word == last >> 6)
        mask &= ~(uint64_t)0 >> (63 - (last & 63));
    return mask;
}

static int all_set(const uint64_t *bits, Py_ssize_t first, Py_ssize_t last)
{
    for (Py_ssize_t word = first >> 6; word <= last >> 6; word++) {
        uint64_t mask = word_mask(word, first, last);
        if ((bits[word] & mask) != mask)
            return 0;
    }
    return 1;
}

static Py_ssize_t count_set(const uint64_t *bits, Py_ssize_t first, Py_ssize_t last)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t word = first >> 6; word <= last >> 6; word++)
        count += __builtin_popcountll(bits[word] & word_mask(word, first, last));
    return count;
}

/* The bit of `offset`, or -1 when it is not tracked. */
static Py_ssize_t tracked_bit(const OffsetMap *self, int64_t offset)
{
    if (!self->tracking || offset < self->tracked_first ||
        offset - self->tracked_first >= self->tracked_count)
        return -1;
    return (Py_ssize_t)(offset - self->tracked_first);
}

static void set_bit(uint64_t *bits, Py_ssize_t bit)
{
    bits[bit >> 6] |= (uint64_t)1 << (bit & 63);
}

/* A record at `offset` is about to be mapped: the bits stop holding if it is not past the last
 * one. */
static void see_record(OffsetMap *self, int64_t offset)
{
    if (!self->tracking)
        return;
    if (offset <= self->last_tracked)
        self->tracking = 0;
    else
        self->last_tracked = offset;
}

/* How many records of the batch `h` stay, from the tracked bits alone; -1 when they do not
 * settle it (a record not settled, or a batch outside what is tracked or past latest_offset). */
static int64_t settled_kept(const OffsetMap *self, const Header *h)
{
    if (!self->tracking || h->count <= 0 || h->base_offset < self->tracked_first ||
        h->last_offset < h->base_offset || h->last_offset > self->latest_offset ||
        h->last_offset - self->tracked_first >= self->tracked_count ||
        h->last_offset - h->base_offset + 1 != h->count)
        return -1;
    Py_ssize_t first = (Py_ssize_t)(h->base_offset - self->tracked_first);
    Py_ssize_t last = (Py_ssize_t)(h->last_offset - self->tracked_first);
    if (!all_set(self->settled, first, last))
        return -1;
    return h->count - count_set(self->superseded, first, last);
}

/* The key's two 64-bit hashes under the map's secret. */
static void key_hashes(const OffsetMap *self, const uint8_t *key, Py_ssize_t length,
                       int64_t *first, int64_t *second)
{
    uint64_t high, low;
    siphash13_128(self->secret, key, (size_t)length, &high, &low);
    *first = (int64_t)high;
    *second = (int64_t)low;
}

static Py_ssize_t floor_mod(int64_t value, Py_ssize_t modulus)
{
    int64_t r = value % (int64_t)modulus;
    return (Py_ssize_t)(r < 0 ? r + modulus : r);
}

/* A key's hashes and the slot its probe starts at. */
typedef struct {
    int64_t first;
    int64_t second;
    Py_ssize_t slot;
} KeyHash;

/* The key's hashes and its first slot. */
static void hash_key(const OffsetMap *self, const uint8_t *key, Py_ssize_t length, KeyHash *hash)
{
    key_hashes(self, key, length, &hash->first, &hash->second);
    hash->slot = floor_mod(hash->first, self->slots);
}

/* The slot holding the key, or the empty slot where it would go (max_entries < slots, so there
 * is always one, and with a prime slot count the probe sequence visits every slot). */
static Entry *find(OffsetMap *self, const KeyHash *hash)
{
    int64_t first = hash->first, second = hash->second;
    Py_ssize_t slots = self->slots;
    Py_ssize_t slot = hash->slot;
    Py_ssize_t step = 1 + floor_mod(second, slots - 1);
    self->lookups++;
    for (;;) {
        Entry *entry = &self->entries[slot];
        self->probes++;
        if (entry->stored == 0 || (entry->first == first && entry->second == second))
            return entry;
        slot += step;
        if (slot >= slots)
            slot -= slots;
    }
}

/* 0 when mapped, STATUS_FULL for a new key with no room left. */
static int map_put(OffsetMap *self, const KeyHash *hash, int64_t offset)
{
    Entry *entry = find(self, hash);
    if (entry->stored == 0) {
        if (self->size >= self->max_entries)
            return STATUS_FULL;
        entry->first = hash->first;
        entry->second = hash->second;
        self->size++;
    } else {
        Py_ssize_t bit = tracked_bit(self, (int64_t)entry->stored - 1);
        if (bit >= 0)
            set_bit(self->superseded, bit);
    }
    entry->stored = (uint64_t)offset + 1;
    return 0;
}

/* The key's offset, -1 when absent. */
static int64_t map_get(OffsetMap *self, const KeyHash *hash)
{
    return (int64_t)find(self, hash)->stored - 1;
}

/* --- records read ahead -------------------------------------------------------------------- */

/* The batch loops read and hash a few records ahead of the one they look up, and fetch the
 * slot each probe starts at meanwhile: the table is far larger than the cache, and the batch
 * just read (its CRC) has pushed out what the last lookups brought in. */
#define READ_AHEAD 4

typedef struct {
    RecordKey record;
    int framed;   /* 0: it does not frame (no record after it is read) */
    KeyHash hash; /* when it has a key and an offset in the range hashed */
} AheadRecord;

typedef struct {
    OffsetMap *map;
    const uint8_t *data;
    Py_ssize_t pos, end; /* where the next record to read starts; the records' end */
    int64_t base_offset, count, read;
    int64_t hash_from, hash_to; /* the keys of records at offsets in [hash_from, hash_to] */
    AheadRecord ring[READ_AHEAD];
} RecordsAhead;

static void records_ahead(RecordsAhead *it, OffsetMap *map, const uint8_t *data, Py_ssize_t pos,
                          Py_ssize_t end, int64_t count, int64_t base_offset, int64_t hash_from,
                          int64_t hash_to)
{
    it->map = map;
    it->data = data;
    it->pos = pos;
    it->end = end;
    it->base_offset = base_offset;
    it->count = count;
    it->read = 0;
    it->hash_from = hash_from;
    it->hash_to = hash_to;
}

/* Record i (records before it were taken), with up to READ_AHEAD - 1 after it read and hashed. */
static AheadRecord *take_record(RecordsAhead *it, int64_t i)
{
    while (it->read < it->count && it->read < i + READ_AHEAD) {
        AheadRecord *next = &it->ring[it->read % READ_AHEAD];
        next->framed =
            read_record(it->data, &it->pos, it->end, it->base_offset, &next->record) == 0;
        if (!next->framed) {
            it->count = it->read + 1; /* nothing after it can be read */
        } else if (next->record.key != NULL && next->record.offset >= it->hash_from &&
                   next->record.offset <= it->hash_to) {
            hash_key(it->map, next->record.key, next->record.key_length, &next->hash);
            __builtin_prefetch(&it->map->entries[next->hash.slot]);
        }
        it->read++;
    }
    return &it->ring[i % READ_AHEAD];
}

/* Map the keyed records of data[pos:end] with offsets from start on (a batch's records
 * section); STATUS_END when all are mapped, STATUS_FULL, STATUS_CORRUPT, or -1 on error.
 * `checked` is the header of the batch when map_batches checked its CRC (else NULL): its
 * records can be settled if they hold exactly its offsets. */
static int map_section(OffsetMap *self, const uint8_t *data, Py_ssize_t pos, Py_ssize_t end,
                       int64_t count, int64_t base_offset, int64_t start, const Header *checked)
{
    RecordKey record;
    Py_ssize_t at = pos;
    if (count < 0)
        return STATUS_CORRUPT;
    int settles = checked != NULL && checked->count == count &&
                  (uint64_t)checked->last_offset - (uint64_t)checked->base_offset + 1 ==
                      (uint64_t)count;
    /* Frame every record before mapping any, so a corrupt batch changes nothing. */
    for (int64_t i = 0; i < count; i++) {
        if (read_record(data, &at, end, base_offset, &record) < 0)
            return STATUS_CORRUPT;
        settles = settles && record.offset - base_offset == i;
    }
    if (at != end)
        return STATUS_CORRUPT;
    RecordsAhead records;
    records_ahead(&records, self, data, pos, end, count, base_offset, start, INT64_MAX);
    for (int64_t i = 0; i < count; i++) {
        AheadRecord *next = take_record(&records, i);
        if (next->record.offset < start)
            continue;
        see_record(self, next->record.offset);
        if (next->record.key == NULL)
            continue;
        if (self->size >= self->max_entries)
            return STATUS_FULL;
        int status = map_put(self, &next->hash, next->record.offset);
        if (status != 0)
            return status;
        Py_ssize_t bit = tracked_bit(self, next->record.offset);
        if (settles && !next->record.tombstone && bit >= 0)
            set_bit(self->settled, bit);
    }
    return STATUS_END;
}

/* Which records of data[pos:end] stay: mask[i] = 1 for a kept record (mask may be NULL).
 * STATUS_END with the counts, STATUS_CORRUPT, or -1 on error. */
static int retain_section(OffsetMap *self, const uint8_t *data, Py_ssize_t pos, Py_ssize_t end,
                          int64_t count, int64_t base_offset, int retain_deletes, char *mask,
                          int64_t *kept, int64_t *keyless, int64_t *kept_tombstones)
{
    *kept = 0;
    *keyless = 0;
    *kept_tombstones = 0;
    if (count < 0)
        return STATUS_CORRUPT;
    RecordsAhead records;
    records_ahead(&records, self, data, pos, end, count, base_offset, INT64_MIN,
                  self->latest_offset);
    for (int64_t i = 0; i < count; i++) {
        AheadRecord *next = take_record(&records, i);
        if (!next->framed)
            return STATUS_CORRUPT;
        RecordKey *record = &next->record;
        int keep;
        if (record->offset > self->latest_offset) {
            keep = 1;
        } else if (record->key == NULL) {
            keep = 0;
            (*keyless)++;
        } else {
            keep = record->offset >= map_get(self, &next->hash) &&
                   (retain_deletes || !record->tombstone);
        }
        *kept += keep;
        *kept_tombstones += keep && record->tombstone;
        if (mask != NULL)
            mask[i] = (char)keep;
    }
    return records.pos == end ? STATUS_END : STATUS_CORRUPT;
}

/* --- the Python type ----------------------------------------------------------------------- */

static void stop_tracking(OffsetMap *self)
{
    PyMem_Free(self->settled);
    PyMem_Free(self->superseded);
    self->settled = self->superseded = NULL;
    self->tracked_first = 0;
    self->tracked_count = 0;
    self->last_tracked = -1;
    self->last_decided = -1;
    self->tracking = 0;
}

static int OffsetMap_init(OffsetMap *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"slots", "max_entries", "secret", NULL};
    Py_ssize_t slots, max_entries;
    Py_buffer secret;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nny*", keywords, &slots, &max_entries,
                                     &secret))
        return -1;
    int secret_length_ok = secret.len == SIPHASH_KEY_BYTES;
    if (secret_length_ok)
        memcpy(self->secret, secret.buf, SIPHASH_KEY_BYTES);
    PyBuffer_Release(&secret);
    if (!secret_length_ok) {
        PyErr_SetString(PyExc_ValueError, "OffsetMap needs a secret of 16 bytes");
        return -1;
    }
    if (slots < 3 || max_entries < 0 || max_entries >= slots ||
        (size_t)slots > PY_SSIZE_T_MAX / sizeof(Entry)) {
        PyErr_SetString(PyExc_ValueError, "OffsetMap needs 3 <= slots and max_entries < slots");
        return -1;
    }
    Entry *entries = PyMem_Calloc((size_t)slots, sizeof(Entry));
    if (entries == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyMem_Free(self->entries);
    self->entries = entries;
    self->slots = slots;
    self->max_entries = max_entries;
    self->size = 0;
    self->latest_offset = -1;
    self->lookups = self->probes = 0;
    stop_tracking(self);
    return 0;
}

static void OffsetMap_dealloc(OffsetMap *self)
{
    PyMem_Free(self->entries);
    stop_tracking(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(OffsetMap *self)
{
    if (self->entries == NULL) {
        PyErr_SetString(PyExc_ValueError, "OffsetMap is not initialized");
        return -1;
    }
    return 0;
}

/* Parse (buffer, position, end) where 0 <= position <= end <= len(buffer). */
static int get_span(PyObject *const *args, Py_buffer *buffer, Py_ssize_t *position,
                    Py_ssize_t *end)
{
    if (PyObject_GetBuffer(args[0], buffer, PyBUF_SIMPLE) < 0)
        return -1;
    *position = PyLong_AsSsize_t(args[1]);
    *end = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        PyBuffer_Release(buffer);
        return -1;
    }
    if (*position < 0 || *end > buffer->len || *position > *end) {
        PyBuffer_Release(buffer);
        PyErr_SetString(PyExc_ValueError, "position and end must lie in the buffer");
        return -1;
    }
    return 0;
}

static int check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t expected)
{
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, expected,
                     nargs);
        return -1;
    }
    return 0;
}

static int get_key(PyObject *object, Py_buffer *key)
{
    return PyObject_GetBuffer(object, key, PyBUF_SIMPLE);
}

static PyObject *OffsetMap_put(OffsetMap *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer key;
    if (ready(self) < 0 || check_nargs("put", nargs, 2) < 0)
        return NULL;
    long long offset = PyLong_AsLongLong(args[1]);
    if (offset == -1 && PyErr_Occurred())
        return NULL;
    if (offset < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets are not negative");
        return NULL;
    }
    if (get_key(args[0], &key) < 0)
        return NULL;
    KeyHash hash;
    hash_key(self, key.buf, key.len, &hash);
    PyBuffer_Release(&key);
    see_record(self, offset);
    if (map_put(self, &hash, offset) == STATUS_FULL) {
        PyErr_Format(PyExc_ValueError, "offset map of %zd entries is full", self->max_entries);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *OffsetMap_get(OffsetMap *self, PyObject *object)
{
    Py_buffer key;
    if (ready(self) < 0 || get_key(object, &key) < 0)
        return NULL;
    KeyHash hash;
    hash_key(self, key.buf, key.len, &hash);
    PyBuffer_Release(&key);
    return PyLong_FromLongLong(map_get(self, &hash));
}

static PyObject *OffsetMap_clear(OffsetMap *self, PyObject *unused)
{
    if (ready(self) < 0)
        return NULL;
    memset(self->entries, 0, (size_t)self->slots * sizeof(Entry));
    self->size = 0;
    self->latest_offset = -1;
    if (self->tracked_count > 0) {
        size_t bytes = tracked_words(self->tracked_count) * sizeof(uint64_t);
        memset(self->settled, 0, bytes);
        memset(self->superseded, 0, bytes);
        self->last_tracked = -1;
        self->last_decided = -1;
        self->tracking = 1;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(track_records_doc,
"track_records(first_offset, count, /)\n--\n\n"
"From now on, note which records at offsets [first_offset, first_offset + count) map_batches\n"
"settles and which a later record supersedes, so that filter_batches decides their batches\n"
"without reading them (2 bits an offset); count 0 stops it. Forgets what was noted.");

static PyObject *OffsetMap_track_records(OffsetMap *self, PyObject *const *args,
                                         Py_ssize_t nargs)
{
    if (ready(self) < 0 || check_nargs("track_records", nargs, 2) < 0)
        return NULL;
    long long first = PyLong_AsLongLong(args[0]);
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred())
        return NULL;
    if (first < 0 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "first_offset and count are not negative");
        return NULL;
    }
    stop_tracking(self);
    if (count == 0)
        Py_RETURN_NONE;
    self->settled = PyMem_Calloc(tracked_words(count), sizeof(uint64_t));
    self->superseded = PyMem_Calloc(tracked_words(count), sizeof(uint64_t));
    if (self->settled == NULL || self->superseded == NULL) {
        stop_tracking(self);
        return PyErr_NoMemory();
    }
    self->tracked_first = first;
    self->tracked_count = count;
    self->tracking = 1;
    Py_RETURN_NONE;
}

static PyObject *OffsetMap_map_records(OffsetMap *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buffer;
    Py_ssize_t position, end;
    if (ready(self) < 0 || check_nargs("map_records", nargs, 6) < 0 ||
        get_span(args, &buffer, &position, &end) < 0)
        return NULL;
    long long count = PyLong_AsLongLong(args[3]);
    long long base_offset = PyLong_AsLongLong(args[4]);
    long long start = PyLong_AsLongLong(args[5]);
    int status = -1;
    if (!PyErr_Occurred())
        status = map_section(self, buffer.buf, position, end, count, base_offset, start, NULL);
    PyBuffer_Release(&buffer);
    return status < 0 ? NULL : PyLong_FromLong(status);
}

static PyObject *OffsetMap_retain_records(OffsetMap *self, PyObject *const *args,
                                          Py_ssize_t nargs)
{
    Py_buffer buffer;
    Py_ssize_t position, end;
    int64_t kept, keyless, kept_tombstones;
    if (ready(self) < 0 || check_nargs("retain_records", nargs, 6) < 0 ||
        get_span(args, &buffer, &position, &end) < 0)
        return NULL;
    long long count = PyLong_AsLongLong(args[3]);
    long long base_offset = PyLong_AsLongLong(args[4]);
    int retain_deletes = PyObject_IsTrue(args[5]);
    if (PyErr_Occurred() || retain_deletes < 0) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    if (count < 0 || count > end - position) { /* a record takes at least one byte */
        PyBuffer_Release(&buffer);
        Py_RETURN_NONE;
    }
    PyObject *mask = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)count);
    if (mask == NULL) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    int status = retain_section(self, buffer.buf, position, end, count, base_offset,
                                retain_deletes, PyBytes_AS_STRING(mask), &kept, &keyless,
                                &kept_tombstones);
    PyBuffer_Release(&buffer);
    if (status != STATUS_END) {
        Py_DECREF(mask);
        if (status < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(NL)", mask, (long long)keyless);
}

PyDoc_STRVAR(map_batches_doc,
"map_batches(buffer, position, end, start_offset, /)\n--\n\n"
"Map the keyed records (offset >= start_offset) of the whole batches in buffer[position:end],\n"
"moving latest_offset past each batch mapped; stop at the first batch Python must handle\n"
"(compressed, transactional or control, a CRC that does not match, records that do not frame). Returns (position,\n"
"status, records, bytes): where it stopped, why, and what it read.");

static PyObject *OffsetMap_map_batches(OffsetMap *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer buffer;
    Py_ssize_t position, end;
    Header h;
    long long records = 0, bytes = 0;
    int status;
    if (ready(self) < 0 || check_nargs("map_batches", nargs, 4) < 0 ||
        get_span(args, &buffer, &position, &end) < 0)
        return NULL;
    long long start = PyLong_AsLongLong(args[3]);
    if (start == -1 && PyErr_Occurred()) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    const uint8_t *data = buffer.buf;
    for (;;) {
        status = read_header(data, position, end, &h);
        if (status >= 0)
            break;
        if (h.codec != 0 || h.in_transaction) {
            status = STATUS_OTHER;
            break;
        }
        if (h.last_offset >= start) {
            /* The CRC first: it reads the whole batch into the cache the record walk reads. */
            if (!crc_matches(data + position, h.size)) {
                status = STATUS_OTHER; /* Python names the fault */
                break;
            }
            status = map_section(self, data, position + HEADER_SIZE, position + h.size,
                                 h.count, h.base_offset, start, &h);
            if (status == STATUS_CORRUPT)
                status = STATUS_OTHER; /* Python names the fault */
            if (status != STATUS_END) {
                if (status == STATUS_FULL) {
                    records += h.count;
                    bytes += h.size;
                }
                break;
            }
            self->latest_offset = h.last_offset;
        }
        records += h.count;
        bytes += h.size;
        position += h.size;
    }
    PyBuffer_Release(&buffer);
    if (status < 0)
        return NULL;
    return Py_BuildValue("(niLL)", position, status, records, bytes);
}

/* Whether the tombstones of the batch `h` stay in a cleaning at `current_time_ms` (Kafka's
 * shouldRetainRecord): until the delete horizon the batch was given when a cleaning first kept
 * them has passed; always in a batch without one (the first cleaning that keeps them gives it). */
static int retains_deletes(const Header *h, int64_t current_time_ms)
{
    return !h->has_delete_horizon || current_time_ms < h->delete_horizon_ms;
}

/* Whether the whole batch `h` at data[position] keeps all of its records (*keep_all 1) or none
 * (0), with how many it keeps and how many have no key: STATUS_END when that is decided,
 * STATUS_OTHER for a batch Python must handle (including one that keeps all its records but
 * must be rewritten with a delete horizon: it keeps a tombstone and has none yet), -1 on
 * error. */
static int decide_batch(OffsetMap *self, const uint8_t *data, Py_ssize_t position,
                        const Header *h, int64_t current_time_ms, int *keep_all, int64_t *kept,
                        int64_t *keyless)
{
    int64_t kept_tombstones = 0;
    *keyless = 0;
    if (h->base_offset <= self->last_decided)
        self->tracking = 0; /* batches out of order: which of them was settled? */
    if (h->last_offset > self->last_decided)
        self->last_decided = h->last_offset;
    *kept = settled_kept(self, h); /* map_batches checked its CRC; settled records have values */
    if (*kept < 0) {
        /* The CRC first: it reads the whole batch into the cache the record walk reads. */
        if (!crc_matches(data + position, h->size))
            return STATUS_OTHER; /* Python names the fault */
        if (h->base_offset > self->latest_offset && h->has_delete_horizon) {
            *keep_all = 1; /* every record stays and the batch has its horizon: as it is */
            *kept = h->count;
            return STATUS_END;
        }
        int status = retain_section(self, data, position + HEADER_SIZE, position + h->size,
                                    h->count, h->base_offset,
                                    retains_deletes(h, current_time_ms), NULL, kept, keyless,
                                    &kept_tombstones);
        if (status != STATUS_END)
            return status < 0 ? -1 : STATUS_OTHER;
    }
    if (*kept != 0 && *kept != h->count)
        return STATUS_OTHER;
    if (kept_tombstones > 0 && !h->has_delete_horizon)
        return STATUS_OTHER; /* rewritten with a delete horizon */
    *keep_all = *kept != 0;
    return STATUS_END;
}

PyDoc_STRVAR(filter_batches_doc,
"filter_batches(buffer, position, end, current_time_ms, /)\n--\n\n"
"Decide the whole batches of buffer[position:end] that keep all or none of their records, a\n"
"batch's tombstones kept until its delete horizon (none: kept) is at or before\n"
"current_time_ms; stop at the first batch Python must handle (compressed, magic not 2,\n"
"transactional or control, a CRC\n"
"that does not match, records that do not frame, some records kept, tombstones kept in a\n"
"batch without a delete horizon). Returns (position, status,\n"
"kept_spans, records_read, bytes_read, records_kept, bytes_kept, keyless, last_kept_offset):\n"
"kept_spans are (start, end) runs of whole batches to copy.");

static PyObject *OffsetMap_filter_batches(OffsetMap *self, PyObject *const *args,
                                          Py_ssize_t nargs)
{
    Py_buffer buffer;
    Py_ssize_t position, end, span_start = -1;
    Header h;
    long long records = 0, bytes = 0, records_kept = 0, bytes_kept = 0, keyless_total = 0;
    long long last_kept = -1;
    int64_t kept, keyless;
    int status;
    if (ready(self) < 0 || check_nargs("filter_batches", nargs, 4) < 0 ||
        get_span(args, &buffer, &position, &end) < 0)
        return NULL;
    long long current_time_ms = PyLong_AsLongLong(args[3]);
    if (current_time_ms == -1 && PyErr_Occurred()) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    PyObject *spans = PyList_New(0);
    if (spans == NULL)
        goto error;
    const uint8_t *data = buffer.buf;
    for (;;) {
        status = read_header(data, position, end, &h);
        if (status >= 0)
            break;
        if (h.codec != 0 || h.magic != 2 || h.in_transaction) {
            status = STATUS_OTHER;
            break;
        }
        int keep_all;
        status = decide_batch(self, data, position, &h, current_time_ms, &keep_all, &kept,
                              &keyless);
        if (status < 0)
            goto error;
        if (status != STATUS_END)
            break;
        if (keep_all) {
            if (span_start < 0)
                span_start = position;
            records_kept += kept;
            bytes_kept += h.size;
            last_kept = h.last_offset;
        } else if (span_start >= 0) {
            PyObject *span = Py_BuildValue("(nn)", span_start, position);
            if (span == NULL || PyList_Append(spans, span) < 0) {
                Py_XDECREF(span);
                goto error;
            }
            Py_DECREF(span);
            span_start = -1;
        }
        keyless_total += keyless;
        records += h.count;
        bytes += h.size;
        position += h.size;
    }
    if (span_start >= 0) {
        PyObject *span = Py_BuildValue("(nn)", span_start, position);
        if (span == NULL || PyList_Append(spans, span) < 0) {
            Py_XDECREF(span);
            goto error;
        }
        Py_DECREF(span);
    }
    PyBuffer_Release(&buffer);
    return Py_BuildValue("(niNLLLLLL)", position, status, spans, records, bytes, records_kept,
                         bytes_kept, keyless_total, last_kept);
error:
    PyBuffer_Release(&buffer);
    Py_XDECREF(spans);
    return NULL;
}

static PyObject *OffsetMap_get_size(OffsetMap *self, void *closure)
{
    return PyLong_FromSsize_t(self->size);
}

static PyObject *OffsetMap_get_is_full(OffsetMap *self, void *closure)
{
    return PyBool_FromLong(self->size >= self->max_entries);
}

static PyObject *OffsetMap_get_utilization(OffsetMap *self, void *closure)
{
    return PyFloat_FromDouble(self->slots ? (double)self->size / (double)self->slots : 0.0);
}

static PyGetSetDef getset[] = {
    {"size", (getter)OffsetMap_get_size, NULL, "The number of keys in the map.", NULL},
    {"is_full", (getter)OffsetMap_get_is_full, NULL, "No room for one more key.", NULL},
    {"utilization", (getter)OffsetMap_get_utilization, NULL, "Keys per slot.", NULL},
    {NULL},
};

static PyMemberDef members[] = {
    {"slots", T_PYSSIZET, offsetof(OffsetMap, slots), READONLY, "Slots in the table."},
    {"max_entries", T_PYSSIZET, offsetof(OffsetMap, max_entries), READONLY,
     "Keys the map holds at most."},
    {"latest_offset", T_LONGLONG, offsetof(OffsetMap, latest_offset), 0,
     "The map covers every offset up to this one."},
    {"lookups", T_ULONGLONG, offsetof(OffsetMap, lookups), READONLY,
     "Keys looked up so far (put, get and the batch loops)."},
    {"probes", T_ULONGLONG, offsetof(OffsetMap, probes), READONLY,
     "Slots those lookups read: about 2 a lookup at the default load factor."},
    {NULL},
};

static PyMethodDef OffsetMap_methods[] = {
    {"put", (PyCFunction)(void (*)(void))OffsetMap_put, METH_FASTCALL,
     "put(key, offset): map key to offset; ValueError for a new key when the map is full."},
    {"get", (PyCFunction)OffsetMap_get, METH_O,
     "get(key): the key's offset, or -1 when the map does not have it."},
    {"clear", (PyCFunction)OffsetMap_clear, METH_NOARGS,
     "Forget every key, latest_offset and what track_records noted."},
    {"track_records", (PyCFunction)(void (*)(void))OffsetMap_track_records, METH_FASTCALL,
     track_records_doc},
    {"map_records", (PyCFunction)(void (*)(void))OffsetMap_map_records, METH_FASTCALL,
     "map_records(data, position, end, count, base_offset, start_offset): map one batch's\n"
     "records section; a status (0 mapped, 3 full, 4 records that do not frame)."},
    {"retain_records", (PyCFunction)(void (*)(void))OffsetMap_retain_records, METH_FASTCALL,
     "retain_records(data, position, end, count, base_offset, retain_deletes): (mask, keyless)\n"
     "for one batch's records section, mask[i] 1 where record i stays; None if they do not\n"
     "frame."},
    {"map_batches", (PyCFunction)(void (*)(void))OffsetMap_map_batches, METH_FASTCALL,
     map_batches_doc},
    {"filter_batches", (PyCFunction)(void (*)(void))OffsetMap_filter_batches, METH_FASTCALL,
     filter_batches_doc},
    {NULL},
};

static PyTypeObject OffsetMapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.cleaner._offset_map.OffsetMap",
    .tp_doc = PyDoc_STR("OffsetMap(slots, max_entries, secret): key -> latest offset, 24 bytes a\n"
                        "slot; keys hashed with SipHash-1-3 keyed by the 16 bytes of secret."),
    .tp_basicsize = sizeof(OffsetMap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)OffsetMap_init,
    .tp_dealloc = (destructor)OffsetMap_dealloc,
    .tp_methods = OffsetMap_methods,
    .tp_members = members,
    .tp_getset = getset,
};

static PyObject *siphash13_128_function(PyObject *module, PyObject *const *args,
                                        Py_ssize_t nargs)
{
    Py_buffer secret, data;
    if (check_nargs("siphash13_128", nargs, 2) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[0], &secret, PyBUF_SIMPLE) < 0)
        return NULL;
    if (secret.len != SIPHASH_KEY_BYTES) {
        PyBuffer_Release(&secret);
        PyErr_SetString(PyExc_ValueError, "siphash13_128 needs a secret of 16 bytes");
        return NULL;
    }
    if (PyObject_GetBuffer(args[1], &data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&secret);
        return NULL;
    }
    uint64_t first, second;
    siphash13_128(secret.buf, data.buf, (size_t)data.len, &first, &second);
    PyBuffer_Release(&secret);
    PyBuffer_Release(&data);
    return Py_BuildValue("(KK)", (unsigned long long)first, (unsigned long long)second);
}

static PyMethodDef module_functions[] = {
    {"siphash13_128", (PyCFunction)(void (*)(void))siphash13_128_function, METH_FASTCALL,
     "siphash13_128(secret, data, /): the two 64-bit halves of SipHash-1-3-128 of data under\n"
     "the 16-byte secret, as the map hashes keys (for its tests)."},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_offset_map",
    "The log cleaner's offset map and per-record loops, in C (see offset_map.py).", -1,
    module_functions,
};

PyMODINIT_FUNC PyInit__offset_map(void)
{
    if (PyType_Ready(&OffsetMapType) < 0)
        return NULL;
    crc32c_init();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&OffsetMapType);
    if (PyModule_AddObject(m, "OffsetMap", (PyObject *)&OffsetMapType) < 0) {
        Py_DECREF(&OffsetMapType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
