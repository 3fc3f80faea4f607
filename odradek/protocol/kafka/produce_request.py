"""Produce requests read by hand: the hot path of Kafka's protocol.

The same layout the schema codec reads (tests/test_kafka_codec.py checks that both agree on
every served version), without building a dict per field: a Produce of one batch costs a few
microseconds to read, and its records stay views into the request frame (no copy).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.kafka.byte_reader import ByteReader

FIRST_FLEXIBLE_VERSION = 9


@dataclass(frozen=True)
class ProducePartition:
    """One partition's records: ``records`` is a view into the request (None when null)."""

    topic: str
    partition: int
    records: memoryview | None


@dataclass(frozen=True)
class KafkaProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    partitions: list[ProducePartition]


def read_produce_request(frame: memoryview, offset: int, version: int) -> KafkaProduceRequest:
    """The body of a Produce v3+ request starting at ``offset`` of ``frame``.

    Raises InvalidRequestError naming the field when the bytes do not hold one.
    """
    reader = ByteReader(frame, offset)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    transactional_id = reader.string(flexible, True, "transactional_id")
    acks = reader.int16("acks")
    timeout_ms = reader.int32("timeout_ms")
    partitions = []
    topic_count = reader.length(flexible, False, "topic_data")
    for _ in range(topic_count):
        topic = reader.string(flexible, False, "topic_data.name")
        partition_count = reader.length(flexible, False, "topic_data.partition_data", unit=5)
        for _ in range(partition_count):
            index = reader.int32("partition_data.index")
            records = reader.bytes_view(flexible, True, "partition_data.records")
            if flexible:
                reader.skip_tagged_fields("partition_data tagged fields")
            partitions.append(ProducePartition(topic, index, records))
        if flexible:
            reader.skip_tagged_fields("topic_data tagged fields")
    if flexible:
        reader.skip_tagged_fields("tagged fields")
    return KafkaProduceRequest(transactional_id, acks, timeout_ms, partitions)
