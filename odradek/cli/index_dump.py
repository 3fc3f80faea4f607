"""The index half of ``dump-log``: the entries of a ``.index`` or ``.timeindex`` file, whether
they are in order, and with ``--verify-index`` whether each agrees with the segment's ``.log``
(design §5).

Indexes are opened read-only and released without the trim a normal close does, so inspecting
a file never changes it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from odradek.cli.batch_dump import map_read_only
from odradek.cli.dump_output import DumpPrinter
from odradek.errors import CorruptRecordError
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import NO_TIMESTAMP, RecordBatch
from odradek.storage import log_file_names as names
from odradek.storage.offset_index import OffsetIndex, OffsetPosition
from odradek.storage.time_index import TimeIndex, TimestampOffset

Entry = OffsetPosition | TimestampOffset
Index = OffsetIndex | TimeIndex


class LogLayout:
    """The batches of a ``.log`` as its indexes see them: where each starts, the offsets it
    holds, and the largest timestamp up to and including it."""

    def __init__(self) -> None:
        self._last_offset_by_position: dict[int, int] = {}
        self._base_offsets: list[int] = []
        self._last_offsets: list[int] = []
        self._max_timestamps: list[int] = []

    def add(self, batch: RecordBatch) -> None:
        """Take in the next batch of the file."""
        self._last_offset_by_position[batch.position] = batch.last_offset
        self._base_offsets.append(batch.base_offset)
        self._last_offsets.append(batch.last_offset)
        previous_max = self._max_timestamps[-1] if self._max_timestamps else NO_TIMESTAMP
        self._max_timestamps.append(max(previous_max, batch.max_timestamp))

    def last_offset_of_batch_at(self, position: int) -> int | None:
        """The last offset of the batch starting at ``position``, if one starts there."""
        return self._last_offset_by_position.get(position)

    def max_timestamp_through(self, offset: int) -> int | None:
        """The largest timestamp of the batches up to the one holding ``offset``, if one does."""
        slot = bisect.bisect_left(self._last_offsets, offset)
        if slot < len(self._last_offsets) and self._base_offsets[slot] <= offset:
            return self._max_timestamps[slot]
        return None


def read_log_layout(path: Path) -> tuple[LogLayout, list[str]]:
    """The layout of the ``.log`` at ``path`` up to the first batch that cannot be framed, and
    what stopped the scan there, if anything did."""
    layout = LogLayout()
    with map_read_only(path) as buffer:
        try:
            for batch in MemoryRecords(buffer).batches():
                layout.add(batch)
        except CorruptRecordError as error:
            return layout, [f"the log {path} is corrupt: {error.message}"]
    return layout, []


def _offset_order_problem(previous: OffsetPosition, entry: OffsetPosition) -> str | None:
    if entry.offset <= previous.offset:
        return f"offset is not above the previous entry's {previous.offset}"
    if entry.position < previous.position:
        return f"position is below the previous entry's {previous.position}"
    return None


def _time_order_problem(previous: TimestampOffset, entry: TimestampOffset) -> str | None:
    if entry.timestamp <= previous.timestamp:
        return f"timestamp is not above the previous entry's {previous.timestamp}"
    if entry.offset < previous.offset:
        return f"offset is below the previous entry's {previous.offset}"
    return None


def _offset_log_problem(entry: OffsetPosition, layout: LogLayout) -> str | None:
    """An offset index entry names the position of a batch by that batch's last offset."""
    last_offset = layout.last_offset_of_batch_at(entry.position)
    if last_offset is None:
        return f"no batch of the log starts at position {entry.position}"
    if last_offset != entry.offset:
        return f"the batch at position {entry.position} has last offset {last_offset}"
    return None


def _time_log_problem(entry: TimestampOffset, layout: LogLayout) -> str | None:
    """A time index entry pairs the largest timestamp so far with an offset of the batch
    holding it."""
    max_timestamp = layout.max_timestamp_through(entry.offset)
    if max_timestamp is None:
        return f"offset {entry.offset} is in no batch of the log"
    if max_timestamp != entry.timestamp:
        return f"the largest timestamp up to offset {entry.offset} is {max_timestamp}"
    return None


@dataclass(frozen=True)
class _IndexKind:
    """How to open one kind of index and what its entries must satisfy."""

    index_type: type[OffsetIndex] | type[TimeIndex]
    order_problem: Callable[..., str | None]
    log_problem: Callable[..., str | None]


