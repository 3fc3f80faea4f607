"""ProducerTable: one partition's producers, owned in one place.

Per producer id: its epoch, the time of its last batch and the metadata of its last five
batches, each ``(last_seq, last_offset, offset_delta, timestamp)``, oldest first, producers in
the order they came, and whether its transaction is open in the partition (the producer state
manager sets it: :meth:`set_in_transaction`). The append path asks it one question,
:meth:`try_next`: is this request one batch that goes on where its known producer left off
(same epoch, the next sequence, no wrap inside the batch, transactional exactly when its
transaction is open)? Such a batch cannot be a retry and passes every rule, so it is noted and
:meth:`commit_next` adds it once written (a transactional batch that opens a transaction, or a
plain one while it is open, is the manager's to decide). A producer whose transaction is open
never expires. Every other request (a new producer, a
new epoch, a gap, a retry, several batches) is decided by ``producer_append_info``, which reads
entries with :meth:`get` and writes them with :meth:`put`.

``_producer_table.c`` is the same type in C (docs/native.md): on the append path it answers
the common batch in a tenth of the time this one takes. This one is its twin, used where the C
one is not built, and the oracle it is tested against (tests/test_producer_table.py). Both
expect what the broker gives them: epochs that fit an int16 and sequences and deltas an int32
(the C type raises OverflowError for others).
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Protocol

from odradek.int_limits import INT32_MAX
from odradek.record.record_batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
)
from odradek.storage.producer_state_entry import NUM_BATCHES_TO_RETAIN

# baseOffset, batchLength, (skip ple, magic, crc, attributes), lastOffsetDelta,
# (skip baseTimestamp), maxTimestamp, producerId, producerEpoch, baseSequence
BATCH_PRODUCER_FIELDS = struct.Struct(">qi11xi8xqqhi")
_unpack_fields = BATCH_PRODUCER_FIELDS.unpack_from
_ATTRIBUTES_LOW = ATTRIBUTES_OFFSET + 1  # the transactional flag's byte

Batch = tuple[int, int, int, int]
"""One written batch: (last_seq, last_offset, offset_delta, timestamp)."""
Row = tuple[int, int, int, int, int, int]
"""One snapshot row: (producer_id, epoch, last_seq, last_offset, offset_delta, timestamp)."""


class ProducerTableType(Protocol):
    """What both implementations offer (the C type and ``PythonProducerTable``)."""

    def try_next(self, records: bytes | bytearray | memoryview) -> bool: ...
    def commit_next(self) -> None: ...
    def get(self, producer_id: int) -> tuple[int, int, tuple[Batch, ...]] | None: ...
    def put(
        self, producer_id: int, epoch: int, last_timestamp: int, batches: tuple[Batch, ...]
    ) -> None: ...
    def set_in_transaction(self, producer_id: int, open: bool) -> None: ...
    def add_batch(
        self,
        producer_id: int,
        epoch: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
    ) -> None: ...
    def remove_expired(self, now_ms: int, expiration_ms: int) -> int: ...
    def clear(self) -> None: ...
    def producer_ids(self) -> list[int]: ...
    def rows(self) -> list[Row]: ...
    def last_data_offsets(self) -> dict[int, int]: ...
    def __len__(self) -> int: ...
    def __contains__(self, producer_id: object) -> bool: ...


class _Entry:
    __slots__ = ("epoch", "last_timestamp", "batches", "in_transaction")

    def __init__(self) -> None:
        self.epoch = -1
        self.last_timestamp = -1
        self.batches: deque[Batch] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.in_transaction = False


class PythonProducerTable:
    """One partition's producers, in Python (the C type's twin; see the module)."""

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        self._next: tuple[_Entry, Batch] | None = None

    def try_next(self, records: bytes | bytearray | memoryview) -> bool:
        self._next = None
        if len(records) < HEADER_SIZE:
            return False
        base_offset, batch_length, delta, max_timestamp, producer_id, epoch, seq = _unpack_fields(
            records, 0
        )
        entry = self._entries.get(producer_id)
        if (
            entry is None
            or batch_length + LOG_OVERHEAD != len(records)
            or not entry.batches
            or epoch != entry.epoch
            or seq != entry.batches[-1][0] + 1
            or seq > INT32_MAX - delta
            or bool(records[_ATTRIBUTES_LOW] & TRANSACTIONAL_FLAG_MASK) != entry.in_transaction
        ):
            return False
        self._next = (entry, (seq + delta, base_offset + delta, delta, max_timestamp))
        return True

    def commit_next(self) -> None:
        noted, self._next = self._next, None
        if noted is None:
            raise ValueError("no batch noted by try_next to commit")
        entry, batch = noted
        entry.batches.append(batch)  # a bounded deque: the oldest of five goes
        entry.last_timestamp = batch[3]

    def get(self, producer_id: int) -> tuple[int, int, tuple[Batch, ...]] | None:
        entry = self._entries.get(producer_id)
        if entry is None:
            return None
        return entry.epoch, entry.last_timestamp, tuple(entry.batches)

    def put(
        self, producer_id: int, epoch: int, last_timestamp: int, batches: tuple[Batch, ...]
    ) -> None:
        self._next = None
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = self._entries[producer_id] = _Entry()
        entry.epoch = epoch
        entry.last_timestamp = last_timestamp
        entry.batches = deque((tuple(batch) for batch in batches), maxlen=NUM_BATCHES_TO_RETAIN)

    def set_in_transaction(self, producer_id: int, open: bool) -> None:
        entry = self._entries.get(producer_id)
        if entry is None:
            raise KeyError(f"producer {producer_id} is not in the table")
        self._next = None
        entry.in_transaction = bool(open)

    def add_batch(
        self,
        producer_id: int,
        epoch: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
    ) -> None:
        self._next = None
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = self._entries[producer_id] = _Entry()
        if entry.epoch != epoch:
            entry.batches.clear()
            entry.epoch = epoch
        entry.batches.append((last_seq, last_offset, offset_delta, timestamp))
        entry.last_timestamp = timestamp

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        expired = [
            pid
            for pid, entry in self._entries.items()
            if now_ms - entry.last_timestamp >= expiration_ms and not entry.in_transaction
        ]
        for pid in expired:
            del self._entries[pid]
        if expired:
            self._next = None
        return len(expired)

    def clear(self) -> None:
        self._next = None
        self._entries.clear()

    def producer_ids(self) -> list[int]:
        return list(self._entries)

    def rows(self) -> list[Row]:
        return [
            (pid, entry.epoch, *batch)
            for pid, entry in self._entries.items()
            for batch in (entry.batches or ((-1, -1, 0, entry.last_timestamp),))
        ]

    def last_data_offsets(self) -> dict[int, int]:
        return {
            pid: entry.batches[-1][1] if entry.batches else -1
            for pid, entry in self._entries.items()
        }

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, producer_id: object) -> bool:
        return producer_id in self._entries


ProducerTable: type[ProducerTableType]
try:
    from odradek.storage._producer_table import ProducerTable
except ImportError:  # no C compiler at install: the same table, in Python
    ProducerTable = PythonProducerTable
