"""A stateful model test: random operations on a UnifiedLog against a simple in-memory model.

The model is the list of batches the log holds (offsets, values, byte sizes, timestamps), the
log start offset, the log end offset and the high watermark. Every read, offset and segment size
is checked against it across rolls, truncation, delete-records, retention (by time, size and log
start offset), high watermark moves, clean restarts and crashes that damage anything not yet
flushed. The model takes only the segments' base offsets from the log: which segments retention
and recovery keep, it predicts from design §10 and design §8.

Some batches come from idempotent producers: a producer with batches left in the log must go on
at the sequence after its last one (whatever truncation, retention, restarts and crashes did
to the producer state, rebuilt from snapshots and the log), and a retry of its last batch is
answered with that batch's offsets and written nowhere: exactly once. A producer whose batches
are all gone is not used again (what the broker then remembers of it depends on snapshots
retention already removed).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate
from pathlib import Path

import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from hypothesis_budget import examples
from log_helpers import BASE_TIME_MS, records_of

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.errors import OffsetOutOfRangeError
from odradek.record.compression import CompressionType
from odradek.record.record_batch_builder import build_batch
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.scheduler import ScheduledTask, Scheduler
from odradek.storage.unified_log import UnifiedLog

CONFIG = LogConfig(
    segment_bytes=700, index_interval_bytes=120, segment_index_bytes=8 * 16, file_delete_delay_ms=0
)
# The logs live in memory where the machine has a memory file system: the model tears files
# itself to simulate crashes, so the fsyncs it makes the log do buy nothing here, and on a disk
# that two test suites share they stalled for seconds (the state machine ran past pytest's
# timeout, which Hypothesis, replaying the interrupted example, reported as flaky data generation).
MEMORY_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
# 250 examples of 100 steps: about 100 s of CPU under CI's profile, more than pytest's 300 s on
# a machine whose two cores run two suites. Past a timeout Hypothesis reports the interrupted
# example as flaky, not the timeout: allow what the budget takes on such a machine.
pytestmark = pytest.mark.timeout(900)
# 0xff first: it can never be a batch's last byte (an unfinished varint), so the garbage cannot
# complete a torn batch by chance.
GARBAGE = b"\xffgarbage\x00" * 5
INDEX_DAMAGE = ("keep", "truncate", "zero", "garbage", "delete")
# A batch to append: (records, bytes per value, codec).
BATCHES = st.tuples(st.integers(1, 6), st.integers(0, 80), st.sampled_from(list(CompressionType)))
# Times on the 10 ms grid of the appends' clock, so that ages hit retention.ms exactly too.
MILLIS = st.integers(0, 100).map(lambda n: 10 * n)
# Retention settings that fire within a test.
RETENTION = st.builds(
    lambda ms, size, policy: replace(
        CONFIG, retention_ms=ms, retention_bytes=size, cleanup_policy=policy
    ),
    st.just(-1) | MILLIS,
    st.just(-1) | st.integers(0, 1500),
    st.sampled_from([("delete",), ("compact",), ("compact", "delete")]),
)

Records = list[tuple[int, bytes]]
# A retention rule of design §10: (base, batches, the next segment's base or None) -> delete it?
SegmentRule = Callable[[int, list["ModelBatch"], "int | None"], bool]


class UnknownAge(Exception):
    """The time rule reached a segment whose largest timestamp the model cannot know."""


@dataclass(frozen=True)
class ModelBatch:
    first_offset: int
    values: tuple[bytes, ...]
    size: int  # bytes in the segment file
    max_timestamp: int
    producer: tuple[int, int] | None = None  # (producer id, base sequence) if idempotent

    @property
    def last_offset(self) -> int:
        return self.first_offset + len(self.values) - 1

    @property
    def next_offset(self) -> int:
        return self.first_offset + len(self.values)


class ManualScheduler(Scheduler):
    """A scheduler that runs nothing by itself: tasks wait until the test runs them.

    So the background flush after a roll never races a simulated crash, the recovery point lags
    behind rolled segments until the test lets that flush run, and deletions (of segments
    renamed ``.deleted``) come late.
    """

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[ScheduledTask] = []

    def schedule(
        self, name: str, function: Callable[[], object], delay_ms: int = 0, period_ms: int = -1
    ) -> ScheduledTask:
        task = ScheduledTask(0.0, len(self.pending), name, function)
        self.pending.append(task)
        return task

    def run_pending(self, prefix: str = "") -> None:
        """Run, in order, the waiting tasks whose name starts with ``prefix``."""
        due = [task for task in self.pending if task.name.startswith(prefix)]
        self.pending = [task for task in self.pending if task not in due]
        for task in due:
            task.function()


def tear(path: Path, kept: int, garbage: bool) -> None:
    """What a crash left of a ``.log``: its first ``kept`` bytes, then maybe garbage."""
    os.truncate(path, kept)
    if garbage:
        with open(path, "ab") as file:
            file.write(GARBAGE)


def damage_index(path: Path, how: str, data: st.DataObject) -> None:
    """What a crash left of an unflushed index file: see INDEX_DAMAGE."""
    if how == "keep" or not path.exists():
        return
    size = path.stat().st_size
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        os.truncate(path, data.draw(st.integers(0, size)))
    elif how == "zero":
        path.write_bytes(bytes(size))
    else:
        path.write_bytes(data.draw(st.binary(min_size=size, max_size=size)))


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(dir=MEMORY_DIR))
        self.dir = self.root / "model-0"
        self.clock = MockClock(BASE_TIME_MS)
        self.scheduler = ManualScheduler()
        self.config = CONFIG
        self.log = UnifiedLog.open(self.dir, CONFIG, self.scheduler, clock=self.clock)
        self.batches: list[ModelBatch] = []  # every batch still in a segment, below the LSO too
        self.log_start_offset = 0
        self.next_offset = 0  # the log end offset
        self.high_watermark = 0
        self.high_watermark_set = False  # set from an offset alone: the next read resolves it
        # Segments (by base) whose largest timestamp the log may under-state: truncation reads it
        # back from the truncated (sparse) time index, design §10's source, not from the batches.
        self.stale_timestamps: set[int] = set()
        self.counter = 0
        self.next_producer_id = 1000
        self.sent: dict[tuple[int, int], bytes] = {}  # (producer, base sequence) -> the batch

    def teardown(self) -> None:
        self.scheduler.run_pending()
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # --- model helpers -----------------------------------------------------------------------

    def expected_records(self, start: int, isolation: FetchIsolation) -> Records:
        """Records from ``start`` a read may return: with HIGH_WATERMARK only whole batches
        below the HW (a read stops at the byte position of the HW's batch, design §6)."""
        end = self.next_offset if isolation is FetchIsolation.LOG_END else self.high_watermark
        return [
            (batch.first_offset + i, value)
            for batch in self.batches
            if batch.last_offset < end
            for i, value in enumerate(batch.values)
            if batch.first_offset + i >= start
        ]

    def read_from(self, start: int, isolation: FetchIsolation) -> Records:
        """Every record the log returns reading from ``start`` on, until a read brings none."""
        out: Records = []
        offset = start
        upper = self.log.log_end_offset if isolation is FetchIsolation.LOG_END else None
        while offset < (self.log.high_watermark if upper is None else upper):
            info = self.log.read(offset, 300, isolation)
            records = [(r.offset, r.value) for r in records_of(info) if r.offset >= offset]
            if not records:
                break
            out.extend(records)
            offset = records[-1][0] + 1
        return out

    def check_reads(self, start: int) -> None:
        for isolation in (FetchIsolation.HIGH_WATERMARK, FetchIsolation.LOG_END):
            assert self.read_from(start, isolation) == self.expected_records(start, isolation)

    def clamp_high_watermark(self, offset: int) -> int:
        """``UnifiedLog.update_high_watermark``'s rule (design §7): into [log start offset, LEO]."""
        return min(max(offset, self.log_start_offset), self.next_offset)

    def grouped(self, bases: Sequence[int]) -> list[list[ModelBatch]]:
        """The model's batches by the segment (of base offsets ``bases``) holding each."""
        groups: list[list[ModelBatch]] = [[] for _ in bases]
        for batch in self.batches:
            index = bisect_right(bases, batch.first_offset) - 1
            assert index >= 0, f"batch {batch.first_offset} below the first segment {bases}"
            groups[index].append(batch)
        return groups

    def deletable(self, bases: Sequence[int], rule: SegmentRule) -> int:
        """How many segments design §10 deletes under ``rule``: oldest first, stopping at the first
        that fails it, that is not wholly below the HW, or that is the empty active segment."""
        count = 0
        for index, batches in enumerate(self.grouped(bases)):
            next_base = bases[index + 1] if index + 1 < len(bases) else None
            upper = self.next_offset if next_base is None else next_base
            if next_base is None and not batches:
                break  # the empty active segment
            if self.high_watermark < upper or not rule(bases[index], batches, next_base):
                break
            count += 1
        return count

    def delete_oldest(self, bases: list[int], count: int) -> list[int]:
        """Drop the ``count`` oldest segments (rolling a new active one first when that is all of
        them), raise the log start offset to the new first base; return the bases left."""
        if count == len(bases):
            bases = [*bases, self.next_offset]
        bases = bases[count:]
        self.batches = [b for b in self.batches if b.first_offset >= bases[0]]
        self.log_start_offset = max(self.log_start_offset, bases[0])
        return bases

    def below_log_start(
        self, _base: int, _batches: list[ModelBatch], next_base: int | None
    ) -> bool:
        """design §10's log start offset rule: the next segment starts at or below it."""
        return next_base is not None and next_base <= self.log_start_offset

    def predict_retention(self, bases: list[int], config: LogConfig) -> tuple[list[int], int]:
        """The bases ``delete_old_segments`` leaves, and how many it deletes (design §10)."""
        deleted = 0

        def apply(rule: SegmentRule) -> None:
            nonlocal bases, deleted
            count = self.deletable(bases, rule)
            bases = self.delete_oldest(bases, count)
            deleted += count

        if config.delete and config.retention_ms >= 0:
            cutoff = self.clock.milliseconds() - config.retention_ms

            def expired(base: int, batches: list[ModelBatch], _next: int | None) -> bool:
                if base in self.stale_timestamps:
                    raise UnknownAge(base)
                # An empty segment's age is its file's mtime: the real time, years after the
                # mock clock's.
                return bool(batches) and max(b.max_timestamp for b in batches) < cutoff

            apply(expired)
        if config.delete and config.retention_bytes >= 0:
            excess = sum(b.size for b in self.batches) - config.retention_bytes

            def over_size(_base: int, batches: list[ModelBatch], _next: int | None) -> bool:
                nonlocal excess
                size = sum(b.size for b in batches)
                if excess < size:
                    return False
                excess -= size
                return True

            apply(over_size)
        apply(self.below_log_start)
        return bases, deleted

    def reopen(self, had_clean_shutdown: bool, recovery_point: int, hw: int | None) -> None:
        """Open the log again with the checkpointed offsets (``hw`` None: none checkpointed)."""
        self.log = UnifiedLog.open(
            self.dir,
            self.config,
            self.scheduler,
            clock=self.clock,
            log_start_offset=self.log_start_offset,
            recovery_point=recovery_point,
            high_watermark=hw,
            had_clean_shutdown=had_clean_shutdown,
        )

    # --- rules -------------------------------------------------------------------------------

    def last_batches_of_producers(self) -> dict[int, ModelBatch]:
        """Each producer with batches left in the log: its last one."""
        last: dict[int, ModelBatch] = {}
        for batch in self.batches:
            if batch.producer is not None:
                last[batch.producer[0]] = batch
        return last

    def append_batch(
        self, count: int, size: int, codec: CompressionType, producer: int | None = None
    ) -> None:
        """Append a batch of ``count`` records of about ``size`` bytes, 10 ms after the last;
        ``producer``: from that idempotent producer (-1: a new one), at its next sequence."""
        values = tuple(f"{self.counter + i}:".encode() + b"x" * size for i in range(count))
        self.counter += count
        self.clock.sleep(10)
        now = self.clock.milliseconds()
        idempotent = {}
        if producer is not None:
            last = self.last_batches_of_producers().get(producer)
            if last is None:
                producer, sequence = self.next_producer_id, 0
                self.next_producer_id += 1
            else:
                sequence = last.producer[1] + len(last.values)
            idempotent = {"producer_id": producer, "producer_epoch": 0, "base_sequence": sequence}
        records = build_batch(
            [(now, b"key", value, ()) for value in values], compression=codec, **idempotent
        )
        info = self.log.append(records)
        batch = ModelBatch(
            self.next_offset,
            values,
            len(records),
            now,
            (producer, idempotent["base_sequence"]) if producer is not None else None,
        )
        if batch.producer is not None:
            self.sent[batch.producer] = records
        assert (info.first_offset, info.last_offset) == (batch.first_offset, batch.last_offset)
        self.batches.append(batch)
        self.next_offset = batch.next_offset
        self.stale_timestamps.discard(self.log.active_segment.base_offset)  # its newest batch

    def commit(self) -> None:
        """Move the HW to the LEO, as acks=1 does on a single broker."""
        assert self.log.update_high_watermark(self.next_offset) == self.next_offset
        self.high_watermark = self.next_offset

    @initialize(batches=st.lists(BATCHES, max_size=25), commit=st.booleans(), config=RETENTION)
    def fill(
        self, batches: list[tuple[int, int, CompressionType]], commit: bool, config: LogConfig
    ) -> None:
        """Start from a log of a few segments, so retention and crashes have some to work on."""
        self.set_retention(config)
        for batch in batches:
            self.append_batch(*batch)
        if commit:
            self.commit()

    @rule(batches=st.lists(BATCHES, min_size=1, max_size=3), commit=st.booleans())
    def append(self, batches: list[tuple[int, int, CompressionType]], commit: bool) -> None:
        """Append batches; ``commit`` moves the HW to the new LEO (appends do not)."""
        for batch in batches:
            self.append_batch(*batch)
        if commit:
            self.commit()

    @rule(batch=BATCHES, data=st.data(), commit=st.booleans())
    def append_idempotent(
        self, batch: tuple[int, int, CompressionType], data: st.DataObject, commit: bool
    ) -> None:
        """A batch of a producer with batches in the log, at its next sequence, or of a new
        producer."""
        producers = sorted(self.last_batches_of_producers())
        producer = data.draw(st.sampled_from([-1, *producers]), label="producer")
        self.append_batch(*batch, producer=producer)
        if commit:
            self.commit()

    @precondition(lambda self: any(b.producer is not None for b in self.batches))
    @rule(data=st.data())
    def retry_written_batch(self, data: st.DataObject) -> None:
        """A producer resends its last batch (its acknowledgement was lost): the broker answers
        with the offsets it has and writes nothing."""
        last = self.last_batches_of_producers()
        batch = last[data.draw(st.sampled_from(sorted(last)), label="retrying producer")]
        size = self.log.size_in_bytes
        info = self.log.append(self.sent[batch.producer])
        assert (info.first_offset, info.last_offset) == (batch.first_offset, batch.last_offset)
        assert self.log.log_end_offset == self.next_offset
        assert self.log.size_in_bytes == size

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        self.check_reads(data.draw(st.integers(self.log_start_offset, self.next_offset)))

    @rule(data=st.data(), follower=st.booleans())
    def move_high_watermark(self, data: st.DataObject, follower: bool) -> None:
        """design §7. The follower path sets any value, clamped into [log start offset, LEO]; the
        leader path only moves it forward, and never above the LEO."""
        low, high = max(0, self.log_start_offset - 3), self.next_offset + (3 if follower else 1)
        target = data.draw(st.integers(low, high), label="hw")
        self.high_watermark_set = True
        if follower:
            self.high_watermark = self.clamp_high_watermark(target)
            assert self.log.update_high_watermark(target) == self.high_watermark
        elif target > self.next_offset:
            with pytest.raises(ValueError):
                self.log.maybe_increment_high_watermark(LogOffsetMetadata(target))
        else:
            old = self.log.maybe_increment_high_watermark(LogOffsetMetadata(target))
            if target > self.high_watermark:
                assert old is not None and old.message_offset == self.high_watermark
                self.high_watermark = target
            elif target < self.high_watermark:
                assert old is None

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start_offset, self.next_offset))
        bases = list(self.log.segments.base_offsets)
        assert self.log.truncate_to(target) == (target < self.next_offset)
        if target >= self.next_offset:
            return
        # The whole batch holding the target goes (truncation works in batches), and every
        # segment above the one holding it; the log ends where that segment's batches end.
        floor = bases[bisect_right(bases, target) - 1]
        kept = [b for b in self.batches if b.last_offset < target]
        self.next_offset = max([b.next_offset for b in kept] + [floor])
        expected_bases = [base for base in bases if base <= target]
        if self.next_offset < self.log_start_offset:
            # All that is left is below the log start: the log restarts there.
            kept, self.next_offset = [], self.log_start_offset
            expected_bases = [self.log_start_offset]
        elif len(kept) < len(self.batches) and any(b.first_offset >= floor for b in kept):
            self.stale_timestamps.add(floor)
        self.batches = kept
        self.high_watermark = min(self.high_watermark, self.next_offset)
        assert list(self.log.segments.base_offsets) == expected_bases

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        """Raise the log start offset; above the HW it is refused (design §7, 10)."""
        target = data.draw(st.integers(self.log_start_offset, self.next_offset))
        if target > self.high_watermark:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.delete_records(target)
            return
        bases = list(self.log.segments.base_offsets)
        assert self.log.delete_records(target) == target
        self.log_start_offset = target
        expected = self.delete_oldest(bases, self.deletable(bases, self.below_log_start))
        assert list(self.log.segments.base_offsets) == expected

    @rule(config=RETENTION)
    def set_retention(self, config: LogConfig) -> None:
        self.config = config
        self.log.update_config(config)

    def go_to_edge(self, bases: list[int], edge: str) -> None:
        """Put the oldest segment right at the edge of a retention rule: exactly retention.ms
        old ("time": one tick short of expiring), or retention.bytes where the size rule deletes
        just it ("size") or just not ("size+1")."""
        oldest = self.grouped(bases)[0]
        if edge == "time" and oldest and self.config.retention_ms >= 0:
            age = self.clock.milliseconds() - max(b.max_timestamp for b in oldest)
            self.clock.sleep(max(0, self.config.retention_ms - age))
        elif edge.startswith("size") and self.config.retention_bytes >= 0:
            excess = sum(b.size for b in oldest) - (edge == "size+1")
            total = sum(b.size for b in self.batches)
            self.set_retention(replace(self.config, retention_bytes=max(0, total - excess)))

    @rule(
        ms=st.sampled_from([0, 1000]) | MILLIS,
        edge=st.sampled_from(["", "time", "size", "size+1"]),
    )
    def retention(self, ms: int, edge: str) -> None:
        """Time passes (or ``edge``: see ``go_to_edge``), then ``delete_old_segments``, against
        design §10 applied to the model's own batches."""
        bases = list(self.log.segments.base_offsets)
        if edge:
            self.go_to_edge(bases, edge)
        else:
            self.clock.sleep(ms)
        config = self.config
        try:
            expected, count = self.predict_retention(bases, config)
        except UnknownAge:  # raised before the model changed: predict again without the time rule
            config = replace(config, retention_ms=-1)
            expected, count = self.predict_retention(bases, config)
        self.log.update_config(config)
        note(f"retention {config}: {bases} -> {expected}")
        assert self.log.delete_old_segments() == count
        self.log.update_config(self.config)
        assert list(self.log.segments.base_offsets) == expected

    @rule(background=st.booleans())
    def flush(self, background: bool) -> None:
        """A flush of everything, or the scheduler catching up: flushes after rolls, deletions."""
        if background:
            self.scheduler.run_pending()
        else:
            self.log.flush()

    @rule()
    def close_and_reopen(self) -> None:
        self.scheduler.run_pending()
        self.log.flush()
        self.log.close()
        self.reopen(True, self.next_offset, self.high_watermark)
        self.high_watermark_set = True

    def draw_crash(
        self, data: st.DataObject, bases: list[int], first: int, durable: int
    ) -> dict[int, tuple[int, bool]]:
        """What a crash leaves of each segment from ``first`` (the recovery point's) on: the
        bytes kept and whether garbage follows. Everything before a random point at or after
        ``durable`` (bytes of ``first``) survives; each segment past it is kept whole, cut
        (anywhere, or between batches), emptied, and may get garbage, independently (the page
        cache writes back in any order)."""
        groups = self.grouped(bases)
        torn = data.draw(st.integers(first, len(bases) - 1), label="torn segment")
        fates: dict[int, tuple[int, bool]] = {}
        for index in range(first, len(bases)):
            ends = list(accumulate(b.size for b in groups[index]))
            size = ends[-1] if ends else 0
            if index < torn:
                fates[index] = (size, False)
                continue
            low = durable if index == first else 0
            kept = data.draw(
                st.sampled_from([end for end in [0, *ends] if end >= low]) | st.integers(low, size)
            )
            fates[index] = (kept, data.draw(st.booleans()))
        return fates

    def predict_recovery(
        self, bases: list[int], first: int, fates: dict[int, tuple[int, bool]]
    ) -> list[int]:
        """Apply design §8 to the model: the segments from ``first`` on are re-validated in order;
        the first one recovery has to truncate (a partial batch or garbage) ends the log and
        every later segment goes, unless what is left of it still ends right at the next
        segment's base (only bytes past its last batch were cut). A segment that ends short of
        the next segment's base (cut cleanly between batches, or emptied) ends the log too
        unless the log is compacted: a power cut took its unflushed tail, and what follows was
        unflushed too. A compacted log keeps the later segments, leaving a gap in the offsets
        (as Kafka does). Return the bases left."""
        groups = self.grouped(bases)
        kept_batches = [b for group in groups[:first] for b in group]
        expected_bases = bases[:first]
        for index in range(first, len(bases)):
            expected_bases.append(bases[index])
            kept, garbage = fates[index]
            position = 0
            for batch in groups[index]:
                if position + batch.size > kept:
                    break
                kept_batches.append(batch)
                position += batch.size
            truncated = garbage or position < kept
            if index + 1 == len(bases):
                break
            segment_end = max(
                [b.next_offset for b in kept_batches if b.first_offset >= bases[index]],
                default=bases[index],
            )
            if truncated and segment_end != bases[index + 1]:
                break
            if not self.config.compact and segment_end < bases[index + 1]:
                break
        self.batches = kept_batches
        # An empty active segment ends the log at its base, past the last batch if a gap is left.
        self.next_offset = max([b.next_offset for b in kept_batches] + [expected_bases[-1]])
        if self.next_offset < self.log_start_offset:
            self.batches, self.next_offset = [], self.log_start_offset
            expected_bases = [self.log_start_offset]
        self.stale_timestamps &= set(bases[:first])  # the others' time indexes are rebuilt
        return expected_bases

    @rule(data=st.data())
    def crash_and_recover(self, data: st.DataObject) -> None:
        """Stop without flushing: the log is torn anywhere after its durable prefix (the
        recovery point) and every index file from the recovery point's segment on may be
        truncated, zeroed, overwritten or lost (design §8 rebuilds them)."""
        recovery_point = self.log.recovery_point
        segments = self.log.segments.values()
        bases = [segment.base_offset for segment in segments]
        first = max(0, bisect_right(bases, recovery_point) - 1)  # holds the recovery point
        durable = sum(b.size for b in self.grouped(bases)[first] if b.first_offset < recovery_point)
        fates = self.draw_crash(data, bases, first, durable)
        note(f"crash: recovery point {recovery_point}, bases {bases}, durable {durable}, {fates}")
        expected_bases = self.predict_recovery(bases, first, fates)
        if data.draw(st.booleans(), label="deletions done"):
            self.scheduler.run_pending("delete-segments")
        deletions = [t for t in self.scheduler.pending if t.name.startswith("delete-segments")]
        self.scheduler.pending.clear()  # the flushes after rolls had not run
        self.log.close_handlers()
        for index, (kept, garbage) in fates.items():
            tear(segments[index].log.path, kept, garbage)
            for path in (segments[index].offset_index_path, segments[index].time_index_path):
                damage_index(path, data.draw(st.sampled_from(INDEX_DAMAGE)), data)
        hw = data.draw(
            st.none() | st.integers(self.log_start_offset, self.high_watermark), label="hw"
        )
        self.reopen(False, recovery_point, hw)
        self.high_watermark = self.clamp_high_watermark(self.next_offset if hw is None else hw)
        self.high_watermark_set = True
        for task in deletions:  # their files left as .deleted are gone: this closes them
            task.function()
        assert list(self.log.segments.base_offsets) == expected_bases
        # (an unclean start keeps the checkpointed recovery point: recovery synced nothing)
        assert self.log.recovery_point == min(recovery_point, self.log.log_end_offset)

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def offsets_agree(self) -> None:
        # A read resolves the position of a HW set from an offset alone. One below the LEO that
        # no batch is at or above (in a gap a crash left before an empty active segment)
        # resolves to the LEO, as in Kafka.
        self.log.read(self.log_start_offset, 1)
        if (
            self.high_watermark_set
            and self.high_watermark < self.next_offset
            and all(b.last_offset < self.high_watermark for b in self.batches)
        ):
            self.high_watermark = self.next_offset
        self.high_watermark_set = False
        assert self.log.log_end_offset == self.next_offset
        assert self.log.log_start_offset == self.log_start_offset
        assert self.log.high_watermark == self.high_watermark
        assert self.log_start_offset <= self.high_watermark <= self.next_offset

    @invariant()
    def segment_sizes_agree(self) -> None:
        """Each segment holds exactly the model's batches from its base on, byte for byte."""
        segments = self.log.segments.values()
        groups = self.grouped([segment.base_offset for segment in segments])
        assert [s.size for s in segments] == [sum(b.size for b in g) for g in groups]

    @invariant()
    def everything_reads_back(self) -> None:
        self.check_reads(self.log_start_offset)


LogModel.TestCase.settings = settings(
    max_examples=examples(250),
    stateful_step_count=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogModel = LogModel.TestCase