_OFFSET_INDEX = _IndexKind(OffsetIndex, _offset_order_problem, _offset_log_problem)
_TIME_INDEX = _IndexKind(TimeIndex, _time_order_problem, _time_log_problem)


def dump_index_file(path: Path, printer: DumpPrinter, verify: bool) -> list[str]:
    """Print the entries of the index at ``path`` and a summary; return what is wrong with it.

    With ``verify`` each entry is also checked against the ``.log`` of the same segment.
    """
    try:
        base_offset = names.offset_from_file_name(path.name)
    except ValueError as error:
        return [f"{error}: index offsets are relative to the base offset the name gives"]
    kind = _TIME_INDEX if names.TIME_INDEX_FILE_SUFFIX in path.suffixes else _OFFSET_INDEX
    index = kind.index_type(path, base_offset, max_index_size=path.stat().st_size, writable=False)
    try:
        entries = _used_entries(index)
        _print_index(index, entries, printer)
        problems = _size_problems(index)
        problems += _located(entries, index.entry_size, _order_check(kind, base_offset, entries))
    finally:
        index.close_handler()
    if verify:
        log_path = _segment_log(path, base_offset)
        problems += _verify_against_log(log_path, entries, kind, index.entry_size)
    return problems


def _used_entries(index: Index) -> list[Entry]:
    """The entries the index holds. A preallocated index (a live or a crashed segment's) ends
    in zeros that were never written, and a zero entry is never a written one: no offset index
    entry points at the first batch (entries follow index.interval.bytes of records), and a
    time index entry of timestamp 0 at the base offset says nothing a lookup needs. So the
    entries end at the first all-zero one, entry 0 included: an index of zeros holds none
    (Kafka's dump tool takes a zero entry 0 for a real one, and fails on live segments)."""
    entries: list[Entry] = []
    for n in range(index.entries):
        entry = index.entry(n)
        if _is_unwritten(entry, index.base_offset):
            break
        entries.append(entry)
    return entries


def _is_unwritten(entry: Entry, base_offset: int) -> bool:
    """Whether ``entry`` is all zeros on disk: relative offset 0 and a zero second field."""
    other = entry.position if isinstance(entry, OffsetPosition) else entry.timestamp
    return entry.offset == base_offset and other == 0


def _print_index(index: Index, entries: list[Entry], printer: DumpPrinter) -> None:
    for entry in entries:
        printer.entry(asdict(entry))
    printer.summary(
        {
            "entries": len(entries),
            "unusedEntries": index.entries - len(entries),
            "fileSize": index.length,
        }
    )


def _size_problems(index: Index) -> list[str]:
    partial = index.length % index.entry_size
    if not partial:
        return []
    return [
        f"{index.length} bytes is not a whole number of {index.entry_size}-byte entries: "
        f"the last {partial} bytes at byte {index.length - partial} are a partial entry"
    ]


def _order_check(
    kind: _IndexKind, base_offset: int, entries: list[Entry]
) -> Callable[[int, Entry], str | None]:
    """Entry ``n`` is at or above the base offset and in order after entry ``n - 1``."""

    def check(n: int, entry: Entry) -> str | None:
        if entry.offset < base_offset:
            return f"offset is below the base offset {base_offset}"
        return kind.order_problem(entries[n - 1], entry) if n else None

    return check


def _verify_against_log(
    log_path: Path, entries: list[Entry], kind: _IndexKind, entry_size: int
) -> list[str]:
    """Each entry checked against the batches of ``log_path``."""
    try:
        layout, problems = read_log_layout(log_path)
    except OSError as error:
        return [f"cannot verify against {log_path}: {error.strerror}"]
    return problems + _located(
        entries, entry_size, lambda _, entry: kind.log_problem(entry, layout)
    )


def _located(
    entries: list[Entry], entry_size: int, check: Callable[[int, Entry], str | None]
) -> list[str]:
    """What ``check(n, entry)`` finds wrong with each entry, naming the entry and its byte."""
    problems = []
    for n, entry in enumerate(entries):
        problem = check(n, entry)
        if problem:
            fields = ", ".join(f"{name} {value}" for name, value in asdict(entry).items())
            problems.append(f"entry {n} at byte {n * entry_size} ({fields}): {problem}")
    return problems


def _segment_log(index_path: Path, base_offset: int) -> Path:
    """The ``.log`` next to an index, with the same temporary suffix (``.deleted``...)."""
    return names.log_file(index_path.parent, base_offset, "".join(index_path.suffixes[1:]))
