"""Log.append's one-call path (``SegmentAppendState.append_batch``) against its general path.

Two logs take the same requests: one appends as the broker does, the other with the one-call
path off, so that every request goes through ``validate_and_assign_offsets``, the producer
checks and ``try_append``. Requests: plain single batches (the path's own), and what it must
leave to the general path: faults of every kind, producer batches (in order, retried, out of
order), compressed and multi-batch requests, keyless records on a compacted topic; with rolls
by size and time, leader epochs moving up, LogAppendTime, flush.messages and appends with and
without the high watermark commit. After each request both logs must answer alike (the same
LogAppendInfo, or the same error and message), hold the same state and files, and have flushed
what flush.messages asks for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.errors import KafkaError
from odradek.record.compression import CompressionType
from odradek.record.record_batch_builder import build_batch
from odradek.storage import log as log_module
from odradek.storage.log import Log
from tests.log_helpers import BASE_TIME_MS, batch, open_log

SHAPES = ("plain",) * 6 + (
    "producer",
    "producer retry",
    "producer gap",
    "compressed",
    "two batches",
    "bad crc",
    "keyless",
    "too old",
    "torn",
)


@contextmanager
def general_path_only() -> Iterator[None]:
    """Logs opened (or reconfigured) meanwhile append through the general path only."""
    with mock.patch.object(log_module, "append_rules", lambda config: None):
        yield


class Requests:
    """Builds each shape of request, keeping one producer's sequence numbers."""

    def __init__(self) -> None:
        self.sequence = 0
        self.last_producer_request = b""

    def build(self, shape: str, count: int, timestamp: int) -> bytes:
        if shape.startswith("producer"):
            if shape == "producer retry" and self.last_producer_request:
                return self.last_producer_request
            if shape == "producer gap":
                self.sequence += 3
            records = [(timestamp + i, b"k", b"p%d" % i, ()) for i in range(count)]
            request = build_batch(
                records, producer_id=9, producer_epoch=0, base_sequence=self.sequence
            )
            self.sequence += count
            self.last_producer_request = request
            return request
        if shape == "compressed":
            records = [(timestamp + i, b"k", b"c%d" % i, ()) for i in range(count)]
            return build_batch(records, compression=CompressionType.GZIP)
        request = batch(count, timestamp=timestamp, value_size=20)
        if shape == "two batches":
            return request + batch(1, timestamp=timestamp)
        if shape == "bad crc":
            return request[:-1] + bytes([request[-1] ^ 1])
        if shape == "keyless":
            return batch(count, timestamp=timestamp, key=None)
        if shape == "too old":
            return batch(count, timestamp=timestamp - 10**9)
        if shape == "torn":
            return request[:-2]
        return request


def outcome(log: Log, request: bytes, epoch: int, commit: bool) -> object:
    try:
        return log.append(request, epoch, commit=commit)
    except KafkaError as error:
        return type(error).__name__, str(error)


def state(log: Log) -> dict[str, object]:
    segment_files = sorted(
        path for path in log.dir.iterdir() if path.suffix in (".log", ".index", ".timeindex")
    )
    return {
        "end": log.log_end_offset_metadata,
        "high watermark": log.high_watermark,
        "epochs": log.leader_epoch_cache.entries,
        "producers": log.producer_state.snapshot_bytes(),
        "files": {path.name: path.read_bytes() for path in segment_files},
    }


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(SHAPES),
            st.integers(1, 5),  # records
            st.integers(0, 4000),  # ms the clock moves first
            st.integers(0, 2),  # leader epoch raise
            st.booleans(),  # commit
        ),
        min_size=1,
        max_size=25,
    ),
    log_append_time=st.booleans(),
    compact=st.booleans(),
    flush_messages=st.sampled_from([2**63 - 1, 3]),
)
def test_both_paths_answer_alike_and_leave_the_same_log(
    tmp_path_factory, steps, log_append_time: bool, compact: bool, flush_messages: int
) -> None:
    root = tmp_path_factory.mktemp("one-call")
    config = LogConfig(
        segment_bytes=1200,
        segment_ms=9000,
        index_interval_bytes=150,
        cleanup_policy=("compact",) if compact else ("delete",),
        message_timestamp_type="LogAppendTime" if log_append_time else "CreateTime",
        message_timestamp_before_max_ms=10**8,
        flush_messages=flush_messages,
    )
    clocks = {"one call": MockClock(BASE_TIME_MS), "general": MockClock(BASE_TIME_MS)}
    requests = Requests()
    with ExitStack() as stack:
        logs = {
            "one call": stack.enter_context(
                open_log(root / "one" / "t-0", config, clocks["one call"])
            )
        }
        with general_path_only():
            logs["general"] = stack.enter_context(
                open_log(root / "general" / "t-0", config, clocks["general"])
            )
        for log in logs.values():
            log.active_segment.roll_jitter_ms = 0
        epoch = 0
        for shape, count, clock_step, epoch_raise, commit in steps:
            for clock in clocks.values():
                clock.sleep(clock_step)
            epoch += epoch_raise
            request = requests.build(shape, count, clocks["general"].milliseconds())
            outcomes = {name: outcome(log, request, epoch, commit) for name, log in logs.items()}
            assert outcomes["one call"] == outcomes["general"], shape
            assert state(logs["one call"]) == state(logs["general"]), shape
            for log in logs.values():  # (a roll's flush moves it later, in the background)
                assert log.log_end_offset - log.recovery_point < flush_messages
            for log in logs.values():
                log.active_segment.roll_jitter_ms = 0


def test_the_common_request_takes_the_one_call_path(tmp_path: Path) -> None:
    """So that the test above compares two paths, not one with itself."""
    with open_log(tmp_path / "t-0") as log:
        log.append(batch(1))  # the segment's first append lends it its append state
        with mock.patch.object(log_module, "validate_and_assign_offsets") as general:
            general.side_effect = AssertionError("the general path")
            info = log.append(batch(2), commit=True)
            assert (info.first_offset, info.last_offset, log.high_watermark) == (1, 2, 3)
            with general_path_only():
                log.update_config(LogConfig())
            with pytest.raises(AssertionError, match="the general path"):
                log.append(batch(1))
