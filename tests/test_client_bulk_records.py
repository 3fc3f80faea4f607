"""The clients' fast paths end to end, checked against the plain ones through a real broker:
records sent with ``send_many`` (written into batches in bulk) come back as the same records
as those sent one by one with ``send``, and the consumer's bulk decoding gives exactly what
the one-record-at-a-time codec reads from the same stored batches."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_broker import FakeBroker, async_test
from server_helpers import running_broker

from odradek.client.admin import Admin, NewTopic
from odradek.client.completed_fetch import CompletedFetch
from odradek.client.consumer import Consumer
from odradek.client.consumer_record import ConsumerRecord
from odradek.client.producer import AsyncProducer, Producer
from odradek.errors import MessageTooLargeError
from odradek.protocol.values.fetch import FetchPartitionResponse
from odradek.record.memory_records import MemoryRecords
from odradek.record.record import decode_record
from odradek.record.record_batch import HEADER_SIZE, RecordBatch, TimestampType
from odradek.topic_partition import TopicPartition

TIMESTAMP = 1_700_000_000_000


def records_of(count: int, seed: int) -> tuple[list[bytes | None], list[bytes | None]]:
    """Keys and values of varied sizes, some null, some past the one-byte varints."""
    rng = __import__("random").Random(seed)
    keys, values = [], []
    for index in range(count):
        keys.append(None if index % 7 == 0 else os.urandom(rng.choice((0, 1, 5, 70, 200))))
        values.append(None if index % 11 == 3 else os.urandom(rng.choice((0, 3, 100, 300, 9000))))
    return keys, values


def plain_decoded(batch: RecordBatch, topic: str, partition: int) -> list[ConsumerRecord]:
    """The batch's records read by the one-record decoder."""
    header = batch.header()
    data = bytes(batch.to_bytes()[HEADER_SIZE:])
    log_append_time = (
        header.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    )
    records, position = [], 0
    for _ in range(header.records_count):
        record, position = decode_record(
            data, position, header.base_offset, header.base_timestamp, log_append_time
        )
        records.append(
            ConsumerRecord(
                topic,
                partition,
                record.offset,
                record.timestamp,
                batch.timestamp_type,
                record.key,
                record.value,
                record.headers,
            )
        )
    assert position == len(data)
    return records


def consume_all(bootstrap: str, topic: str, count: int) -> list[ConsumerRecord]:
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=50) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records: list[ConsumerRecord] = []
        for _ in range(200):
            records += consumer.poll(200)
            if len(records) >= count:
                break
    return records


def stored_batches(data_dir: Path, topic: str) -> list[RecordBatch]:
    (segment,) = sorted((data_dir / f"{topic}-0").glob("*.log"))
    return list(MemoryRecords(segment.read_bytes()).batches())


def test_send_many_and_send_store_and_return_the_same_records(tmp_path: Path) -> None:
    keys, values = records_of(3000, seed=1)
    with running_broker(tmp_path) as broker:
        bootstrap = broker.bootstrap
        admin = Admin(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic("plain", 1), NewTopic("bulk", 1)])
        admin.close()
        with Producer(bootstrap_servers=bootstrap, batch_size=20_000, linger_ms=5) as producer:
            plain = [
                producer.send("plain", value, key, partition=0, timestamp_ms=TIMESTAMP)
                for key, value in zip(keys, values, strict=True)
            ]
            bulk = [
                producer.send_many(
                    "bulk",
                    values[start : start + 500],
                    keys[start : start + 500],
                    partition=0,
                    timestamp_ms=TIMESTAMP,
                )
                for start in range(0, len(values), 500)
            ]
            producer.flush()
            plain_metadata = [future.result() for future in plain]
            bulk_metadata = [metadata for future in bulk for metadata in future.result()]
        assert [m.offset for m in bulk_metadata] == list(range(len(values)))
        assert [(m.partition, m.offset, m.timestamp) for m in bulk_metadata] == [
            (m.partition, m.offset, m.timestamp) for m in plain_metadata
        ]
        from_plain = consume_all(bootstrap, "plain", len(values))
        from_bulk = consume_all(bootstrap, "bulk", len(values))
        assert [r[2:] for r in from_bulk] == [r[2:] for r in from_plain]
        assert [(r.key, r.value) for r in from_bulk] == list(zip(keys, values, strict=True))
        assert {r.timestamp for r in from_bulk} == {TIMESTAMP}
        for topic, consumed in (("plain", from_plain), ("bulk", from_bulk)):
            batches = stored_batches(broker.data_dir, topic)
            assert len(batches) > 5  # the records span many batches
            plain_read = [r for b in batches for r in plain_decoded(b, topic, 0)]
            assert consumed == plain_read


