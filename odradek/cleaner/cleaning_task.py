"""CleaningTask and CleaningResult: what a cleaner thread sends its worker process for one run
(everything needed to clean one log, nothing live) and what the worker sends back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.cleaner_stats import CleanerStats
from odradek.cleaner.log_to_clean import LogToClean
from odradek.cleaner.segment_snapshot import SegmentSnapshot
from odradek.config.log_config import LogConfig
from odradek.storage.transaction_index import AbortedTxn
from odradek.topic_partition import TopicPartition


@dataclass(frozen=True)
class CleaningTask:
    """One run over a log's segments below ``first_uncleanable_offset``, planned by the
    broker and carried out by the cleaning process (it pickles, as process arguments must).

    ``current_time_ms`` is when the run was planned, the time Kafka's cleaner cleans at: a
    batch whose delete horizon is at or before it loses its tombstones, and a batch that keeps
    a tombstone without having a horizon gets ``current_time_ms + delete.retention.ms``
    (batch_filter.py). Only that time decides: not the segments' modification times.

    ``producer_last_offsets`` are the last offsets of the live idempotent producers' last
    batches: as Kafka does, the cleaner keeps those batches' headers (producer id, epoch, base
    sequence, last offset delta) with only the records of theirs that stay, an empty batch when
    none does, so a retry of one is still recognised after compaction (the producer state is
    rebuilt from those headers after a restart). It keeps the header of the batch ending at
    ``high_watermark`` too (cleaner.py). ``producer_marker_epochs`` are the live producers whose
    last record is a transaction marker (none of their data batches is their last: transaction
    version 2 moves the epoch at each marker), with that epoch: the marker of that epoch keeps
    its header, which carries the epoch that fences the producer's zombies.

    ``aborted_transactions`` are those of the segments' range, from their ``.txnindex``
    (Kafka's ``collectAbortedTransactions``): their batches lose their records, their markers
    go once their batches are gone (cleaned_transaction_metadata.py).
    """

    directory: Path
    topic_partition: TopicPartition
    log_config: LogConfig
    segments: tuple[SegmentSnapshot, ...]
    first_dirty_offset: int
    first_uncleanable_offset: int
    current_time_ms: int
    dedupe_buffer_size: int
    load_factor: float
    io_buffer_size: int
    io_bytes_per_second: float
    producer_last_offsets: frozenset[int] = frozenset()
    high_watermark: int = -1
    producer_marker_epochs: frozenset[tuple[int, int]] = frozenset()
    aborted_transactions: tuple[AbortedTxn, ...] = ()

    @classmethod
    def plan(cls, cleanable: LogToClean, config: CleanerConfig, now_ms: int) -> CleaningTask:
        log = cleanable.log
        segments = log.segments.values_between(0, cleanable.first_uncleanable_offset)
        last_data_offsets = log.last_data_offsets_of_producers()
        return cls(
            directory=log.dir,
            topic_partition=log.topic_partition,
            log_config=log.config,
            segments=tuple(
                SegmentSnapshot.of(segment, log.config.segment_index_bytes) for segment in segments
            ),
            first_dirty_offset=cleanable.first_dirty_offset,
            first_uncleanable_offset=cleanable.first_uncleanable_offset,
            current_time_ms=now_ms,
            dedupe_buffer_size=config.dedupe_buffer_per_thread,
            load_factor=config.dedupe_buffer_load_factor,
            io_buffer_size=config.io_buffer_size,
            io_bytes_per_second=config.io_bytes_per_second_per_thread,
            producer_last_offsets=frozenset(o for o in last_data_offsets.values() if o >= 0),
            producer_marker_epochs=frozenset(
                (p.producer_id, p.producer_epoch)
                for p in log.active_producers()
                if last_data_offsets.get(p.producer_id, -1) < 0
            ),
            high_watermark=log.high_watermark,
            aborted_transactions=tuple(
                log.local_log.collect_aborted_transactions(
                    segments[0].base_offset if segments else cleanable.first_dirty_offset,
                    cleanable.first_uncleanable_offset,
                )
            ),
        )

    def upper_bounds(self) -> list[int]:
        """Per segment, the offset its records stay below: the next segment's base offset."""
        return [s.base_offset for s in self.segments[1:]] + [self.first_uncleanable_offset]


@dataclass(frozen=True)
class CleaningResult:
    """The run cleaned the log up to ``end_offset`` (the next first dirty offset) and left one
    ``.swap`` segment per group, named by the group's first base offset, to replace the
    segments with the base offsets in ``groups``."""

    end_offset: int
    groups: tuple[tuple[int, ...], ...]
    stats: CleanerStats
