"""confluent-kafka (librdkafka) against odradek's Kafka listener: produce with every codec and
acks, consume from every kind of start, admin; the stored batches checked with dump-log."""

from __future__ import annotations

import json
import time
from pathlib import Path

import confluent_kafka
import pytest
from click.testing import CliRunner
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)
from kafka_helpers import consume, consumer
from server_helpers import RunningBroker, running_broker

from odradek.cli.main import cli

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_LABELS = {"none": "none", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    with running_broker(tmp_path_factory.mktemp("confluent")) as running:
        yield running


def admin(broker: RunningBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(broker: RunningBroker, name: str, partitions: int = 1, **configs: str) -> None:
    client = admin(broker)  # must outlive the future
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)]
    )
    futures[name].result(timeout=30)


def produce(broker: RunningBroker, topic: str, values: list[bytes], **config: object) -> list:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **config})
    delivered = []

    def on_delivery(error: object, message: object) -> None:
        delivered.append((error, message.offset() if message is not None else None))

    for index, value in enumerate(values):
        producer.produce(topic, value=value, key=b"k%d" % index, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    return delivered


def dump_codecs(broker: RunningBroker, topic: str) -> list[str]:
    directory = broker.data_dir / f"{topic}-0"
    result = CliRunner().invoke(
        cli, ["dump-log", "--json", *sorted(map(str, directory.glob("*.log")))]
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return [line["compression"] for line in lines if line.get("type") == "batch"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_with_every_codec_and_acks_stores_that_codec(
    broker: RunningBroker, codec: str, acks: str
) -> None:
    topic = f"codec-{codec}-acks-{acks}"
    create_topic(broker, topic)
    values = [b"value-%d" % n * 10 for n in range(50)]

    delivered = produce(broker, topic, values, **{"compression.type": codec, "acks": acks})

    assert [error for error, _ in delivered] == [None] * 50
    if acks != "0":
        assert sorted(offset for _, offset in delivered) == list(range(50))
    messages = consume(broker.bootstrap, topic, OFFSET_BEGINNING, 50)
    assert [m.value() for m in messages] == values
    assert [m.key() for m in messages] == [b"k%d" % n for n in range(50)]
    codecs = dump_codecs(broker, topic)
    assert codecs and set(codecs) == {CODEC_LABELS[codec]}


def test_consume_from_latest_a_timestamp_and_an_explicit_offset(broker: RunningBroker) -> None:
    topic = "starts"
    create_topic(broker, topic)
    produce(broker, topic, [b"old-%d" % n for n in range(10)])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(broker, topic, [b"new-%d" % n for n in range(10)])

    assert [m.value() for m in consume(broker.bootstrap, topic, 15, 5)] == [
        b"new-%d" % n for n in range(5, 10)
    ]
    reader = consumer(broker.bootstrap)
    found = reader.offsets_for_times([TopicPartition(topic, 0, middle)], timeout=10)
    reader.close()
    assert found[0].offset == 10
    assert [m.value() for m in consume(broker.bootstrap, topic, found[0].offset, 10)][0] == b"new-0"

    reader = consumer(broker.bootstrap)
    reader.assign([TopicPartition(topic, 0, OFFSET_END)])
    reader.poll(1.0)  # the position is resolved to the log end
    produce(broker, topic, [b"latest"])
    deadline = time.monotonic() + 30
    received = None
    while received is None and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and not message.error():
            received = message
    reader.close()
    assert received is not None and received.value() == b"latest" and received.offset() == 20


def test_admin_topics_configs_records_cluster_and_offsets(broker: RunningBroker) -> None:
    client = admin(broker)
    create_topic(broker, "admin-topic", 3, **{"retention.ms": "3600000"})
    metadata = client.list_topics(timeout=10)
    assert len(metadata.topics["admin-topic"].partitions) == 3
    topic_id = (
        client.describe_topics(confluent_kafka.TopicCollection(["admin-topic"]))["admin-topic"]
        .result(timeout=10)
        .topic_id
    )
    assert str(topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"

    resource = ConfigResource(ConfigResource.Type.TOPIC, "admin-topic")
    configs = client.describe_configs([resource])[resource].result(timeout=10)
    assert configs["retention.ms"].value == "3600000"
    assert (
        configs["retention.ms"].source
        == confluent_kafka.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    )
    assert configs["segment.bytes"].is_default

    incremental = ConfigResource(
        ConfigResource.Type.TOPIC,
        "admin-topic",
        incremental_configs=[
            # compact and delete: DeleteRecords below is refused (POLICY_VIOLATION) on a topic
            # that is compacted only, as Kafka refuses it.
            ConfigEntry(
                "cleanup.policy", "compact,delete", incremental_operation=AlterConfigOpType.SET
            ),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    client.incremental_alter_configs([incremental])[incremental].result(timeout=10)
    configs = client.describe_configs([resource])[resource].result(timeout=10)
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["retention.ms"].is_default or configs["retention.ms"].value != "3600000"

    produce(broker, "admin-topic", [b"r%d" % n for n in range(10)], partitioner="murmur2", **{})
    described = client.describe_cluster(request_timeout=10).result(timeout=10)
    assert described.cluster_id and [node.id for node in described.nodes] == [0]

    partitions = {TopicPartition("admin-topic", p): OffsetSpec.latest() for p in range(3)}
    latest = client.list_offsets(partitions)
    total = sum(future.result(timeout=10).offset for future in latest.values())
    assert total == 10

    populated = next(tp for tp, f in latest.items() if f.result(timeout=10).offset >= 2)
    deleted = client.delete_records([TopicPartition("admin-topic", populated.partition, 2)])
    [(_, future)] = deleted.items()
    assert future.result(timeout=10).low_watermark == 2
    earliest = client.list_offsets({populated: OffsetSpec.earliest()})[populated].result(10)
    assert earliest.offset == 2
    max_ts = client.list_offsets({populated: OffsetSpec.max_timestamp()})[populated].result(10)
    assert 0 <= max_ts.offset < 10 and max_ts.timestamp > 0

    client.delete_topics(["admin-topic"])["admin-topic"].result(timeout=10)
    assert "admin-topic" not in client.list_topics(timeout=10).topics


def test_topic_ids_persist_in_partition_metadata(broker: RunningBroker, tmp_path: Path) -> None:
    create_topic(broker, "with-id", 2)
    contents = {
        (broker.data_dir / f"with-id-{p}" / "partition.metadata").read_text() for p in range(2)
    }
    assert len(contents) == 1
    [text] = contents
    assert text.startswith("version: 0\ntopic_id: ")


def test_topics_grow_through_both_protocols(broker: RunningBroker) -> None:
    from confluent_kafka.admin import NewPartitions

    client = admin(broker)
    create_topic(broker, "growing", 1)
    client.create_partitions([NewPartitions("growing", 3)])["growing"].result(timeout=10)
    assert len(client.list_topics("growing", timeout=10).topics["growing"].partitions) == 3
    shrink = client.create_partitions([NewPartitions("growing", 2)])["growing"]
    with pytest.raises(confluent_kafka.KafkaException, match="INVALID_PARTITIONS"):
        shrink.result(timeout=10)

    result = CliRunner().invoke(
        cli, ["topics", "alter", "growing", "--partitions", "5", "--bootstrap", broker.bootstrap]
    )
    assert result.exit_code == 0, result.output
    assert "now has 5 partitions" in result.output
    assert len(client.list_topics("growing", timeout=10).topics["growing"].partitions) == 5
    ids = {(broker.data_dir / f"growing-{p}" / "partition.metadata").read_text() for p in range(5)}
    assert len(ids) == 1  # the new partitions carry the topic's id
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("growing", value=b"x", partition=4)
    assert producer.flush(30) == 0
    assert [m.value() for m in consume(broker.bootstrap, "growing", 0, 1, partition=4)] == [b"x"]


def test_broker_configs_are_described_read_only(broker: RunningBroker) -> None:
    client = admin(broker)
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = client.describe_configs([resource])[resource].result(timeout=10)
    assert configs["log.retention.hours"].value == "168"
    assert configs["log.retention.hours"].is_read_only
    assert (
        configs["log.dirs"].source == confluent_kafka.admin.ConfigSource.STATIC_BROKER_CONFIG.value
    )
