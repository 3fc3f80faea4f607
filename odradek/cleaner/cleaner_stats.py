"""CleanerStats: what one cleaning run read, kept and wrote (Kafka's ``CleanerStats``), counted
in the worker process; CleaningReport: the finished run as the broker logs it and metrics read it
(Kafka's ``LogCleaner.recordStats``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.cleaner.cleaning_task import CleaningResult
    from odradek.cleaner.log_to_clean import LogToClean

MB = 1024 * 1024


@dataclass
class CleanerStats:
    """Counters a run adds to as it goes; the cleaning process sends them back when done."""

    start_s: float = field(default_factory=time.monotonic)
    map_complete_s: float = -1.0
    end_s: float = -1.0
    map_bytes_read: int = 0
    map_records_read: int = 0
    bytes_read: int = 0
    records_read: int = 0
    invalid_records_read: int = 0
    bytes_written: int = 0
    records_written: int = 0
    buffer_utilization: float = 0.0
    throttled_s: float = 0.0

    def index_bytes_read(self, size: int, records: int) -> None:
        """A batch scanned while building the offset map."""
        self.map_bytes_read += size
        self.map_records_read += records

    def read_records(self, size: int, records: int) -> None:
        """A batch read while cleaning."""
        self.bytes_read += size
        self.records_read += records

    def invalid_records(self, count: int) -> None:
        """Records with no key: a compacted log cannot keep them."""
        self.invalid_records_read += count

    def recopy_records(self, size: int, records: int) -> None:
        """Kept records written to the cleaned segment."""
        self.bytes_written += size
        self.records_written += records

    def index_done(self) -> None:
        self.map_complete_s = time.monotonic()

    def all_done(self) -> None:
        self.end_s = time.monotonic()

    @property
    def elapsed_secs(self) -> float:
        return self.end_s - self.start_s

    @property
    def elapsed_index_secs(self) -> float:
        return self.map_complete_s - self.start_s


@dataclass(frozen=True)
class CleaningReport:
    """What a run did (Kafka's ``LogCleaner.recordStats``): ``bytes_read``/``records_read`` are
    the log below ``end_offset`` before, ``bytes_written``/``records_kept`` after."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    bytes_read: int
    bytes_written: int
    records_read: int
    records_kept: int
    map_bytes_read: int
    map_records_read: int
    dirty_ratio_before: float
    dirty_ratio_after: float
    seconds: float
    map_seconds: float
    buffer_utilization: float
    throttled_seconds: float

    @classmethod
    def of(cls, cleaned: LogToClean, result: CleaningResult, after: LogToClean) -> CleaningReport:
        """The report of the run ``result`` of ``cleaned``; ``after`` measures the log now."""
        stats = result.stats
        return cls(
            topic_partition=cleaned.topic_partition,
            first_dirty_offset=cleaned.first_dirty_offset,
            end_offset=result.end_offset,
            bytes_read=stats.bytes_read,
            bytes_written=stats.bytes_written,
            records_read=stats.records_read,
            records_kept=stats.records_written,
            map_bytes_read=stats.map_bytes_read,
            map_records_read=stats.map_records_read,
            dirty_ratio_before=cleaned.cleanable_ratio,
            dirty_ratio_after=after.cleanable_ratio,
            seconds=stats.elapsed_secs,
            map_seconds=stats.elapsed_index_secs,
            buffer_utilization=stats.buffer_utilization,
            throttled_seconds=stats.throttled_s,
        )

    @property
    def records_dropped(self) -> int:
        return self.records_read - self.records_kept

    @property
    def recopy_ratio(self) -> float:
        """Bytes written over bytes read: 1.0 means cleaning removed nothing."""
        return self.bytes_written / max(self.bytes_read, 1)

    def describe(self) -> str:
        """A one-line summary for the broker log (one line per event, for log shippers)."""
        seconds = max(self.seconds, 1e-9)
        map_seconds = max(self.map_seconds, 1e-9)
        return (
            f"[{self.topic_partition}] cleaned offsets [{self.first_dirty_offset}, "
            f"{self.end_offset}): {self.bytes_read / MB:,.1f} MB of log processed in "
            f"{self.seconds:,.1f} seconds ({self.bytes_read / MB / seconds:,.1f} MB/sec, "
            f"{self.throttled_seconds:,.1f} seconds throttled); "
            f"indexed {self.map_bytes_read / MB:,.1f} MB in {self.map_seconds:,.1f} seconds "
            f"({self.map_bytes_read / MB / map_seconds:,.1f} MB/sec); buffer utilization "
            f"{100 * self.buffer_utilization:.1f}%; "
            f"start size {self.bytes_read / MB:,.1f} MB ({self.records_read:,} records), end "
            f"size {self.bytes_written / MB:,.1f} MB ({self.records_kept:,} records), "
            f"{100 * (1 - self.recopy_ratio):.1f}% size reduction; dirty ratio "
            f"{100 * self.dirty_ratio_before:.1f}% -> {100 * self.dirty_ratio_after:.1f}%"
        )
