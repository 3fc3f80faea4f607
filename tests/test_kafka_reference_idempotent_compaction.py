"""Compaction under idempotent producers, on Apache Kafka and on odradek side by side.

The workload of issue 36: 20 short-lived idempotent producers (Kafka's Java producer, idempotent
by default) each write one batch of the same 50 keys to a compacted topic; a last record rolls
the segment, and both brokers' cleaners clean it. Kafka keeps each live producer's last batch
with only its surviving records (an empty batch when none survive: its header keeps the
producer's sequence) and the last batch of the cleaning round; odradek must keep the same
records at the same offsets in the same batches, which both brokers' dump tools show, and
Kafka's DumpLogSegments must read odradek's cleaned segment, empty batches and all.

Both brokers then restart without producer snapshots and without their clean-shutdown marker, so
each rebuilds its producers' state from the cleaned log: a retry of a producer's (now empty)
batch is answered as a duplicate with the batch's offset, and its next batch is taken in
sequence.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest
from kafka_helpers import KafkaSocket
from kafka_reference import (
    JavaClient,
    ProducedRecord,
    ProducerRun,
    ReferenceBroker,
    StoredRecord,
    TopicSpec,
    harness_classpath,
)
from serve_process import ServeProcess
from test_kafka_reference_files import (
    _cleaned_up_to_active_segment,
    _dump_log,
    _kafka_dump,
    assert_kafka_reads_segments,
    assert_kafka_verifies_indexes,
)

from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import set_producer_state
from odradek.record.record_batch_builder import build_batch
from odradek.topic_partition import TopicPartition

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow, pytest.mark.timeout(900)]

TOPIC = "idempotent-compaction"
TP = TopicPartition(TOPIC, 0)
PRODUCERS = 20
KEYS = 50
BASE_TIMESTAMP = int(time.time() * 1000) - 3_600_000
SEGMENT_BYTES = 1024 * 1024  # Kafka's least: the 20 batches (~1 MB) fit, the roller does not
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(SEGMENT_BYTES),
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
}
CLEANER_BACKOFF = "log.cleaner.backoff.ms=100"
# The batch fields both brokers' files must agree on (producer ids are numbered by each broker,
# the CRC covers them; each producer is named by the order its batch comes in).
STRUCTURE_FIELDS = (
    "baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producer",
    "producerEpoch", "isTransactional", "isControl", "position", "timestampType",
    "maxTimestamp", "size", "compresscodec", "isvalid",
)  # fmt: skip


def producer_batch(producer: int) -> list[ProducedRecord]:
    """Producer ``producer``'s one batch: every key, a value of ~1 KB, explicit timestamps."""
    return [
        ProducedRecord(
            b"key-%02d" % key,
            (b"producer %02d key %02d " % (producer, key)).ljust(1000, b"."),
            (),
            BASE_TIMESTAMP + 100 * producer + key,
        )
        for key in range(KEYS)
    ]


ROLLER = ProducedRecord(b"roller", b"r" * 100_000, (), BASE_TIMESTAMP + 100 * PRODUCERS)
RUNS = [
    *(
        ProducerRun(TOPIC, [producer_batch(n)], {"batch.size": "1048576", "linger.ms": "1000"})
        for n in range(PRODUCERS)
    ),
    ProducerRun(TOPIC, [[ROLLER]]),
]


TIMESTAMP_TARGETS = [BASE_TIMESTAMP - 1, *(BASE_TIMESTAMP + 100 * n + 25 for n in range(0, 21, 4))]


def run_workload(
    bootstrap: str, log_dir: Path
) -> tuple[list[StoredRecord], dict[tuple[str, int, int], tuple[int, int] | None]]:
    """Create the topic, run the producers, wait until the cleaner has cleaned up to the
    active segment; what Kafka's consumer reads then, and the offsets it finds by timestamp
    (the time index points into empty batches)."""
    client = JavaClient(harness_classpath(), bootstrap)
    client.create_topics(TopicSpec(TOPIC, configs=TOPIC_CONFIGS))
    acked = [record for run in client.produce(*RUNS) for record in run]
    assert [r.offset for r in acked] == list(range(PRODUCERS * KEYS + 1))
    deadline = time.monotonic() + 120
    while not _cleaned_up_to_active_segment(log_dir, TP):
        assert time.monotonic() < deadline, f"{log_dir}: not cleaned in 2 minutes"
        time.sleep(0.2)
    return client.consume(TOPIC)[TOPIC], client.offsets_for_times([TOPIC], TIMESTAMP_TARGETS)


