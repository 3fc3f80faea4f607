"""A Kafka client in its own process for the quota tests, so clients do not share a Python
interpreter (and its lock) with each other or with the broker.

    python quota_client_process.py produce BOOTSTRAP TOPIC CLIENT_ID SECONDS
    python quota_client_process.py consume BOOTSTRAP TOPIC CLIENT_ID SECONDS

``produce`` sends 1000-byte records as fast as the broker takes them; ``consume`` reads the
topic from the start and prints, as JSON, the record bytes it had received at each tenth of a
second from its first record on.
"""

from __future__ import annotations

import json
import sys
import time

import confluent_kafka


def produce(bootstrap: str, topic: str, client_id: str, seconds: float) -> None:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 16384,
            "acks": 1,
        }
    )
    value = b"x" * 1000
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)


def consume(bootstrap: str, topic: str, client_id: str, seconds: float) -> None:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": client_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.max.bytes": 1048576,
            "max.partition.fetch.bytes": 65536,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    received = 0
    started = None
    timeline: list[int] = []
    deadline = time.monotonic() + seconds + 30
    while time.monotonic() < deadline:
        messages = consumer.consume(1000, 0.05)
        now = time.monotonic()
        if started is not None:
            while len(timeline) < int((now - started) * 10):
                timeline.append(received)
            if now - started >= seconds:
                break
        for message in messages:
            if message.error() is None:
                if started is None:
                    started = now
                received += len(message.value() or b"")
    consumer.close()
    json.dump(timeline, sys.stdout)


if __name__ == "__main__":
    command, bootstrap, topic, client_id, seconds = sys.argv[1:6]
    {"produce": produce, "consume": consume}[command](bootstrap, topic, client_id, float(seconds))
