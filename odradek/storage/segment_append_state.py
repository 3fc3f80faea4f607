"""SegmentAppendState: the append state of the active segment, owned in one place.

While a segment takes appends, this object owns what an append reads and changes: the
``.log`` file's descriptor and size, the bytes written since the last index entry, the
segment's max timestamp and its offset, the first batch's timestamp the roll check ages the
segment by, and for each index its writable map, entry count, room and last entry. The roll
check, the write and the index entries of an append are one call on it; ``FileRecords``,
``OffsetIndex``, ``TimeIndex`` and ``LogSegment`` read those facts through it while it is lent
to them, and own them again once the segment takes it back (``release``, which also gives
back the views it holds on the index maps, so that they can be resized or closed).

``_segment_append_state.c`` is the same type in C (docs/native.md); this one is its twin,
used where the C one is not built, and the oracle it is tested against
(tests/test_segment_append_state.py). Both raise ``ValueError`` for an index entry out of
order or past a full index: the UnifiedLog's validation and roll check make those impossible, so
they name a broken invariant, not bad input.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import Callable
from typing import Protocol

from odradek.config.log_config import LogConfig
from odradek.errors import KafkaError
from odradek.int_limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from odradek.record.record_batch import HEADER_SIZE, LOG_OVERHEAD
from odradek.storage import writeback
from odradek.storage.log_validator import AppendRules, validate_and_assign_offsets
from odradek.storage.producer_table import ProducerTableType

logger = logging.getLogger(__name__)

# baseOffset, batchLength, lastOffsetDelta and maxTimestamp, in one unpack.
_INDEXED_FIELDS = struct.Struct(">qi11xi8xq")
_BATCH_LENGTH = struct.Struct(">i")
_BATCH_LENGTH_AT = 8
_ATTRIBUTES_LOW_BYTE_AT = 22  # the codec's bits
_CODEC_MASK = 0x07
_PRODUCER_ID_AT = 43
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TIME_ENTRY_SIZE = _TIME_ENTRY.size
_OFFSET_ENTRY_SIZE = _OFFSET_ENTRY.size

MAP_ATTEMPTS = 3
"""How many times _ensure_maps maps the indexes again when release_maps keeps racing it."""


class AppendState(Protocol):
    """What both implementations offer (the C type and ``PythonSegmentAppendState``)."""

    @property
    def fd(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def bytes_since_last_index_entry(self) -> int: ...
    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]: ...
    @property
    def rolling_based_timestamp(self) -> int | None: ...
    @property
    def offset_entries(self) -> int: ...
    @property
    def offset_last(self) -> tuple[int, int] | None: ...
    @property
    def time_entries(self) -> int: ...
    @property
    def time_last(self) -> tuple[int, int] | None: ...
    @property
    def released(self) -> bool: ...

    def try_append(
        self,
        records: bytes | bytearray | memoryview,
        largest_offset: int,
        largest_timestamp: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool: ...

    def append_batch(
        self,
        records: bytes | bytearray | memoryview,
        rules: AppendRules,
        now_ms: int | None,
        next_offset: int,
        leader_epoch: int,
        log_start_offset: int,
        info_type: type[tuple],
        end_type: type[tuple],
        producers: ProducerTableType | None,
    ) -> tuple[tuple, tuple] | None: ...

    def append(
        self, records: bytes | bytearray | memoryview, write_through: bool = False
    ) -> None: ...

    def release(self) -> None: ...

    def release_maps(self) -> None: ...


class PythonSegmentAppendState:
    """The active segment's append state, in Python (the C type's twin; see the module)."""

    def __init__(
        self,
        *,
        fd: int,
        size: int,
        base_offset: int,
        index_interval_bytes: int,
        bytes_since_last_index_entry: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        offset_entries: int,
        offset_max_entries: int,
        offset_last: tuple[int, int] | None,
        time_entries: int,
        time_max_entries: int,
        time_last: tuple[int, int] | None,
        rolling_based_timestamp: int | None,
        created_ms: int,
        roll_jitter_ms: int,
        max_write_bytes: int,
        map_indexes: Callable[[], tuple[object | None, object | None]],
    ) -> None:
        if (offset_entries > 0) != (offset_last is not None) or (time_entries > 0) != (
            time_last is not None
        ):
            raise ValueError("an index has entries exactly when it has a last entry")
        self._fd = fd
        self._size = size
        self._base_offset = base_offset
        self._interval = index_interval_bytes
        self._since_last_entry = bytes_since_last_index_entry
        self._latest = (max_timestamp, offset_of_max_timestamp)
        self._time_indexed = False
        self._offset_entries = offset_entries
        self._offset_max_entries = offset_max_entries
        self._offset_last = offset_last
        self._time_entries = time_entries
        self._time_max_entries = time_max_entries
        self._time_last = time_last
        if offset_entries > offset_max_entries or time_entries > time_max_entries:
            raise ValueError("an index holds more entries than it has room for")
        # Views on the index maps, taken when an entry is first due (the C type holds buffers:
        # a map with either cannot be resized or closed) and given back by release_maps.
        self._map_indexes: Callable[[], tuple[object | None, object | None]] | None = map_indexes
        self._offset_view: memoryview | None = None
        self._time_view: memoryview | None = None
        self._map_releases = 0  # release_maps calls, so _ensure_maps sees one racing it
        self._drop_views = False  # the views serve the running append only
        self._rolling_based_timestamp = rolling_based_timestamp
        self._created_ms = created_ms
        self._roll_jitter_ms = roll_jitter_ms
        self._max_write_bytes = max_write_bytes
        self._released = False

    # --- the facts it owns -------------------------------------------------------------------

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def size(self) -> int:
        return self._size

    @property
    def bytes_since_last_index_entry(self) -> int:
        return self._since_last_entry

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        return self._latest

    @property
    def rolling_based_timestamp(self) -> int | None:
        return self._rolling_based_timestamp

    @property
    def offset_entries(self) -> int:
        return self._offset_entries

    @property
    def offset_last(self) -> tuple[int, int] | None:
        return self._offset_last

    @property
    def time_entries(self) -> int:
        return self._time_entries

    @property
    def time_last(self) -> tuple[int, int] | None:
        return self._time_last

    @property
    def released(self) -> bool:
        return self._released

    # --- appends -----------------------------------------------------------------------------

    def try_append(
        self,
        records: bytes | bytearray | memoryview,
        largest_offset: int,
        largest_timestamp: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Append ``records`` unless the segment must roll first; whether it appended.

        The roll check (design §4 step 4): size (segment.bytes), age (segment.ms less the
        jitter, by record time from the first batch's max timestamp, by the clock from the
        segment's creation when that batch has none), a full index, or a relative offset
        overflow.
        """
        self._check_not_released()
        if self._must_roll(
            len(records), largest_offset, largest_timestamp, now_ms, segment_bytes, segment_ms
        ):
            return False
        if records:
            self._append(records, False)
        return True

    def append_batch(
        self,
        records: bytes | bytearray | memoryview,
        rules: AppendRules,
        now_ms: int | None,
        next_offset: int,
        leader_epoch: int,
        log_start_offset: int,
        info_type: type[tuple],
        end_type: type[tuple],
        producers: ProducerTableType | None,
    ) -> tuple[tuple, tuple] | None:
        """A produce request of one uncompressed batch of no producer id, validated, given its
        offsets and written in one call when the segment need not roll first (the log's common
        append): LogAppendInfo's fields as ``info_type`` and the new log end (offset, segment
        base offset, segment size) as ``end_type``. None, having written nothing, for anything
        else (a fault, several batches, a producer id, a compressed batch, a roll due, a value
        past int64 or an epoch past int32): the general path then decides and names any fault.

        Given ``producers`` (the log's producer table), a producer's batch is taken too when
        the table's ``try_next`` accepts it (the producer going on at its next sequence, in its
        epoch): asked last, once the batch is validated (with its offsets, which the table
        notes) and no roll is due, as the general path asks it; ``commit_next`` once written.
        Anything the table declines (a new producer or epoch, a gap, a retry) goes the general
        way, with nothing written.

        ``rules`` is ``log_validator.append_rules``' tuple; ``now_ms`` None reads the system
        clock here (as ``Clock.milliseconds``).
        """
        self._check_not_released()
        data = bytes(records)
        total = len(data)
        if (
            total < HEADER_SIZE
            or _BATCH_LENGTH.unpack_from(data, _BATCH_LENGTH_AT)[0] + LOG_OVERHEAD != total
            or (data[_PRODUCER_ID_AT] < 0x80 and producers is None)  # a producer id >= 0
            or data[_ATTRIBUTES_LOW_BYTE_AT] & _CODEC_MASK
        ):
            return None
        if data[_PRODUCER_ID_AT] >= 0x80:
            producers = None  # a batch of no producer: the table has nothing to say of it
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        keys, max_bytes, before_ms, after_ms, append_time, segment_bytes, segment_ms = rules
        numbers = (max_bytes, before_ms, after_ms, segment_bytes, segment_ms, now_ms)
        if not all(INT64_MIN <= number <= INT64_MAX for number in (*numbers, next_offset)) or not (
            INT32_MIN <= leader_epoch <= INT32_MAX
        ):
            return None
        config = LogConfig(
            cleanup_policy=("compact",) if keys else ("delete",),
            max_message_bytes=max_bytes,
            message_timestamp_type="LogAppendTime" if append_time else "CreateTime",
            message_timestamp_before_max_ms=before_ms,
            message_timestamp_after_max_ms=after_ms,
        )
        try:
            validated = validate_and_assign_offsets(
                data,
                next_offset=next_offset,
                config=config,
                now_ms=now_ms,
                partition_leader_epoch=leader_epoch,
            )
        except KafkaError:
            return None
        last_offset = validated.last_offset
        if last_offset > INT64_MAX or self._must_roll(
            total, last_offset, validated.max_timestamp, now_ms, segment_bytes, segment_ms
        ):
            return None
        if producers is not None and not producers.try_next(validated.records):
            return None
        self._append(validated.records, False)
        if producers is not None:
            producers.commit_next()
        info = (
            validated.first_offset,
            last_offset,
            validated.max_timestamp,
            validated.offset_of_max_timestamp,
            now_ms if append_time else -1,
            log_start_offset,
            validated.record_count,
            validated.batch_count,
            total,
        )
        end = (last_offset + 1, self._base_offset, self._size)
        return tuple.__new__(info_type, info), tuple.__new__(end_type, end)

    def append(self, records: bytes | bytearray | memoryview, write_through: bool = False) -> None:
        """Write whole batches at the end of the file and add the index entries due: one in each
        index once more than ``index.interval.bytes`` were written since the last (design §5).

        ``write_through`` sends each piece to disk before the next (the cleaner's segments).
        """
        self._check_not_released()
        if records:
            self._append(records, write_through)

    def release(self) -> None:
        """Give back the views on the index maps; the facts stay readable, appends stop."""
        self._released = True
        self._map_indexes = None
        for view in (self._offset_view, self._time_view):
            if view is not None:
                view.release()
        self._offset_view = self._time_view = None

    def release_maps(self) -> None:
        """Let go of the views on the index maps until the next index entry maps them again
        (the idle file cache dropped a map; it may run in another thread, while an append
        still writes through a view it holds: that view goes when the append is done)."""
        self._map_releases += 1
        self._offset_view = self._time_view = None

    # --- steps -------------------------------------------------------------------------------

    def _must_roll(
        self,
        length: int,
        largest_offset: int,
        largest_timestamp: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """The roll check of ``try_append`` for ``length`` more bytes."""
        size = self._size
        rolling = self._rolling_based_timestamp
        return (
            size > segment_bytes - length
            or (
                size > 0
                and (
                    largest_timestamp - rolling
                    if rolling is not None and rolling >= 0
                    else now_ms - self._created_ms
                )
                > segment_ms - self._roll_jitter_ms
            )
            or self._offset_entries >= self._offset_max_entries
            or self._time_entries >= self._time_max_entries - 1
            or not 0 <= largest_offset - self._base_offset <= INT32_MAX
        )

    def _check_not_released(self) -> None:
        if self._released:
            raise ValueError("the segment's append state was released")

    def _ensure_maps(self) -> tuple[memoryview | None, memoryview | None]:
        """Views on both index maps, mapped again when they were let go.

        The cache may evict an index while ``map_indexes`` runs, after its map was taken, and
        its release_maps then finds no view to let go. Views on such a map would outlive the
        cache's hold on it, so they are let go and the indexes mapped again (which puts them
        back in the cache); past MAP_ATTEMPTS they serve the running append only."""
        offset_view, time_view = self._offset_view, self._time_view
        if offset_view is not None and time_view is not None:
            return offset_view, time_view
        for _ in range(MAP_ATTEMPTS):
            releases = self._map_releases
            assert self._map_indexes is not None
            offset_map, time_map = self._map_indexes()
            if self._released:
                raise ValueError("the segment's append state was released")
            offset_view, time_view = self._offset_view, self._time_view
            if offset_view is None:
                offset_view = _view(offset_map, self._offset_max_entries, _OFFSET_ENTRY_SIZE)
            if time_view is None:
                time_view = _view(time_map, self._time_max_entries, _TIME_ENTRY_SIZE)
            if self._map_releases == releases:
                self._offset_view, self._time_view = offset_view, time_view
                break
        else:  # an eviction at every attempt: the views serve the running append only
            self._offset_view, self._time_view = offset_view, time_view
            self._drop_views = True
        return offset_view, time_view

    def _append(self, records: bytes | bytearray | memoryview, write_through: bool) -> None:
        try:
            self._append_and_index(records, write_through)
        finally:
            if self._drop_views:  # views on maps evicted meanwhile (_ensure_maps)
                self._drop_views = False
                self._offset_view = self._time_view = None

    def _append_and_index(
        self, records: bytes | bytearray | memoryview, write_through: bool
    ) -> None:
        batches = _frame(records)
        position = self._size
        self._write(records, position, write_through)
        self._size = position + len(records)
        if position == 0:
            self._rolling_based_timestamp = batches[0][4]
        interval = self._interval
        since_last_entry = self._since_last_entry
        for position_in_records, size, base_offset, last_offset_delta, max_timestamp in batches:
            last_offset = base_offset + last_offset_delta
            if max_timestamp > self._latest[0]:
                self._latest = (max_timestamp, last_offset)
                self._time_indexed = False
            if since_last_entry > interval:
                offset_view, time_view = self._ensure_maps()
                since_last_entry = 0
                self._since_last_entry = 0
                self._append_offset_entry(offset_view, last_offset, position + position_in_records)
                if not self._time_indexed:
                    self._maybe_append_time_entry(time_view, *self._latest)
                    self._time_indexed = True
            since_last_entry += size
        self._since_last_entry = since_last_entry

    def _write(self, records: bytes | bytearray | memoryview, position: int, through: bool) -> None:
        """All of ``records`` at ``position``, or none of it: a failed write is cut back."""
        fd = self._fd
        total = len(records)
        try:
            one_call = total <= self._max_write_bytes and not through
            written = os.pwrite(fd, records, position) if one_call else 0
            if written < total:  # in pieces, or a short write (disk nearly full) to finish
                with memoryview(records) as view:
                    while written < total:
                        piece = os.pwrite(
                            fd, view[written : written + self._max_write_bytes], position + written
                        )
                        if through:
                            writeback.write_back(fd, position + written, piece)
                        written += piece
        except OSError:
            os.ftruncate(fd, position)
            raise

    def _append_offset_entry(self, view: memoryview | None, offset: int, position: int) -> None:
        relative = offset - self._base_offset
        last = self._offset_last
        if last is not None and relative <= last[0]:
            raise ValueError(f"offset index entry {offset} is not above the last one")
        if not 0 <= position <= INT32_MAX or not 0 <= relative <= INT32_MAX:
            raise ValueError(f"offset index entry ({offset}, {position}) does not fit int32")
        entries = self._offset_entries
        if entries >= self._offset_max_entries:
            raise ValueError("the offset index is full")
        assert view is not None
        _OFFSET_ENTRY.pack_into(view, entries * _OFFSET_ENTRY_SIZE, relative, position)
        self._offset_entries = entries + 1
        self._offset_last = (relative, position)

    def _maybe_append_time_entry(
        self, view: memoryview | None, timestamp: int, offset: int
    ) -> None:
        """TimeIndex.maybe_append's rule: only a timestamp above the last entry's is added."""
        relative = offset - self._base_offset
        last = self._time_last
        if last is not None and timestamp == last[0] and relative >= last[1]:
            return
        entries = self._time_entries
        if entries >= self._time_max_entries - 1:
            raise ValueError("the time index is full")
        if last is None:
            if timestamp <= -1:
                return
        else:
            if relative < last[1] or timestamp < last[0]:
                raise ValueError(f"time index entry ({timestamp}, {offset}) is below the last")
            if timestamp == last[0]:
                return
        if not 0 <= relative <= INT32_MAX:
            raise ValueError(f"time index entry offset {offset} does not fit int32")
        assert view is not None
        _TIME_ENTRY.pack_into(view, entries * _TIME_ENTRY_SIZE, timestamp, relative)
        self._time_entries = entries + 1
        self._time_last = (timestamp, relative)


def _view(index_map: object | None, max_entries: int, entry_size: int) -> memoryview | None:
    """A view on an index map (None: an empty file, which has room for nothing)."""
    if index_map is None:
        if max_entries > 0:
            raise ValueError("an index has room but no map")
        return None
    view = memoryview(index_map)  # type: ignore[arg-type]
    if view.nbytes // entry_size < max_entries:
        view.release()
        raise ValueError("an index map is smaller than its room")
    return view


def _frame(
    records: bytes | bytearray | memoryview,
) -> list[tuple[int, int, int, int, int]]:
    """(position, size, base offset, last offset delta, max timestamp) of each batch; raises
    ValueError unless ``records`` is whole batches end to end."""
    batches = []
    position = 0
    total = len(records)
    unpack_from = _INDEXED_FIELDS.unpack_from
    while position < total:
        if position + HEADER_SIZE > total:
            raise ValueError(f"records do not frame: a partial batch header at {position}")
        base_offset, batch_length, last_offset_delta, max_timestamp = unpack_from(records, position)
        size = batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE or size > total - position:
            raise ValueError(f"records do not frame: batch length {batch_length} at {position}")
        batches.append((position, size, base_offset, last_offset_delta, max_timestamp))
        position += size
    return batches


try:
    from odradek.storage._segment_append_state import SegmentAppendState as _NativeState
except ImportError:
    _NativeState = None
    logger.warning(
        "odradek.storage._segment_append_state is not built; the segment's append state is "
        "kept in Python (slower appends)"
    )

#: The implementation segments use: the C type when it is built, else the Python twin.
SegmentAppendState: type = _NativeState if _NativeState is not None else PythonSegmentAppendState
