"""Helpers shared by the cleaner tests (no tests here): compacted logs, their model, and one
cleaning run carried out in this process."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from log_helpers import BASE_TIME_MS, append

from odradek.cleaner.cleanable_offsets import cleanable_offsets
from odradek.cleaner.cleaned_segment_swap import swap_in
from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.cleaning_task import CleaningResult, CleaningTask
from odradek.cleaner.log_to_clean import LogToClean
from odradek.config.log_config import LogConfig
from odradek.record.compression import CompressionType
from odradek.record.record import Record
from odradek.record.record_batch_builder import build_batch
from odradek.storage.unified_log import UnifiedLog

COMPACT = LogConfig(
    segment_bytes=1024,
    index_interval_bytes=128,
    segment_index_bytes=4096,
    cleanup_policy=("compact",),
    file_delete_delay_ms=60_000,
)
CLEANER = CleanerConfig(dedupe_buffer_size=1024 * 1024)
NOW_MS = BASE_TIME_MS + 3_600_000  # the records written here are an hour old

KeyValue = tuple[bytes, bytes | None]


def compact_config(**overrides: object) -> LogConfig:
    return replace(COMPACT, **overrides)


# Small segments, and a cleaner writing each kept batch on its own: many steps to stop at.
SMALL_SEGMENTS = compact_config(segment_bytes=2048, index_interval_bytes=64)
ONE_BATCH_AT_A_TIME = CleanerConfig(dedupe_buffer_size=1024 * 1024, io_buffer_size=1)


def write(
    log: UnifiedLog,
    pairs: Iterable[KeyValue],
    per_batch: int = 1,
    compression: CompressionType = CompressionType.NONE,
) -> None:
    """Append ``(key, value)`` pairs (value None: a tombstone), ``per_batch`` to a batch."""
    pairs = list(pairs)
    for start in range(0, len(pairs), per_batch):
        chunk = pairs[start : start + per_batch]
        records = [(BASE_TIME_MS + start + i, k, v, ()) for i, (k, v) in enumerate(chunk)]
        append(log, build_batch(records, compression=compression))


def write_idempotent(log: UnifiedLog, pairs: Iterable[KeyValue], producer_id: int) -> bytes:
    """Append ``(key, value)`` pairs as one batch of idempotent producer ``producer_id``
    (epoch 0, its first sequence); the batch, for a retry."""
    records = [(BASE_TIME_MS + i, k, v, ()) for i, (k, v) in enumerate(pairs)]
    sent = build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=0)
    append(log, sent)
    return sent


def latest_records(records: Sequence[Record]) -> list[Record]:
    """The model of a fully compacted log: the latest record of each key, in offset order."""
    latest = {record.key: record for record in records}
    return sorted(latest.values(), key=lambda record: record.offset)


def final_values(records: Iterable[Record]) -> dict[bytes, bytes]:
    """What a consumer reading ``records`` in order ends up with: tombstones delete."""
    values: dict[bytes, bytes] = {}
    for record in records:
        if record.value is None:
            values.pop(record.key, None)
        else:
            values[record.key] = record.value
    return values


def plan(
    log: UnifiedLog,
    config: CleanerConfig = CLEANER,
    first_dirty: int | None = None,
    now_ms: int = NOW_MS,
) -> CleaningTask:
    """The task the cleaner would run on ``log`` at ``now_ms``, from ``first_dirty`` (the
    checkpoint)."""
    offsets = cleanable_offsets(log, first_dirty, now_ms)
    cleanable = LogToClean.of(
        log, offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset
    )
    return CleaningTask.plan(cleanable, config, now_ms)


def clean_once(
    log: UnifiedLog,
    config: CleanerConfig = CLEANER,
    first_dirty: int | None = None,
    now_ms: int = NOW_MS,
) -> CleaningResult:
    """One cleaning run at ``now_ms`` in this process, swapped into ``log``."""
    result = Cleaner(plan(log, config, first_dirty, now_ms)).clean()
    swap_in(log, result, lambda: False)
    return result


def clean_fully(log: UnifiedLog, config: CleanerConfig = CLEANER, max_runs: int = 100) -> int:
    """Clean until the dirty section is empty (a small offset map needs several runs);
    return the number of runs."""
    first_dirty = None
    for runs in range(1, max_runs + 1):
        task = plan(log, config, first_dirty)
        result = clean_once(log, config, first_dirty)
        first_dirty = result.end_offset
        if first_dirty >= task.first_uncleanable_offset:
            return runs
    raise AssertionError(f"the dirty section is not clean after {max_runs} runs")
