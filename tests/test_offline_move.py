"""The offline move of a stopped odradek's partitions into a Kafka cluster (docs/scaling.md):
what works and what does not, on the reference Kafka.

Works: create the topic on Kafka (same name, same partition count; KRaft gives it its topic
id), stop Kafka, replace the files of each of its new partition directories by odradek's
segments, indexes, producer snapshots and leader-epoch checkpoint, keeping Kafka's
partition.metadata, start Kafka: it serves every record with the offsets, timestamps, keys,
values and headers odradek served, and a consumer group whose offsets are set on Kafka to the
ones it committed on odradek (offsets are the same numbers: the files moved) resumes there.

Does not work: moving odradek's partition.metadata too. Its topic id is not the one in Kafka's
metadata, and Kafka (KRaft) does not serve the partition from those files: it renames the
directory to ``TOPIC-P.<id>-stray`` and serves a new, empty partition.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import confluent_kafka
import pytest

from tests.connect_helpers import committed, consume_group, wait_for
from tests.kafka_helpers import create_topic
from tests.kafka_reference import ReferenceBroker, kafka_classpath
from tests.serve_process import ServeProcess

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

TOPIC, PARTITIONS, RECORDS = "moved", 2, 3000
SEGMENT_BYTES = 1048576  # Kafka 4's smallest: the partitions roll into several segments
Record = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]


def produce_records(bootstrap: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for number in range(RECORDS):
        producer.produce(
            TOPIC,
            value=(f"value-{number:05d}-".encode() * 60) if number % 97 else None,
            key=None if number % 13 == 0 else f"key-{number}".encode(),
            partition=number % PARTITIONS,
            headers=[("n", str(number).encode())],
        )
    assert producer.flush(60) == 0


def served(bootstrap: str) -> list[list[Record]]:
    """Each partition's records as a consumer reads them: offset, timestamp, key, value,
    headers."""
    reader = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "served", "enable.auto.commit": False}
    )
    ends = [
        reader.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), timeout=30)[1]
        for p in range(PARTITIONS)
    ]
    reader.assign([confluent_kafka.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    records: list[list[Record]] = [[] for _ in range(PARTITIONS)]

    def read() -> bool:
        message = reader.poll(0.2)
        if message is not None and not message.error():
            records[message.partition()].append(
                (
                    message.offset(),
                    message.timestamp()[1],
                    message.key(),
                    message.value(),
                    tuple(message.headers() or ()),
                )
            )
        return all(len(records[p]) >= ends[p] for p in range(PARTITIONS))

    try:
        wait_for(f"{TOPIC} read to its end offsets {ends}", read, 60, interval=0)
    finally:
        reader.close()
    return records


def move_files(odradek_dir: Path, kafka_dir: Path, keep_kafkas_metadata: bool) -> None:
    for partition in range(PARTITIONS):
        source, target = odradek_dir / f"{TOPIC}-{partition}", kafka_dir / f"{TOPIC}-{partition}"
        for file in target.iterdir():
            if not (keep_kafkas_metadata and file.name == "partition.metadata"):
                file.unlink()
        for file in source.iterdir():
            if not (keep_kafkas_metadata and file.name == "partition.metadata"):
                shutil.copy2(file, target / file.name)
    # Kafka recovers (checks and re-indexes) the copied segments only after an unclean stop.
    (kafka_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)


def test_offline_move_keeping_kafkas_partition_metadata(tmp_path: Path) -> None:
    kafka_classpath()  # skips (fails in CI) before any work when Kafka cannot be had
    odradek = ServeProcess(tmp_path / "odradek")
    try:
        create_topic(odradek.bootstrap, TOPIC, PARTITIONS, **{"segment.bytes": str(SEGMENT_BYTES)})
        produce_records(odradek.bootstrap)
        before = served(odradek.bootstrap)
        read_there = consume_group(odradek.bootstrap, "mover", TOPIC, 1234)
        offsets = committed(odradek.bootstrap, "mover", TOPIC, PARTITIONS)
    finally:
        assert odradek.stop() == 0
    assert sum(len(records) for records in before) == RECORDS
    assert len(list((tmp_path / "odradek" / f"{TOPIC}-0").glob("*.log"))) > 1

    kafka = ReferenceBroker.start(tmp_path / "kafka")
    create_topic(kafka.bootstrap, TOPIC, PARTITIONS, **{"segment.bytes": str(SEGMENT_BYTES)})
    kafka.stop()
    move_files(tmp_path / "odradek", kafka.log_dir, keep_kafkas_metadata=True)

    kafka = ReferenceBroker.start(tmp_path / "kafka")
    try:
        assert served(kafka.bootstrap) == before
        # Group offsets do not travel with the partitions: set them on Kafka, same numbers.
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": kafka.bootstrap})
        request = confluent_kafka.ConsumerGroupTopicPartitions(
            "mover",
            [
                confluent_kafka.TopicPartition(TOPIC, p, offset)
                for p, offset in enumerate(offsets)
                if offset >= 0
            ],
        )
        admin.alter_consumer_group_offsets([request])["mover"].result(30)
        read_here = consume_group(kafka.bootstrap, "mover", TOPIC, RECORDS - len(read_there))
        # Kafka still takes writes after the moved records.
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})
        producer.produce(TOPIC, b"after the move", partition=0)
        assert producer.flush(30) == 0
    finally:
        kafka.stop()
    values = [value for _, _, value in read_there + read_here]
    assert len(values) == RECORDS, "the group read a record twice or skipped one"
    assert sorted((p, o) for p, o, _ in read_there + read_here) == sorted(
        (p, record[0]) for p in range(PARTITIONS) for record in before[p]
    )


def test_offline_move_with_odradeks_partition_metadata_is_not_served(tmp_path: Path) -> None:
    kafka_classpath()
    odradek = ServeProcess(tmp_path / "odradek")
    try:
        create_topic(odradek.bootstrap, TOPIC, PARTITIONS)
        produce_records(odradek.bootstrap)
    finally:
        assert odradek.stop() == 0
    kafka = ReferenceBroker.start(tmp_path / "kafka")
    create_topic(kafka.bootstrap, TOPIC, PARTITIONS)
    kafka.stop()
    move_files(tmp_path / "odradek", kafka.log_dir, keep_kafkas_metadata=False)

    kafka = ReferenceBroker.start(tmp_path / "kafka")
    try:
        reader = confluent_kafka.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "x"})
        try:
            ends = [
                reader.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), 30)[1]
                for p in range(PARTITIONS)
            ]
        finally:
            reader.close()
    finally:
        kafka.stop()
    # Not one record is served: Kafka moved odradek's files aside as stray logs (renamed,
    # not deleted) and made new, empty partitions of its topic id.
    assert ends == [0] * PARTITIONS
    for partition in range(PARTITIONS):
        stray = list(kafka.log_dir.glob(f"{TOPIC}-{partition}.*-stray"))
        assert len(stray) == 1, sorted(path.name for path in kafka.log_dir.iterdir())
        moved = sorted(path.name for path in stray[0].glob("*.log"))
        assert moved == sorted(
            path.name for path in (tmp_path / "odradek" / f"{TOPIC}-{partition}").glob("*.log")
        )
