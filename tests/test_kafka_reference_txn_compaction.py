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
    StoredRecord,
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
from odradek.storage.transaction_index import TransactionIndex
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow, pytest.mark.timeout(900)]

TOPIC = "txn-compaction"
TP = TopicPartition(TOPIC, 0)
BASE_TIMESTAMP = int(time.time() * 1000) - 3_600_000
SEGMENT_BYTES = 1024 * 1024  # Kafka's least
HELD_BACK = {"min.compaction.lag.ms": str(86_400_000)}  # the records are an hour old
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


def test_a_transactional_log_compacts_alike_on_kafka_and_odradek(tmp_path: Path) -> None:
    kafka = ReferenceBroker.start(tmp_path / "kafka", CLEANER_BACKOFF)
    kafka_partition = kafka.log_dir / TP.dir_name
    copy = tmp_path / "odradek" / TP.dir_name
    try:
        client = JavaClient(harness_classpath(), kafka.bootstrap)
        client.create_topics(TopicSpec(TOPIC, configs=TOPIC_CONFIGS))
        client.produce(*RUNS)
        assert _segments_roll(kafka_partition)
        kafka.stop()
        shutil.copytree(kafka_partition, copy)
        before_cleaning = _aborted(copy)
        kafka = ReferenceBroker.start(
            tmp_path / "kafka",
            CLEANER_BACKOFF,
            port=kafka.port,
            controller_port=kafka.controller_port,
        )
        client.admin(["set-configs", TOPIC, "min.compaction.lag.ms=0"])
        deadline = time.monotonic() + 120
        while not _cleaned_up_to_active_segment(kafka.log_dir, TP):
            assert time.monotonic() < deadline, "Kafka's cleaner did not clean in 2 minutes"
            time.sleep(0.2)
        kafka_read: list[StoredRecord] = client.consume(TOPIC)[TOPIC]
    finally:
        kafka.stop()
    # The workload's aborted transactions are in Kafka's index before cleaning.
    assert len(before_cleaning) == 3, before_cleaning

    config = LogConfig(
        segment_bytes=SEGMENT_BYTES,
        cleanup_policy=("compact",),
        delete_retention_ms=86_400_000,
        message_timestamp_after_max_ms=2**63 - 1,
    )
    with open_log(copy, config) as log:
        log.update_high_watermark(log.log_end_offset)
        cleaner = CleanerConfig(dedupe_buffer_size=16 * 1024 * 1024)
        task = plan(log, cleaner, now_ms=int(time.time() * 1000))
        result = Cleaner(task).clean()
        swap_in(log, result, lambda: False)
        odradek_read = _data_records(log)

    assert odradek_read == [(r.offset, r.key, r.value) for r in kafka_read]
    assert kafka_dump_structure(copy) == kafka_dump_structure(kafka_partition)
    assert _aborted(copy) == _aborted(kafka_partition)
    # What the cleaning did, spelled out: no aborted value is left below the active segment
    # (the cleaned range), and the aborted transactions whose markers stay are indexed.
    active_base = max(int(path.stem) for path in kafka_partition.glob("*.log"))
    assert not [r for r in kafka_read if r.offset < active_base and b"-abort" in r.value]
    assert _aborted(copy) == before_cleaning