def test_the_consumer_reads_headers_and_log_append_times_as_the_plain_decoder(
    tmp_path: Path,
) -> None:
    headers = [(), (("h", b"1"),), (("é", None), ("k", b"")), (("x", b"y" * 300),)]
    with running_broker(tmp_path, {"log.message.timestamp.type": "LogAppendTime"}) as broker:
        admin = Admin(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("t", 1)])
        admin.close()
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=20) as producer:
            for index in range(400):
                producer.send("t", b"v%d" % index, None, headers[index % 4], partition=0)
            producer.send_many("t", [b"w"] * 100, partition=0)
            producer.flush()
        consumed = consume_all(broker.bootstrap, "t", 500)
        plain_read = [
            r for b in stored_batches(broker.data_dir, "t") for r in plain_decoded(b, "t", 0)
        ]
    assert len(consumed) == 500
    assert consumed == plain_read
    assert {r.timestamp_type for r in consumed} == {TimestampType.LOG_APPEND_TIME}
    assert [r.headers for r in consumed[:4]] == headers


def test_a_fetch_starting_inside_a_batch_skips_the_records_before_it() -> None:
    keys, values = records_of(50, seed=2)
    from odradek.record.record_batch_builder import RecordBatchBuilder

    builder = RecordBatchBuilder(base_offset=1000)
    builder.append_many(TIMESTAMP, keys, values, 0, 50, 1 << 30)
    batch = builder.build()
    fetch = CompletedFetch(
        TopicPartition("t", 0), 1020, FetchPartitionResponse("t", 0, records=batch), True
    )
    taken = fetch.take(7) + fetch.take(100)
    assert [r.offset for r in taken] == list(range(1020, 1050))
    assert [(r.key, r.value) for r in taken] == list(zip(keys[20:], values[20:], strict=True))
    assert fetch.next_offset == 1050


@async_test
async def test_send_many_spreads_keyed_records_as_send_does_and_keeps_their_order() -> None:
    keys = [b"key-%d" % (i % 13) for i in range(300)]
    values = [b"value-%d" % i for i in range(300)]
    async with FakeBroker() as broker:
        broker.create("t", 4)
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=1) as producer:
            bulk = await producer.send_many("t", values, keys)
            one_by_one = [
                await producer.send("t", value, key)
                for key, value in zip(keys, values, strict=True)
            ]
    assert [m.partition for m in bulk] == [m.partition for m in one_by_one]
    assert len({m.partition for m in bulk}) > 1
    for partition in range(4):
        mine = [m.offset for m in bulk if m.partition == partition]
        assert mine == sorted(mine)
    stored = {}
    for partition, log in enumerate(broker.topics["t"]):
        for batch in log.batches:
            for record in RecordBatch(batch).records():
                stored[(partition, record.offset)] = (record.key, record.value)
    assert [stored[(m.partition, m.offset)] for m in bulk] == list(zip(keys, values, strict=True))


@async_test
async def test_send_many_refuses_what_send_refuses() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, max_request_size=1000
        ) as producer:
            await producer.send("t", b"x")  # the topic is known
            with pytest.raises(MessageTooLargeError):
                producer.send_many("t", [b"a", b"b" * 2000])
            with pytest.raises(ValueError):
                producer.send_many("t", [b"a", b"b"], [b"k"])
            with pytest.raises(TypeError):
                producer.send_many("t", [b"a", "text"], partition=0)
            assert await producer.send_many("t", [], partition=0) == []


@async_test
async def test_send_many_without_keys_sticks_to_a_partition_until_it_starts_a_batch() -> None:
    async with FakeBroker() as broker:
        broker.create("t", 8)
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, linger_ms=50, batch_size=2000
        ) as producer:
            await producer.send("t", b"x", partition=0)  # the topic is known
            calls = [producer.send_many("t", [b"v" * 100] * 5) for _ in range(40)]
            partitions = [{m.partition for m in await call} for call in calls]
    assert all(len(used) == 1 for used in partitions)  # each call stays in one partition
    assert len(set().union(*partitions)) > 1  # and they move on as batches fill
