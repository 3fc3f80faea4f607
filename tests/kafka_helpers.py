"""Helpers for the tests that drive odradek with Kafka's own clients."""

from __future__ import annotations

import time

import confluent_kafka
import confluent_kafka.admin


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    client = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    new = confluent_kafka.admin.NewTopic(name, partitions, replication_factor=1, config=configs)
    client.create_topics([new])[name].result(timeout=30)  # client must outlive its future


def consumer(bootstrap: str) -> confluent_kafka.Consumer:
    """A consumer for manual assignment: no group is joined and nothing is committed, so
    tests that read partitions do not leave groups behind."""
    return confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "manual-assignment",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
    )


def consume(
    bootstrap: str, topic: str, offset: int, count: int, partition: int = 0
) -> list[confluent_kafka.Message]:
    """Up to ``count`` messages of one partition from ``offset`` (30 s at most)."""
    reader = consumer(bootstrap)
    reader.assign([confluent_kafka.TopicPartition(topic, partition, offset)])
    messages = []
    deadline = time.monotonic() + 30
    while len(messages) < count and time.monotonic() < deadline:
        message = reader.poll(0.2)
        if message is not None and not message.error():
            messages.append(message)
    reader.close()
    return messages