def kafka_dump_structure(directory: Path) -> list[dict[str, str]]:
    """The batches of the partition's segments as Kafka's DumpLogSegments lists them."""
    logs = sorted(directory.glob("*.log"))
    batches = []
    for line in _kafka_dump("--files", ",".join(map(str, logs))).splitlines():
        if line.startswith("baseOffset:"):
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            kind = "LogAppendTime" if "LogAppendTime" in fields else "CreateTime"
            batches.append({**fields, "timestampType": kind, "maxTimestamp": fields[kind]})
    return _named_producers(batches)


def odradek_dump_structure(directory: Path) -> list[dict[str, str]]:
    """The same, as odradek dump-log lists them, under Kafka's names."""
    done = _dump_log(sorted(directory.glob("*.log")))
    assert done.returncode == 0, done.stderr
    batches = []
    for line in map(json.loads, done.stdout.splitlines()):
        if line["type"] == "batch":
            batches.append(
                {
                    **{name: str(line[name]) for name in STRUCTURE_FIELDS if name in line},
                    "producerId": str(line["producerId"]),
                    "isTransactional": str(line["isTransactional"]).lower(),
                    "isControl": str(line["isControl"]).lower(),
                    "compresscodec": line["compression"],
                    "isvalid": str(line["crcValid"]).lower(),
                }
            )
    return _named_producers(batches)


def _named_producers(batches: list[dict[str, str]]) -> list[dict[str, str]]:
    order: dict[str, int] = {}
    for batch in batches:
        order.setdefault(batch["producerId"], len(order))
    return [
        {
            **{name: batch[name] for name in STRUCTURE_FIELDS if name != "producer"},
            "producer": str(order[batch["producerId"]]),
        }
        for batch in batches
    ]


def normalized_batches(directory: Path) -> list[bytes]:
    """The partition's batches as stored, each producer id replaced by the producer's number
    (in offset order) and the CRC recomputed."""
    numbers: dict[int, int] = {}
    batches = []
    for log_file in sorted(directory.glob("*.log")):
        for batch in MemoryRecords(log_file.read_bytes()).batches():
            data = bytearray(batch.to_bytes())
            number = numbers.setdefault(batch.producer_id, len(numbers))
            set_producer_state(data, 0, number, batch.producer_epoch, batch.base_sequence)
            batches.append(bytes(data))
    return batches


def producer_ids(directory: Path) -> list[int]:
    """The producer id of each producer's batch, in offset order (the roller's last)."""
    done = _dump_log(sorted(directory.glob("*.log")))
    assert done.returncode == 0, done.stderr
    return [
        line["producerId"] for line in map(json.loads, done.stdout.splitlines())
        if line["type"] == "batch"
    ]  # fmt: skip


def forget_producer_snapshots(log_dir: Path) -> None:
    """Delete the partition's producer snapshots and the clean-shutdown marker: the next start
    recovers the log and rebuilds its producers' state from the batches."""
    for snapshot in (log_dir / TP.dir_name).glob("*.snapshot"):
        snapshot.unlink()
    (log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)


def produce_raw(bootstrap: str, batch: bytes) -> tuple[int, int]:
    """One Produce v9 (acks=all) of ``batch`` to partition 0: (error code, base offset)."""
    from kafka.protocol.producer import ProduceRequest, ProduceResponse

    request = ProduceRequest[9](
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
                ],
            )
        ],
    )
    kafka = KafkaSocket(bootstrap, timeout=30)
    try:
        kafka.send(0, 9, request.encode(9), flexible=True)
        response = ProduceResponse[9].decode(kafka.read_frame()[5:])
    finally:
        kafka.close()
    [answer] = response.responses[0].partition_responses
    return answer.error_code, answer.base_offset


def retries_and_next_batches(bootstrap: str, ids: list[int]) -> list[tuple[int, int]]:
    """Each producer resends its batch (epoch 0, sequence 0: the same records), then the first
    and last producers send their next batch (sequence 50): the answers."""
    answers = []
    for producer, producer_id in enumerate(ids[:PRODUCERS]):
        records = [(r.timestamp, r.key, r.value, ()) for r in producer_batch(producer)]
        batch = build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=0)
        answers.append(produce_raw(bootstrap, batch))
    for producer in (0, PRODUCERS - 1):
        record = (BASE_TIMESTAMP + 5000 + producer, b"key-00", b"next", ())
        batch = build_batch([record], producer_id=ids[producer], producer_epoch=0, base_sequence=50)
        answers.append(produce_raw(bootstrap, batch))
    return answers


