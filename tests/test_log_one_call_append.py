"""UnifiedLog.append's one-call path (``SegmentAppendState.append_batch``) against its general path.

Two logs take the same requests: one appends as the broker does, the other with the one-call
path off, so that every request goes through ``validate_and_assign_offsets``, the producer
checks and ``try_append``. Requests: plain single batches and an idempotent producer's batches
in order (the path's own), and what it must leave to the general path: faults of every kind,
producer batches retried or out of order, compressed and multi-batch requests, keyless records
on a compacted topic; with rolls by size and time, leader epochs moving up, LogAppendTime,
flush.messages and appends with and without the high watermark commit. After each request both
logs must answer alike (the same LogAppendInfo, or the same error and message), hold the same
state and files, and have flushed what flush.messages asks for. Idempotent producers get their
own replay below: several producers, retries of each of their last batches, epochs, wraps.
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
from odradek.record.record_batch import LAST_OFFSET_DELTA_OFFSET
from odradek.record.record_batch_builder import build_batch
from odradek.storage import log_appender, unified_log
from odradek.storage.unified_log import UnifiedLog
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
    with mock.patch.object(unified_log, "append_rules", lambda config: None):
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


def open_both_logs(
    stack: ExitStack, root: Path, config: LogConfig, clocks: dict[str, MockClock]
) -> dict[str, UnifiedLog]:
    """A log under ``root`` for each path, "one call" (as the broker runs) and "general" (the
    one-call path off), each with its own clock, closed with ``stack``."""
    logs = {
        "one call": stack.enter_context(open_log(root / "one" / "t-0", config, clocks["one call"]))
    }
    with general_path_only():
        logs["general"] = stack.enter_context(
            open_log(root / "general" / "t-0", config, clocks["general"])
        )
    return logs


def outcome(log: UnifiedLog, request: bytes, epoch: int, commit: bool) -> object:
    try:
        return log.append(request, epoch, commit=commit)
    except KafkaError as error:
        return type(error).__name__, str(error)


def state(log: UnifiedLog) -> dict[str, object]:
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
        logs = open_both_logs(stack, root, config, clocks)
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
        with mock.patch.object(log_appender, "validate_and_assign_offsets") as general:
            general.side_effect = AssertionError("the general path")
            info = log.append(batch(2), commit=True)
            assert (info.first_offset, info.last_offset, log.high_watermark) == (1, 2, 3)
            with general_path_only():
                log.update_config(LogConfig())
            with pytest.raises(AssertionError, match="the general path"):
                log.append(batch(1))


# --- idempotent producers ------------------------------------------------------------------

IDEMPOTENT_SHAPES = (
    *("next",) * 8,  # the one-call path's own: a known producer at its next sequence
    "retry 1",  # a retry of one of the producer's last five batches (and the sixth last,
    "retry 2",  # which the table no longer holds)
    "retry 3",
    "retry 4",
    "retry 5",
    "retry 6",
    "gap",  # a sequence past the next
    "behind",  # a sequence below the next that no retained batch starts at
    "old epoch",  # fenced
    "new epoch",  # a bumped epoch, from sequence 0
    "new producer",
    "near wrap",  # a new producer starting a few sequences below INT32_MAX
    "plain",  # a batch of no producer between them
    "two batches",  # two batches of the producer in one request
)


class IdempotentProducers:
    """Builds requests of several idempotent producers, keeping each one's epoch, next
    sequence and last six requests (a retry sends one of them again, byte for byte)."""

    def __init__(self) -> None:
        self.producers: dict[int, dict] = {}
        self.next_id = 100

    def _new(self, sequence: int) -> int:
        producer_id = self.next_id
        self.next_id += 1
        self.producers[producer_id] = {"epoch": 0, "sequence": sequence, "sent": []}
        return producer_id

    def _batch(self, producer_id: int, count: int, timestamp: int, **fields: int) -> bytes:
        producer = self.producers[producer_id]
        epoch, sequence = fields.get("epoch", producer["epoch"]), fields.get("sequence")
        if sequence is None:
            sequence = producer["sequence"]
        records = [(timestamp + i, b"k", b"i%d" % i, ()) for i in range(count)]
        return build_batch(
            records,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence % 2**31,
        )

    def build(self, shape: str, pick: int, count: int, timestamp: int) -> tuple[bytes, object]:
        """The request and what to remember of it once answered (``sent``)."""
        if shape == "plain":
            return batch(count, timestamp=timestamp), None
        if not self.producers and shape != "near wrap":
            shape = "new producer"  # (every other shape needs a producer)
        if shape in ("new producer", "near wrap"):
            producer_id = self._new(0 if shape == "new producer" else 2**31 - 1 - pick % 4)
            shape = "next"
        else:
            producer_id = sorted(self.producers)[pick % len(self.producers)]
        producer = self.producers[producer_id]
        if shape.startswith("retry") and producer["sent"]:
            back = int(shape.split()[1])
            return producer["sent"][-min(back, len(producer["sent"]))], None
        if shape == "gap":
            return self._batch(
                producer_id, count, timestamp, sequence=producer["sequence"] + 2
            ), None
        if shape == "behind":
            return self._batch(
                producer_id, count, timestamp, sequence=producer["sequence"] - 1
            ), None
        if shape == "old epoch" and producer["epoch"] > 0:
            return self._batch(producer_id, count, timestamp, epoch=producer["epoch"] - 1), None
        if shape == "new epoch":
            request = self._batch(
                producer_id, count, timestamp, epoch=producer["epoch"] + 1, sequence=0
            )
            return request, (producer_id, producer["epoch"] + 1, count, request)
        if shape == "two batches":
            first = self._batch(producer_id, count, timestamp)
            second = self._batch(producer_id, 1, timestamp, sequence=producer["sequence"] + count)
            return first + second, (producer_id, producer["epoch"], count + 1, first + second)
        request = self._batch(producer_id, count, timestamp)
        return request, (producer_id, producer["epoch"], count, request)

    def answered(self, sent: object) -> None:
        """A request was appended: its producer goes on after it."""
        if sent is None:
            return
        producer_id, epoch, count, request = sent  # type: ignore[misc]
        producer = self.producers[producer_id]
        if epoch != producer["epoch"]:
            producer["epoch"], producer["sequence"], producer["sent"] = epoch, 0, []
        producer["sequence"] = (producer["sequence"] + count) % 2**31
        producer["sent"] = [*producer["sent"], request][-6:]


Step = tuple[str, int, int, int, int, bool]
"""(shape, which producer, records, ms the clock moves first, leader epoch raise, commit)."""


def replay_on_both_paths(root: Path, steps: list[Step], log_append_time: bool) -> list[object]:
    """Each step's request on two logs, one of them with the one-call path off: the same
    answers, errors, files and producer state (snapshot bytes) after each; a retry answers its
    first append's offsets and writes nothing. The answers, then the steps the one-call path
    took (the other log's general path was not called) and the number of segments."""
    config = LogConfig(
        segment_bytes=700,
        segment_ms=6000,
        index_interval_bytes=150,
        message_timestamp_type="LogAppendTime" if log_append_time else "CreateTime",
        message_timestamp_before_max_ms=10**8,
    )
    clocks = {"one call": MockClock(BASE_TIME_MS), "general": MockClock(BASE_TIME_MS)}
    producers = IdempotentProducers()
    first_answers: dict[bytes, tuple[int, int]] = {}
    answers: list[object] = []
    one_call_steps: list[int] = []
    with ExitStack() as stack:
        logs = open_both_logs(stack, root, config, clocks)
        general_path = stack.enter_context(
            mock.patch.object(
                logs["one call"]._appender,
                "validate_and_write",
                wraps=logs["one call"]._appender.validate_and_write,
            )
        )
        for log in logs.values():
            log.active_segment.roll_jitter_ms = 0
        epoch = 0
        for shape, pick, count, clock_step, epoch_raise, commit in steps:
            for clock in clocks.values():
                clock.sleep(clock_step)
            epoch += epoch_raise
            request, sent = producers.build(shape, pick, count, clocks["general"].milliseconds())
            ends = {name: log.log_end_offset for name, log in logs.items()}
            general_calls = general_path.call_count
            outcomes = {name: outcome(log, request, epoch, commit) for name, log in logs.items()}
            if general_path.call_count == general_calls:
                one_call_steps.append(len(answers))
            assert outcomes["one call"] == outcomes["general"], shape
            assert state(logs["one call"]) == state(logs["general"]), shape
            answer = outcomes["general"]
            answers.append(answer)
            for log in logs.values():
                log.active_segment.roll_jitter_ms = 0
            if isinstance(answer, tuple) and not hasattr(answer, "first_offset"):
                continue  # an error, alike on both paths
            offsets = (answer.first_offset, answer.last_offset)  # type: ignore[union-attr]
            if request in first_answers and answer.record_count == 0:  # type: ignore[union-attr]
                # A retry: the first append's offsets again (its first batch's, as in Kafka, for
                # a request of several), and nothing written.
                assert offsets == first_answers[request], shape
                assert {name: log.log_end_offset for name, log in logs.items()} == ends
            else:
                last_offset_delta = int.from_bytes(request[LAST_OFFSET_DELTA_OFFSET:][:4], "big")
                first_answers.setdefault(request, (offsets[0], offsets[0] + last_offset_delta))
                producers.answered(sent)
        answers += [one_call_steps, logs["one call"].number_of_segments]
    return answers


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(IDEMPOTENT_SHAPES),
            st.integers(0, 3),  # which producer
            st.integers(1, 4),  # records
            st.integers(0, 3000),  # ms the clock moves first
            st.integers(0, 1),  # leader epoch raise
            st.booleans(),  # commit
        ),
        min_size=1,
        max_size=40,
    ),
    log_append_time=st.booleans(),
)
def test_both_paths_keep_idempotent_producers_alike(
    tmp_path_factory, steps: list[Step], log_append_time: bool
) -> None:
    """In-order batches, retries of each of the last five (and an older one), gaps, fenced and
    new epochs, new producers, sequences wrapping past INT32_MAX and several producers
    interleaved, with rolls by size and time between them (replay_on_both_paths)."""
    replay_on_both_paths(tmp_path_factory.mktemp("one-call-idempotent"), steps, log_append_time)


