"""kafka-python (>= 3.0) and aiokafka against odradek's Kafka listener: produce with every
codec and acks level, consume with manual assignment, admin."""

from __future__ import annotations

import asyncio
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic, OffsetSpec
from kafka_helpers import create_topic
from server_helpers import RunningBroker, running_broker

from odradek.record.memory_records import MemoryRecords
from odradek.topic_partition import TopicPartition as OurTopicPartition

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    with running_broker(tmp_path_factory.mktemp("kafka-python")) as running:
        yield running


def stored_codecs(broker: RunningBroker, topic: str) -> set[str]:
    log = broker.broker.log_manager.get_log(OurTopicPartition(topic, 0))
    codecs = set()
    for segment in log.segments.values():
        data = segment.log.read(0, segment.size)
        for batch in MemoryRecords(data).batches():
            codecs.add(batch.compression_type.name.lower())
    return codecs


def read_all(broker: RunningBroker, topic: str, count: int, start: int | None = 0) -> list:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    if start is None:
        consumer.seek_to_beginning(partition)
    else:
        consumer.seek(partition, start)
    records = []
    deadline = time.monotonic() + 30
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    consumer.close()
    return records


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_kafka_python_produces_with_every_codec_and_acks(
    broker: RunningBroker, codec: str | None, acks: object
) -> None:
    topic = f"kp-{codec or 'none'}-{acks}"
    create_topic(broker.bootstrap, topic)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        compression_type=codec,
        acks=acks,
        linger_ms=5,
        enable_idempotence=acks == "all",  # idempotent where Kafka allows it
    )
    futures = [producer.send(topic, key=b"k%d" % n, value=b"v%d" % n * 20) for n in range(30)]
    producer.flush(30)
    offsets = [future.get(timeout=30).offset for future in futures]
    producer.close()
    if acks != 0:
        assert offsets == list(range(30))

    records = read_all(broker, topic, 30, start=None)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (n, b"k%d" % n, b"v%d" % n * 20) for n in range(30)
    ]
    assert stored_codecs(broker, topic) == {codec or "none"}


def test_kafka_python_consumes_from_latest_a_timestamp_and_an_offset(
    broker: RunningBroker,
) -> None:
    topic = "kp-starts"
    create_topic(broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for n in range(10):
        producer.send(topic, value=b"old%d" % n, timestamp_ms=1_000_000 + n)
    for n in range(10):
        producer.send(topic, value=b"new%d" % n, timestamp_ms=2_000_000 + n)
    producer.flush(30)

    assert [r.value for r in read_all(broker, topic, 3, start=17)] == [b"new7", b"new8", b"new9"]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    partition = TopicPartition(topic, 0)
    found = consumer.offsets_for_times({partition: 2_000_000})
    assert found[partition].offset == 10 and found[partition].timestamp == 2_000_000
    assert consumer.beginning_offsets([partition]) == {partition: 0}
    assert consumer.end_offsets([partition]) == {partition: 20}
    consumer.assign([partition])
    consumer.seek_to_end(partition)
    assert consumer.position(partition) == 20
    producer.send(topic, value=b"latest")
    producer.flush(30)
    producer.close()
    records = []
    deadline = time.monotonic() + 30
    while not records and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    consumer.close()
    assert [(r.offset, r.value) for r in records] == [(20, b"latest")]


def test_kafka_python_admin(broker: RunningBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp-admin", 2, 1, topic_configs={"retention.ms": "60000"})])
    assert "kp-admin" in admin.list_topics()

    resource = ConfigResource(ConfigResourceType.TOPIC, "kp-admin")
    configs = admin.describe_configs([resource], config_filter="all")["topic"]["kp-admin"]
    assert configs["retention.ms"]["value"] == "60000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["config_type"] == "INT"
    change = ConfigResource(ConfigResourceType.TOPIC, "kp-admin", {"segment.ms": "7200000"})
    admin.alter_configs([change], incremental=False)
    configs = admin.describe_configs([resource], config_filter="all")["topic"]["kp-admin"]
    assert configs["segment.ms"]["value"] == "7200000"
    assert configs["retention.ms"]["value"] == "60000"  # kafka-python resends the others

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for n in range(6):
        producer.send("kp-admin", value=b"%d" % n, partition=0)
    producer.flush(30)
    producer.close()
    partition = TopicPartition("kp-admin", 0)
    admin.delete_records({partition: 4})
    offsets = admin.list_partition_offsets({partition: OffsetSpec.EARLIEST})
    assert offsets[partition].offset == 4
    offsets = admin.list_partition_offsets({partition: OffsetSpec.LATEST})
    assert offsets[partition].offset == 6

    cluster = admin.describe_cluster()
    assert cluster["cluster_id"] and [b["broker_id"] for b in cluster["brokers"]] == [0]

    admin.delete_topics(["kp-admin"])
    assert "kp-admin" not in admin.list_topics()
    admin.close()


def test_aiokafka_produces_and_consumes(broker: RunningBroker) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic = "aiokafka"
    create_topic(broker.bootstrap, topic)

    async def run() -> list:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, compression_type="gzip", acks="all"
        )
        await producer.start()
        try:
            for n in range(20):
                await producer.send_and_wait(topic, value=b"a%d" % n, key=b"k")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition(topic, 0)
            consumer.assign([partition])
            consumer.seek(partition, 5)
            records = []
            async with asyncio.timeout(30):
                while len(records) < 15:
                    batches = await consumer.getmany(timeout_ms=500)
                    for batch in batches.values():
                        records.extend(batch)
            return records
        finally:
            await consumer.stop()

    records = asyncio.run(run())
    assert [(r.offset, r.value) for r in records] == [(n, b"a%d" % n) for n in range(5, 20)]
    assert stored_codecs(broker, topic) == {"gzip"}


def test_describe_configs_lists_synonyms_in_kafkas_order(tmp_path) -> None:
    with running_broker(tmp_path, {"log.retention.hours": "24"}) as running:
        admin = KafkaAdminClient(bootstrap_servers=running.bootstrap)
        admin.create_topics([NewTopic("syn", 1, 1, topic_configs={"retention.ms": "60000"})])
        resource = ConfigResource(ConfigResourceType.TOPIC, "syn")
        described = admin.describe_configs([resource], include_synonyms=True, config_filter="all")
        admin.close()
    configs = described["topic"]["syn"]
    assert [(s["name"], s["value"], s["source"]) for s in configs["retention.ms"]["synonyms"]] == [
        ("retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG"),
        ("log.retention.hours", "24", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    assert [s["source"] for s in configs["segment.bytes"]["synonyms"]] == ["DEFAULT_CONFIG"]