def test_idempotent_producers_compact_alike_on_kafka_and_odradek(tmp_path: Path) -> None:
    """51 records after cleaning on both, at the same offsets, in the same batches (19 empty
    ones keeping their producers' sequences); Kafka reads odradek's cleaned segment; after a
    restart that rebuilds the producers' state from the cleaned log, both answer every retry
    as a duplicate at the batch's offset and take the next batches in sequence."""
    kafka_state = tmp_path / "kafka"
    kafka = ReferenceBroker.start(kafka_state, CLEANER_BACKOFF)
    try:
        kafka_read, kafka_by_time = run_workload(kafka.bootstrap, kafka.log_dir)
    finally:
        kafka.stop()
    odradek_dir = tmp_path / "odradek"
    with ServeProcess(odradek_dir, "--set", CLEANER_BACKOFF) as odradek:
        odradek_read, odradek_by_time = run_workload(odradek.bootstrap, odradek_dir)

    # The same records: the last producer's batch and the roller in the active segment.
    assert len(kafka_read) == KEYS + 1
    assert [r.offset for r in odradek_read] == [r.offset for r in kafka_read]
    assert odradek_read == kafka_read
    assert odradek_by_time == kafka_by_time

    # The same batches: the 19 superseded producers' batches kept empty, with their headers.
    kafka_partition, odradek_partition = kafka.log_dir / TP.dir_name, odradek_dir / TP.dir_name
    kafka_structure = kafka_dump_structure(kafka_partition)
    assert [(b["baseOffset"], b["count"], b["baseSequence"], b["lastSequence"]) for b in
            kafka_structure] == [
        *((str(KEYS * n), "0", "0", str(KEYS - 1)) for n in range(PRODUCERS - 1)),
        (str(KEYS * (PRODUCERS - 1)), str(KEYS), "0", str(KEYS - 1)),
        (str(KEYS * PRODUCERS), "1", "0", "0"),
    ]  # fmt: skip
    assert kafka_dump_structure(odradek_partition) == kafka_structure
    assert odradek_dump_structure(odradek_partition) == odradek_dump_structure(kafka_partition)
    assert odradek_dump_structure(kafka_partition) == kafka_structure
    # Byte for byte, once each producer id is replaced by the producer's number.
    assert normalized_batches(odradek_partition) == normalized_batches(kafka_partition)
    # Kafka's own tool reads every batch and record of odradek's cleaned segment, all valid,
    # and finds its indexes sound.
    assert_kafka_reads_segments(odradek_partition)
    assert_kafka_verifies_indexes(odradek_partition)

    # Restarts that rebuild the producers' state from the cleaned batches.
    forget_producer_snapshots(kafka.log_dir)
    kafka = ReferenceBroker.start(kafka_state, CLEANER_BACKOFF)
    try:
        kafka_answers = retries_and_next_batches(kafka.bootstrap, producer_ids(kafka_partition))
    finally:
        kafka.stop()
    forget_producer_snapshots(odradek_dir)
    with ServeProcess(odradek_dir) as odradek:
        odradek_answers = retries_and_next_batches(
            odradek.bootstrap, producer_ids(odradek_partition)
        )
    expected = [(0, KEYS * n) for n in range(PRODUCERS)]
    expected += [(0, KEYS * PRODUCERS + 1), (0, KEYS * PRODUCERS + 2)]
    assert kafka_answers == expected
    assert odradek_answers == kafka_answers


def test_an_odradek_killed_after_cleaning_rebuilds_producers_from_empty_batches(
    tmp_path: Path,
) -> None:
    """odradek killed (SIGKILL) after its cleaner wrote the empty batches, its snapshots gone:
    the restart recovers the cleaned segment and still answers each retry as a duplicate."""
    odradek_dir = tmp_path / "odradek"
    with ServeProcess(odradek_dir, "--set", CLEANER_BACKOFF) as odradek:
        run_workload(odradek.bootstrap, odradek_dir)
        odradek.stop(signal.SIGKILL)
    partition = odradek_dir / TP.dir_name
    forget_producer_snapshots(odradek_dir)
    with ServeProcess(odradek_dir) as odradek:
        answers = retries_and_next_batches(odradek.bootstrap, producer_ids(partition))
    expected = [(0, KEYS * n) for n in range(PRODUCERS)]
    assert answers == [*expected, (0, KEYS * PRODUCERS + 1), (0, KEYS * PRODUCERS + 2)]