def test_a_script_of_every_idempotent_case_on_both_paths(tmp_path: Path) -> None:
    """Every case at least once, in one run, whatever the random test above draws."""
    one = ("next", 0, 1, 0, 0, True)
    steps: list[Step] = [
        ("near wrap", 2, 1, 0, 0, True),  # producer 100 at INT32_MAX - 2
        ("next", 0, 3, 0, 0, True),  # its sequence wraps inside the batch: the general way
        *[one] * 6,  # on from 2 (the one-call path's)
        *[(f"retry {back}", 0, 1, 0, 0, True) for back in range(1, 7)],
        ("new producer", 0, 2, 100, 0, False),  # producer 101
        *[("next", pick, 2, 2500, 0, True) for pick in (1, 0, 1, 1, 0)],  # interleaved, rolls
        ("gap", 0, 1, 0, 0, True),
        ("behind", 1, 1, 0, 0, True),
        ("new epoch", 1, 1, 0, 1, True),
        ("next", 1, 2, 0, 0, True),
        ("old epoch", 1, 1, 0, 0, True),
        ("plain", 0, 2, 0, 0, True),
        ("two batches", 0, 1, 0, 0, True),
        ("retry 1", 0, 1, 0, 0, True),
        ("next", 0, 4, 7000, 0, True),  # after a roll by time
        ("near wrap", 0, 1, 0, 0, True),  # producer 102 at INT32_MAX
        ("next", 2, 1, 0, 0, True),  # from INT32_MAX to 0: the general way
        ("next", 2, 1, 0, 0, True),
    ]
    *answers, one_call_steps, segments = replay_on_both_paths(tmp_path, steps, False)
    errors = [answer[0] for answer in answers if not hasattr(answer, "first_offset")]
    assert errors == [
        "OutOfOrderSequenceNumberError",  # retry 6: older than the five batches kept
        "OutOfOrderSequenceNumberError",  # gap
        "OutOfOrderSequenceNumberError",  # behind
        "InvalidProducerEpochError",  # old epoch
    ]
    retried = answers[8:13]  # retries 1 to 5: their first answers' offsets, nothing written
    assert [(info.first_offset, info.record_count) for info in retried] == [  # type: ignore[attr-defined]
        (9, 0),
        (8, 0),
        (7, 0),
        (6, 0),
        (5, 0),
    ]
    assert answers[1].first_offset == 1  # type: ignore[attr-defined]  # the wrap, written
    # The one-call path took the batches going on in order: not the wraps (1, 30), nor the
    # first append to each new segment (15, 18 by size and 28 by time), nor anything unusual.
    assert segments == 4
    assert one_call_steps == [2, 3, 4, 5, 6, 7, 16, 17, 19, 23, 25, 31]


def test_the_next_idempotent_batch_takes_the_one_call_path(tmp_path: Path) -> None:
    """So that the test above compares two paths for the producer's common batch."""

    def producer_batch(sequence: int) -> bytes:
        records = [(BASE_TIME_MS, b"k", b"v", ())]
        return build_batch(records, producer_id=5, producer_epoch=0, base_sequence=sequence)

    with open_log(tmp_path / "t-0") as log:
        log.append(producer_batch(0))  # a new producer: the general path registers it
        with mock.patch.object(log_appender, "validate_and_assign_offsets") as general:
            general.side_effect = AssertionError("the general path")
            info = log.append(producer_batch(1), commit=True)
            assert (info.first_offset, log.high_watermark) == (1, 2)
            assert log.producer_state.table.rows() == [
                (5, 0, 0, 0, 0, BASE_TIME_MS),
                (5, 0, 1, 1, 0, BASE_TIME_MS),
            ]
            with pytest.raises(AssertionError, match="the general path"):
                log.append(producer_batch(1))  # a retry
