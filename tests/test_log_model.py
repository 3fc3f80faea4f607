"""A stateful model test: random operations on a Log against a simple in-memory model.

The model is the list of batches the log should hold (offsets and values), the log start offset
and the recovery point. Every read and every offset is checked against it, across rolls,
truncation, delete-records, retention, clean restarts and crashes that tear the unflushed tail.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from log_helpers import BASE_TIME_MS, records_of

from odradek.config.log_config import LogConfig
from odradek.storage.clock import MockClock
from odradek.storage.compression import CompressionType
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log import Log
from odradek.storage.record_batch_builder import build_batch
from odradek.storage.scheduler import Scheduler

CONFIG = LogConfig(
    segment_bytes=700, index_interval_bytes=120, segment_index_bytes=8 * 16, file_delete_delay_ms=0
)


@dataclass(frozen=True)
class ModelBatch:
    first_offset: int
    values: tuple[bytes, ...]

    @property
    def last_offset(self) -> int:
        return self.first_offset + len(self.values) - 1


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp())
        self.dir = self.root / "model-0"
        self.clock = MockClock(BASE_TIME_MS)
        self.scheduler = Scheduler()
        self.scheduler.startup()
        self.log = Log.open(self.dir, CONFIG, self.scheduler, clock=self.clock)
        self.batches: list[ModelBatch] = []
        self.log_start_offset = 0
        self.counter = 0

    def teardown(self) -> None:
        self.log.close()
        self.scheduler.shutdown(run_pending_one_offs=True)
        shutil.rmtree(self.root, ignore_errors=True)

    # --- model helpers -----------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.log_start_offset

    def expected_records(self, start: int) -> list[tuple[int, bytes]]:
        return [
            (batch.first_offset + i, value)
            for batch in self.batches
            for i, value in enumerate(batch.values)
            if batch.first_offset + i >= start
        ]

    def read_from(self, start: int) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        offset = start
        while offset < self.log.high_watermark:
            info = self.log.read(offset, 300, FetchIsolation.HIGH_WATERMARK)
            records = [(r.offset, r.value) for r in records_of(info) if r.offset >= offset]
            assert records, f"no progress reading at {offset}"
            out.extend(records)
            offset = records[-1][0] + 1
        return out

    def reopen(self, had_clean_shutdown: bool, recovery_point: int) -> None:
        self.log = Log.open(
            self.dir,
            CONFIG,
            self.scheduler,
            clock=self.clock,
            log_start_offset=self.log_start_offset,
            recovery_point=recovery_point,
            high_watermark=self.log_end_offset,
            had_clean_shutdown=had_clean_shutdown,
        )

    # --- rules -------------------------------------------------------------------------------

    @rule(
        count=st.integers(1, 6),
        size=st.integers(0, 80),
        codec=st.sampled_from(list(CompressionType)),
    )
    def append(self, count: int, size: int, codec: CompressionType) -> None:
        values = tuple(f"{self.counter + i}:".encode() + b"x" * size for i in range(count))
        self.counter += count
        self.clock.sleep(10)
        records = [(self.clock.milliseconds(), b"key", value, ()) for value in values]
        info = self.log.append(build_batch(records, compression=codec))
        assert info.first_offset == self.log_end_offset
        self.batches.append(ModelBatch(info.first_offset, values))
        self.log.update_high_watermark(self.log.log_end_offset)

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        start = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        assert self.read_from(start) == self.expected_records(start)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        self.log.truncate_to(target)
        # The whole batch holding the target goes: truncation works in batches.
        self.batches = [b for b in self.batches if b.last_offset < target]
        if self.log_end_offset < self.log_start_offset:
            self.batches = []  # all that is left is below the log start: the log restarts there
        self.log.update_high_watermark(self.log.log_end_offset)

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        self.log.delete_records(target)
        self.log_start_offset = target
        self.batches = [b for b in self.batches if b.last_offset >= target]

    @rule()
    def retention(self) -> None:
        self.log.delete_old_segments()

    @rule()
    def flush(self) -> None:
        self.log.flush()

    @rule()
    def close_and_reopen(self) -> None:
        self.log.flush()
        self.log.close()
        self.reopen(had_clean_shutdown=True, recovery_point=self.log_end_offset)

    @rule(data=st.data(), garbage=st.booleans())
    def crash_and_recover(self, data: st.DataObject, garbage: bool) -> None:
        """Stop without flushing, tearing the active segment somewhere after its last flush."""
        recovery_point = self.log.recovery_point
        active = self.log.active_segment
        durable_bytes = 0
        if recovery_point > active.base_offset:
            durable_bytes = (
                active.translate_offset(recovery_point).position
                if (recovery_point < self.log.log_end_offset)
                else active.size
            )
        cut = data.draw(st.integers(durable_bytes, active.size))
        surviving = {
            header.base_offset
            for position, header in active.log.batch_headers()
            if position + header.size_in_bytes <= cut
        }
        note(f"crash: durable={durable_bytes} cut={cut} size={active.size} surviving={surviving}")
        path = active.log.path
        self.log.close_handlers()
        os.truncate(path, cut)
        if garbage:
            with open(path, "ab") as file:
                # 0xff first: it can never be a batch's last byte (an unfinished varint), so the
                # garbage cannot complete the torn batch by chance.
                file.write(b"\xffgarbage\x00" * 5)
        self.batches = [
            b
            for b in self.batches
            if b.first_offset < active.base_offset or b.first_offset in surviving
        ]
        self.reopen(had_clean_shutdown=False, recovery_point=recovery_point)
        assert self.log.log_end_offset >= recovery_point
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.log.update_high_watermark(self.log.log_end_offset)

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.log_end_offset
        assert self.log.log_start_offset == self.log_start_offset
        assert self.log.log_start_offset <= self.log.high_watermark <= self.log.log_end_offset

    @invariant()
    def everything_reads_back(self) -> None:
        assert self.read_from(self.log_start_offset) == self.expected_records(self.log_start_offset)


LogModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogModel = LogModel.TestCase
