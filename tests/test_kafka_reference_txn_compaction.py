"""Compaction of a transactional log, on Apache Kafka and on odradek, from the same files.

Kafka's Java transactional producers write a compacted topic: committed transactions, aborted
ones (their records reach the log before the ABORT marker) and keys written again, then a
roller record starts a new segment. While ``min.compaction.lag.ms`` holds the cleaner back,
Kafka stops and its partition directory (segments, ``.txnindex`` files with the aborted
transactions) is copied; Kafka restarts with the lag lifted and cleans its log once. odradek
cleans the copy once (its UnifiedLog opened on Kafka's files, its cleaner run in this
process). Both must then hold the same batches (the dump tools' fields, markers and empty
batches included), the same records, and the same aborted transactions in their ``.txnindex``
files: aborted records removed and never used to supersede older ones, the markers kept
(this cleaning met their transactions' batches), the ABORT markers' transactions in the
cleaned segment's index.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from cleaner_helpers import plan
from kafka_reference import (
    JavaClient,
    ProducedRecord,
    ProducerRun,
    ReferenceBroker,
    TopicSpec,
    harness_classpath,
)
from log_helpers import open_log
from test_kafka_reference_files import _cleaned_up_to_active_segment
from test_kafka_reference_idempotent_compaction import kafka_dump_structure

from odradek.cleaner.cleaned_segment_swap import swap_in
from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.config.log_config import LogConfig
from odradek.record.memory_records import MemoryRecords
from odradek.storage.transaction_index import TransactionIndex
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow, pytest.mark.timeout(900)]

TOPIC = "txn-compaction"
TP = TopicPartition(TOPIC, 0)
BASE_TIMESTAMP = int(time.time() * 1000) - 3_600_000
SEGMENT_BYTES = 1024 * 1024  # Kafka's least
HELD_BACK_SETTING = "min.compaction.lag.ms=86400000"  # the records are an hour old
HELD_BACK = dict([HELD_BACK_SETTING.split("=")])
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(SEGMENT_BYTES),
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(86_400_000),
    **HELD_BACK,
}
CLEANER_BACKOFF = "log.cleaner.backoff.ms=100"
VALUE_BYTES = 20_000


def _records(keys: range, tag: str, at: int) -> list[ProducedRecord]:
    return [
        ProducedRecord(
            b"key-%02d" % key,
            (b"%s key %02d " % (tag.encode(), key)).ljust(VALUE_BYTES, b"."),
            (),
            BASE_TIMESTAMP + at + key,
        )
        for key in keys
    ]


def _transactional(name: str, steps: list[tuple[range, str]]) -> ProducerRun:
    """One transactional producer: a transaction per step, ending in "commit" or "abort"."""
    return ProducerRun(
        TOPIC,
        [_records(keys, f"{name}-{n}-{end}", 100 * n) for n, (keys, end) in enumerate(steps)],
        {"transactional.id": f"txn-compaction-{name}", "linger.ms": "100"},
        [end for _, end in steps],
    )


RUNS = [
    _transactional(
        "a", [(range(0, 10), "commit"), (range(0, 5), "abort"), (range(5, 10), "commit")]
    ),
    _transactional("b", [(range(10, 20), "abort"), (range(10, 15), "commit")]),
    ProducerRun(TOPIC, [_records(range(20, 25), "plain", 900)]),
    _transactional("c", [(range(15, 25), "commit"), (range(0, 3), "abort")]),
    ProducerRun(TOPIC, [[ProducedRecord(b"roller", b"r" * 200_000, (), BASE_TIMESTAMP + 5000)]]),
]


def _data_records(log: UnifiedLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """The records a consumer reads (control batches' records are not)."""
    return [
        (r.offset, r.key, r.value)
        for segment in log.segments.values()
        for _, batch in segment.log.batches()
        if not batch.is_control
        for r in batch.records()
    ]


def _aborted(partition: Path) -> list[tuple]:
    found = []
    for path in sorted(partition.glob("*.txnindex")):
        index = TransactionIndex(int(path.name.split(".")[0]), path)
        found += [
            (t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in index.all_aborted_txns()
        ]
    return found


def _segments_roll(partition: Path) -> bool:
    return len(list(partition.glob("*.log"))) >= 2


def _restart(kafka: ReferenceBroker) -> ReferenceBroker:
    return ReferenceBroker.start(
        kafka.state_dir, CLEANER_BACKOFF, port=kafka.port, controller_port=kafka.controller_port
    )


def _kafka_cleans(kafka: ReferenceBroker, client: JavaClient) -> None:
    """Lift the lag; wait until Kafka's cleaner has cleaned up to the active segment."""
    client.admin(["set-configs", TOPIC, "min.compaction.lag.ms=0"])
    deadline = time.monotonic() + 120
    while not _cleaned_up_to_active_segment(kafka.log_dir, TP):
        assert time.monotonic() < deadline, "Kafka's cleaner did not clean in 2 minutes"
        time.sleep(0.2)


def _odradek_cleans(partition: Path, first_dirty: int | None) -> list[tuple]:
    """odradek's UnifiedLog on ``partition`` (files of a clean stop, loaded as they are, as
    Kafka loads them), cleaned once from ``first_dirty``; the records a consumer then reads."""
    with open_log(partition, CONFIG, had_clean_shutdown=True) as log:
        log.update_high_watermark(log.log_end_offset)
        task = plan(log, CLEANER, first_dirty, now_ms=int(time.time() * 1000))
        swap_in(log, Cleaner(task).clean(), lambda: False)
        return _data_records(log)


def _active_base(partition: Path) -> int:
    return max(int(path.stem) for path in partition.glob("*.log"))


CONFIG = LogConfig(
    segment_bytes=SEGMENT_BYTES,
    cleanup_policy=("compact",),
    delete_retention_ms=86_400_000,
    message_timestamp_after_max_ms=2**63 - 1,
)
CLEANER = CleanerConfig(dedupe_buffer_size=16 * 1024 * 1024)
LATER_RUNS = [
    ProducerRun(TOPIC, [_records(range(0, 25), "later", 6000)]),
    ProducerRun(TOPIC, [[ProducedRecord(b"roller", b"r" * 400_000, (), BASE_TIMESTAMP + 9000)]]),
]


def test_a_transactional_log_compacts_alike_on_kafka_and_odradek(tmp_path: Path) -> None:
    """Two cleanings on each side: the first drops the aborted records and keeps every marker
    (their transactions' batches were met); after later values supersede every transaction's
    records, the second drops those records, gives the markers left without batches a delete
    horizon, and keeps each producer's last marker (transaction version 2: the producer's last
    record, whose epoch fences it)."""
    kafka = ReferenceBroker.start(tmp_path / "kafka", CLEANER_BACKOFF)
    kafka_partition = kafka.log_dir / TP.dir_name
    copy = tmp_path / "odradek" / TP.dir_name
    kafka_first = tmp_path / "kafka-first-cleaning"
    later_segments = tmp_path / "later-segments"
    try:
        client = JavaClient(harness_classpath(), kafka.bootstrap)
        client.create_topics(TopicSpec(TOPIC, configs=TOPIC_CONFIGS))
        client.produce(*RUNS)
        assert _segments_roll(kafka_partition)
        kafka.stop()
        shutil.copytree(kafka_partition, copy)
        before_cleaning = _aborted(copy)
        kafka = _restart(kafka)
        _kafka_cleans(kafka, client)
        kafka_read = client.consume(TOPIC)[TOPIC]
        first_active = _active_base(kafka_partition)
        client.admin(["set-configs", TOPIC, HELD_BACK_SETTING])
        kafka.stop()
        shutil.copytree(kafka_partition, kafka_first, ignore=shutil.ignore_patterns("*.deleted"))
        kafka = _restart(kafka)
        client.produce(*LATER_RUNS)
        kafka.stop()
        later_segments.mkdir()
        for path in kafka_partition.iterdir():
            if path.name[:20].isdigit() and int(path.name[:20]) >= first_active:
                if not path.name.endswith(".deleted"):
                    shutil.copy2(path, later_segments / path.name)
        kafka = _restart(kafka)
        _kafka_cleans(kafka, client)
        kafka_read_later = client.consume(TOPIC)[TOPIC]
    finally:
        kafka.stop()
    # The workload's aborted transactions are in Kafka's index before cleaning.
    assert len(before_cleaning) == 3, before_cleaning

    # The first cleaning.
    odradek_read = _odradek_cleans(copy, None)
    assert odradek_read == [(r.offset, r.key, r.value) for r in kafka_read]
    assert kafka_dump_structure(copy) == kafka_dump_structure(kafka_first)
    assert _aborted(copy) == _aborted(kafka_first) == before_cleaning
    # What it did, spelled out: no aborted value is left below the active segment (the
    # cleaned range), and every marker stays.
    assert not [r for r in kafka_read if r.offset < first_active and b"-abort" in r.value]

    # The second, after the later values (Kafka's segments from the first one's active
    # segment on, given to odradek as they are).
    for path in copy.iterdir():
        if path.name[:20].isdigit() and int(path.name[:20]) >= first_active:
            path.unlink()
    for path in later_segments.iterdir():
        shutil.copy2(path, copy / path.name)
    odradek_read_later = _odradek_cleans(copy, first_active)
    assert odradek_read_later == [(r.offset, r.key, r.value) for r in kafka_read_later]
    assert kafka_dump_structure(copy) == kafka_dump_structure(kafka_partition)
    assert _aborted(copy) == _aborted(kafka_partition)
    assert _horizons(copy) == _horizons(kafka_partition)
    # Spelled out: the ABORT markers whose records the first cleaning removed got a horizon
    # (the third's transaction has its batch in the segment the first did not clean).
    aborted_markers = [t[2] for t in before_cleaning]
    assert [o for o, horizon, _ in _horizons(kafka_partition) if horizon] == aborted_markers[:2]


def _horizons(partition: Path) -> list[tuple[int, bool, int]]:
    """Each control batch: its offset, whether it has a delete horizon, its record count."""
    return [
        (batch.base_offset, batch.delete_horizon_ms is not None, batch.records_count)
        for path in sorted(partition.glob("*.log"))
        for batch in MemoryRecords(path.read_bytes()).batches()
        if batch.is_control
    ]
