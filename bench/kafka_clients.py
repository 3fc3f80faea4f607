"""Kafka's protocol against odradek's own, side by side in one run (prints, asserts nothing).

(a) broker CPU per record, protocol against protocol: the same record batches sent as
    msgpack Produce frames and as Kafka Produce v9 frames by a lean pipelined client
    (acks=1), then fetched back by both protocols;
(b) confluent-kafka (librdkafka) producer, 100 B and 1 KB records, acks=1 and acks=all, beside
    odradek's own Producer: records/s, MB/s and broker CPU-seconds per 1M records;
(c) confluent-kafka consumer beside odradek's own Consumer, 100 B records;
(d) an all-topics Metadata request (Kafka v12 and msgpack) with 1,000, 2,000 and 4,000 topics
    of 2 partitions: its time should grow with the partitions, not with topics x partitions.

Targets (issue 17): Kafka's protocol costs the broker at most 10% more CPU per record than
msgpack; librdkafka produces >= 500k records/s of 100 B.

Usage: ``python bench/kafka_clients.py [--quick]`` (``--quick``: a tenth of the volumes).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import uvloop
from broker import (
    MB,
    BrokerProcess,
    PipelinedClient,
    admin_call,
    create_topic,
    frame_of,
    kafka_frame,
)
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.client import AsyncConsumer, AsyncProducer
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.record.record_batch_builder import build_batch
from odradek.topic_partition import TopicPartition

BATCH_BYTES = 64 * 1024
"""Batches of about the size librdkafka sends under load."""


def batch_of(value_size: int) -> tuple[bytes, int]:
    count = BATCH_BYTES // (value_size + 10)
    now = int(time.time() * 1000)
    return build_batch([(now, None, b"v" * value_size, ())] * count), count


def kafka_produce_frame(topic: str, batch: bytes) -> bytes:
    values = {
        "acks": 1,
        "timeout": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    return kafka_frame(0, 9, values)


def kafka_fetch_frame(topic: str, offset: int, size: int) -> bytes:
    values = {
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": size,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": size}
                ],
            }
        ],
    }
    return kafka_frame(1, 12, values)


def measure(broker: BrokerProcess, label: str, frames: list[bytes], records: int) -> float:
    started = broker.cpu_seconds()
    elapsed = PipelinedClient(broker.port, 16).run(frames)
    used = broker.cpu_seconds() - started
    per_million = used / records * 1e6
    print(
        f"  {label:<34} {per_million:7.3f} CPU-s per 1M records, "
        f"{records / elapsed:>11,.0f} records/s"
    )
    return per_million


def section_a(broker: BrokerProcess, scale: float) -> None:
    print("(a) broker CPU per record: the same batches over each protocol (64 KB, acks=1)")
    for value_size in (100, 1000):
        batch, count = batch_of(value_size)
        requests = max(200, int(3000 * scale))
        costs = {}
        for protocol in ("msgpack", "kafka", "msgpack ", "kafka "):  # twice, interleaved
            topic = f"a-{value_size}-{protocol.strip()}-{len(costs)}"
            create_topic(broker.port, topic, **{"segment.bytes": str(1024 * MB)})
            if protocol.startswith("msgpack"):
                request = ProduceRequest((ProducePartitionData(topic, 0, batch),), Acks.LEADER)
                frames = [frame_of(request)] * requests
            else:
                frames = [kafka_produce_frame(topic, batch)] * requests
            label = f"produce {value_size} B, {protocol.strip()}"
            costs.setdefault(protocol.strip(), []).append(
                measure(broker, label, frames, requests * count)
            )
            fetch_size = len(batch) * 8
            offsets = range(0, requests * count, 8 * count)
            if protocol.startswith("msgpack"):
                fetches = [
                    frame_of(
                        FetchRequest(
                            (FetchPartition(topic, 0, offset, fetch_size),),
                            max_wait_ms=0,
                            max_bytes=fetch_size,
                        )
                    )
                    for offset in offsets
                ]
            else:
                fetches = [kafka_fetch_frame(topic, offset, fetch_size) for offset in offsets]
            measure(broker, f"fetch {value_size} B, {protocol.strip()}", fetches, requests * count)
        ratio = min(costs["kafka"]) / min(costs["msgpack"])
        print(f"  => Kafka/msgpack broker CPU per produced record ({value_size} B): {ratio:.2f}")


def section_b(broker: BrokerProcess, scale: float) -> None:
    print("(b) producers: confluent-kafka (librdkafka) beside odradek's Producer")
    for value_size in (100, 1000):
        for acks in ("1", "all"):
            topic = f"b-{value_size}-{acks}"
            create_topic(broker.port, topic, **{"segment.bytes": str(1024 * MB)})
            count = max(50_000, int(2_000_000 * scale * (100 / value_size) ** 0.5))
            producer = Producer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "acks": acks,
                    "linger.ms": 5,
                    "batch.size": 1_000_000,
                    "queue.buffering.max.messages": 2_000_000,
                    "queue.buffering.max.kbytes": 2_000_000,
                }
            )
            producer.produce(topic, b"warm-up", partition=0)
            producer.flush(30)
            value = b"v" * value_size
            started_cpu, started = broker.cpu_seconds(), time.perf_counter()
            for _ in range(count):
                while True:
                    try:
                        producer.produce(topic, value, partition=0)
                        break
                    except BufferError:
                        producer.poll(0.01)
            producer.flush(120)
            elapsed = time.perf_counter() - started
            used = broker.cpu_seconds() - started_cpu
            report(f"librdkafka {value_size} B acks={acks}", count, value_size, elapsed, used)
            own_count = max(10_000, count // 10)
            elapsed, used = uvloop.run(own_producer(broker, topic, value, own_count, acks))
            report(f"odradek    {value_size} B acks={acks}", own_count, value_size, elapsed, used)


async def own_producer(
    broker: BrokerProcess, topic: str, value: bytes, count: int, acks: str
) -> tuple[float, float]:
    async with AsyncProducer(
        bootstrap_servers=broker.bootstrap,
        acks=acks,
        linger_ms=5,
        batch_size=1024 * 1024,
        buffer_memory=512 * MB,
    ) as producer:
        await producer.send(topic, b"warm-up", partition=0)
        started_cpu, started = broker.cpu_seconds(), time.perf_counter()
        last = None
        for _ in range(count):
            last = producer.send(topic, value, partition=0)
        await producer.flush()
        await last
        return time.perf_counter() - started, broker.cpu_seconds() - started_cpu


def report(label: str, count: int, value_size: int, elapsed: float, cpu: float) -> None:
    print(
        f"  {label:<30} {count / elapsed:>11,.0f} records/s "
        f"{count * value_size / elapsed / MB:7.1f} MB/s "
        f"{cpu / count * 1e6:7.3f} broker CPU-s per 1M records"
    )


def section_c(broker: BrokerProcess, scale: float) -> None:
    print("(c) consumers of 100 B records: confluent-kafka beside odradek's Consumer")
    topic = "b-100-1"  # written by section (b)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * MB,
        }
    )
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    count = max(50_000, int(2_000_000 * scale))
    received = 0
    started_cpu, started = broker.cpu_seconds(), time.perf_counter()
    while received < count:
        received += sum(1 for m in consumer.consume(10_000, 1.0) if not m.error())
    elapsed = time.perf_counter() - started
    report("librdkafka consumer 100 B", received, 100, elapsed, broker.cpu_seconds() - started_cpu)
    consumer.close()
    own = max(10_000, count // 10)
    elapsed, used = uvloop.run(own_consumer(broker, topic, own))
    report("odradek consumer 100 B", own, 100, elapsed, used)


async def own_consumer(broker: BrokerProcess, topic: str, count: int) -> tuple[float, float]:
    tp = TopicPartition(topic, 0)
    async with AsyncConsumer(bootstrap_servers=broker.bootstrap, max_poll_records=100_000) as c:
        c.assign([tp])
        c.seek_to_beginning(tp)
        started_cpu, started = broker.cpu_seconds(), time.perf_counter()
        received = 0
        while received < count:
            received += len(await c.poll(1000))
        return time.perf_counter() - started, broker.cpu_seconds() - started_cpu


def section_d(broker: BrokerProcess, scale: float) -> None:
    print("(d) an all-topics Metadata request against the number of topics (2 partitions each)")
    kafka = kafka_frame(
        3,
        12,
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    msgpack = frame_of(MetadataRequest(None, False))
    created = 0
    for topics in (int(1000 * scale), int(2000 * scale), int(4000 * scale)):
        for first in range(created, topics, 250):
            names = [f"d-{n:05d}" for n in range(first, min(first + 250, topics))]
            admin_call(broker.port, CreateTopicsRequest(tuple(CreatableTopic(n, 2) for n in names)))
        created = topics
        times = {}
        for label, frame in (("kafka", kafka), ("msgpack", msgpack)):
            times[label] = min(PipelinedClient(broker.port, 1).run([frame]) for _ in range(7))
        print(
            f"  {topics:>5} topics, {2 * topics:>5} partitions (and those of (a)-(c)): "
            f"Kafka {times['kafka'] * 1000:6.1f} ms, msgpack {times['msgpack'] * 1000:6.1f} ms, "
            f"best of 7"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the volumes")
    scale = 0.1 if parser.parse_args().quick else 1.0
    with tempfile.TemporaryDirectory(prefix="odradek-kafka-bench-") as directory:
        broker = BrokerProcess(Path(directory))
        try:
            section_a(broker, scale)
            section_b(broker, scale)
            section_c(broker, scale)
            section_d(broker, scale)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
