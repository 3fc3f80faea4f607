"""Helpers shared by the storage tests: building batches and opening logs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.clock import Clock, MockClock
from odradek.config.log_config import LogConfig
from odradek.record.memory_records import MemoryRecords
from odradek.record.record import Record
from odradek.record.record_batch_builder import build_batch
from odradek.storage.fetch_data_info import FetchDataInfo
from odradek.storage.log_append_info import LogAppendInfo
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog

BASE_TIME_MS = 1_700_000_000_000


def batch(
    count: int = 1,
    *,
    timestamp: int = BASE_TIME_MS,
    value_size: int = 10,
    key: bytes | None = b"k",
    values: list[bytes] | None = None,
) -> bytes:
    """A producer batch of ``count`` records (offsets from 0, as clients send them)."""
    if values is None:
        values = [bytes([48 + i % 10]) * value_size for i in range(count)]
    return build_batch([(timestamp + i, key, value, ()) for i, value in enumerate(values)])


def append(log: UnifiedLog, records: bytes) -> LogAppendInfo:
    """Append and commit (HW := LEO), as the single-replica partition layer does for acks=1."""
    info = log.append(records)
    log.update_high_watermark(log.log_end_offset)
    return info


def records_of(info: FetchDataInfo) -> list[Record]:
    """Every whole record in a read's slice (a trailing partial batch is dropped)."""
    if info.records is None:
        return []
    return list(MemoryRecords(info.records.read_bytes()).records())


def read_all(log: UnifiedLog, start: int | None = None, upper: str = "hw") -> list[Record]:
    """Every record from ``start`` (default: log start) up to the HW, following the log."""
    from odradek.storage.fetch_data_info import FetchIsolation

    isolation = FetchIsolation.HIGH_WATERMARK if upper == "hw" else FetchIsolation.LOG_END
    offset = log.log_start_offset if start is None else start
    end = log.high_watermark if upper == "hw" else log.log_end_offset
    out: list[Record] = []
    while offset < end:
        info = log.read(offset, 1 << 20, isolation)
        batches = list(MemoryRecords(info.records.read_bytes()).batches()) if info.records else []
        if not batches:
            break
        out.extend(r for batch in batches for r in batch.records() if r.offset >= offset)
        # Past the last batch, as a consumer moves: a cleaned batch may hold no records.
        offset = max(offset, batches[-1].next_offset)
    return out


@contextmanager
def open_log(
    directory: Path,
    config: LogConfig | None = None,
    clock: Clock | None = None,
    *,
    scheduler: Scheduler | None = None,
    **kwargs,
) -> Iterator[UnifiedLog]:
    """A UnifiedLog with a started scheduler (its own unless given: a test that shuts it down to
    wait for the tasks the log scheduled), closed and stopped afterwards."""
    scheduler = scheduler or Scheduler()
    scheduler.startup()
    log = UnifiedLog.open(
        directory, config or LogConfig(), scheduler, clock=clock or MockClock(), **kwargs
    )
    try:
        yield log
    finally:
        # The broker's order (LogManager.shutdown): the tasks the log scheduled (a roll's
        # flush) run before it closes, not against a closed log.
        scheduler.shutdown(run_pending_one_offs=True)
        log.close()


def read_committed(log: UnifiedLog, start: int | None = None) -> list[Record]:
    """Every record a read_committed consumer gets from ``start`` (default: log start) up to
    the last stable offset, as Kafka's consumer applies the aborted transactions a fetch
    lists: a producer's transactional batches are dropped from an aborted transaction's first
    offset until its ABORT marker; control batches are never returned."""
    from odradek.record.control_record import EndTransactionMarker
    from odradek.storage.fetch_data_info import FetchIsolation

    offset = log.log_start_offset if start is None else start
    listed: set[tuple[int, int]] = set()
    pending: list[tuple[int, int]] = []  # (first_offset, producer_id), not yet reached
    aborting: set[int] = set()
    out: list[Record] = []
    while offset < log.last_stable_offset:
        info = log.read(offset, 1 << 20, FetchIsolation.TXN_COMMITTED)
        assert info.aborted_transactions is not None
        for aborted in info.aborted_transactions:
            if (aborted.producer_id, aborted.first_offset) not in listed:
                listed.add((aborted.producer_id, aborted.first_offset))
                pending.append((aborted.first_offset, aborted.producer_id))
        pending.sort()
        batches = list(MemoryRecords(info.records.read_bytes()).batches()) if info.records else []
        if not batches:
            break
        for batch in batches:
            while pending and pending[0][0] <= batch.last_offset:
                aborting.add(pending.pop(0)[1])
            if batch.is_control:
                marker = EndTransactionMarker.from_record(next(iter(batch.records())))
                if not marker.committed:
                    aborting.discard(batch.producer_id)
            elif not (batch.is_transactional and batch.producer_id in aborting):
                out.extend(r for r in batch.records() if r.offset >= offset)
            offset = max(offset, batch.next_offset)
    return out
