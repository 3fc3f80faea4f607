"""AsyncConsumer and Consumer against the fake broker: positions, resets, partial batches."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from fake_broker import FakeBroker, async_test, broker_in_thread, fill

from odradek.client.completed_fetch import CompletedFetch
from odradek.client.consumer import AsyncConsumer, Consumer
from odradek.client.consumer_record import ConsumerRecord
from odradek.client.offset_lookup import OffsetAndTimestamp
from odradek.client.producer import Producer
from odradek.errors import (
    CorruptRecordError,
    InvalidConfigError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.values.fetch import FetchPartitionResponse
from odradek.record.compression import CompressionType
from odradek.record.record_batch import TimestampType
from odradek.record.record_batch_builder import RecordBatchBuilder, build_batch
from odradek.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def values(records: list[ConsumerRecord]) -> list[bytes]:
    return [record.value for record in records]


async def poll_until(consumer: AsyncConsumer, count: int, timeout_s: float = 5) -> list:
    records: list[ConsumerRecord] = []
    async with asyncio.timeout(timeout_s):
        while len(records) < count:
            records += await consumer.poll(100)
    return records


def consumer_for(broker: FakeBroker, **configs) -> AsyncConsumer:
    configs.setdefault("auto_offset_reset", "earliest")
    configs.setdefault("fetch_max_wait_ms", 50)
    return AsyncConsumer(bootstrap_servers=broker.bootstrap, **configs)


@async_test
async def test_poll_returns_records_with_everything_about_them() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        log.append(memoryview(build_batch([(7, b"k", b"v", [("h", b"1")]), (8, None, None, ())])))
        async with consumer_for(broker) as consumer:
            consumer.assign([TP])
            records = await poll_until(consumer, 2)
        assert records == [
            ConsumerRecord("t", 0, 0, 7, TimestampType.CREATE_TIME, b"k", b"v", (("h", b"1"),)),
            ConsumerRecord("t", 0, 1, 8, TimestampType.CREATE_TIME, None, None, ()),
        ]


@async_test
async def test_seek_into_a_batch_drops_the_records_below_the_position() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 10, per_batch=5)
        async with consumer_for(broker) as consumer:
            consumer.assign([TP])
            consumer.seek(TP, 3)
            records = await poll_until(consumer, 7)
            assert [r.offset for r in records] == list(range(3, 10))
            assert await consumer.position(TP) == 10


@async_test
async def test_a_trailing_partial_batch_is_dropped_and_fetched_again_whole() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 40, per_batch=4)
        batch_size = len(log.batches[0])
        async with consumer_for(broker, max_partition_fetch_bytes=batch_size * 2 + 30) as consumer:
            consumer.assign([TP])
            records = await poll_until(consumer, 40)
        assert [r.offset for r in records] == list(range(40))
        assert values(records) == [f"v{i}".encode() for i in range(40)]
        assert len(broker.requests_of(ApiKey.FETCH)) >= 5


@async_test
async def test_max_poll_records_bounds_each_poll_and_the_position_follows() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 30, per_batch=10)
        async with consumer_for(broker, max_poll_records=4) as consumer:
            consumer.assign([TP])
            first = await poll_until(consumer, 1)
            assert [r.offset for r in first] == [0, 1, 2, 3]
            assert await consumer.position(TP) == 4
            rest = await poll_until(consumer, 26)
            assert [r.offset for r in rest] == list(range(4, 30))


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD])
@async_test
async def test_compressed_batches(codec: CompressionType) -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 12, per_batch=6, compression=codec)
        async with consumer_for(broker) as consumer:
            consumer.assign([TP])
            consumer.seek(TP, 2)
            assert [r.offset for r in await poll_until(consumer, 10)] == list(range(2, 12))


@async_test
async def test_control_batches_are_skipped_but_counted_in_the_position() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 2)
        control = RecordBatchBuilder(is_control=True)
        control.append(1, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")
        log.append(memoryview(control.build()))
        fill(log, 2)
        async with consumer_for(broker) as consumer:
            consumer.assign([TP])
            records = await poll_until(consumer, 4)
            assert [r.offset for r in records] == [0, 1, 3, 4]
            assert await consumer.position(TP) == 5


@pytest.mark.parametrize(("reset", "expected"), [("earliest", 0), ("latest", 5)])
@async_test
async def test_a_new_assignment_starts_where_auto_offset_reset_says(reset, expected) -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 5)
        async with consumer_for(broker, auto_offset_reset=reset) as consumer:
            consumer.assign([TP])
            assert await consumer.position(TP) == expected


@async_test
async def test_no_position_and_reset_none_raises() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        async with consumer_for(broker, auto_offset_reset="none") as consumer:
            consumer.assign([TP])
            with pytest.raises(OffsetOutOfRangeError, match="auto_offset_reset is 'none'"):
                await consumer.poll(10)


@async_test
async def test_out_of_range_fetch_resets_to_the_earliest_offset() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 6)
        log.log_start_offset = 2
        async with consumer_for(broker) as consumer:
            consumer.assign([TP])
            consumer.seek(TP, 50)
            records = await poll_until(consumer, 4)
            assert [r.offset for r in records] == [2, 3, 4, 5]


@async_test
async def test_out_of_range_fetch_with_reset_none_raises() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 6)
        async with consumer_for(broker, auto_offset_reset="none") as consumer:
            consumer.assign([TP])
            consumer.seek(TP, 50)
            with pytest.raises(
                OffsetOutOfRangeError,
                match=r"^OFFSET_OUT_OF_RANGE: offset 50 of t-0 is out of range \[0, 6\]$",
            ):
                await poll_until(consumer, 1)


@async_test
async def test_seek_to_beginning_and_end() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 8)
        log.log_start_offset = 3
        async with consumer_for(broker) as consumer:
            consumer.assign([TP])
            consumer.seek_to_end()
            assert await consumer.position(TP) == 8
            consumer.seek_to_beginning(TP)
            assert await consumer.position(TP) == 3
            assert await consumer.beginning_offsets([TP]) == {TP: 3}
            assert await consumer.end_offsets([TP]) == {TP: 8}


@async_test
async def test_offsets_for_times() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 5)  # timestamps 1000..1004
        async with consumer_for(broker) as consumer:
            found = await consumer.offsets_for_times({TP: 1002})
            assert found == {TP: OffsetAndTimestamp(2, 1002)}
            assert await consumer.offsets_for_times({TP: 5000}) == {TP: None}


@async_test
async def test_long_poll_returns_records_produced_while_waiting() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        async with consumer_for(broker, fetch_max_wait_ms=2000) as consumer:
            consumer.assign([TP])
            assert await consumer.poll(50) == []
            polling = asyncio.ensure_future(consumer.poll(3000))
            await asyncio.sleep(0.1)
            fill(log, 1)
            broker.wake_fetchers()
            assert values(await polling) == [b"v0"]


@async_test
async def test_seek_while_a_fetch_is_in_flight_discards_its_data() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 10)
        async with consumer_for(broker, max_poll_records=2) as consumer:
            consumer.assign([TP])
            assert [r.offset for r in await poll_until(consumer, 2)] == [0, 1]
            consumer.seek(TP, 7)
            assert [r.offset for r in await poll_until(consumer, 3)] == [7, 8, 9]


@async_test
async def test_retriable_partition_errors_are_retried() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 3)
        broker.inject(ApiKey.FETCH, "error", KafkaStorageError.code, times=2)
        async with consumer_for(broker, retry_backoff_ms=20) as consumer:
            consumer.assign([TP])
            assert [r.offset for r in await poll_until(consumer, 3)] == [0, 1, 2]


@async_test
async def test_a_lost_connection_is_retried() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 3)
        broker.inject(ApiKey.FETCH, "drop")
        async with consumer_for(broker, retry_backoff_ms=20, reconnect_backoff_ms=10) as consumer:
            consumer.assign([TP])
            assert [r.offset for r in await poll_until(consumer, 3)] == [0, 1, 2]


@async_test
async def test_a_corrupt_batch_is_raised_after_the_good_records_before_it() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 6, per_batch=3)
        corrupt = bytearray(log.batches[1])
        corrupt[-1] ^= 0xFF
        log.batches[1] = bytes(corrupt)
        async with consumer_for(broker) as consumer:
            consumer.assign([TP])
            assert [r.offset for r in await poll_until(consumer, 3)] == [0, 1, 2]
            with pytest.raises(CorruptRecordError, match="CRC"):
                await poll_until(consumer, 1)
            assert await consumer.position(TP) == 3


def test_data_without_a_whole_batch_asks_for_a_larger_fetch_size() -> None:
    batch = build_batch([(1, None, b"v" * 100, ())])
    response = FetchPartitionResponse("t", 0, records=memoryview(batch)[:50])
    with pytest.raises(MessageTooLargeError, match="max_partition_fetch_bytes"):
        CompletedFetch(TP, 0, response, check_crcs=True).take(10)


def test_partial_batch_after_whole_ones_is_dropped_quietly() -> None:
    whole = build_batch([(1, None, b"a", ()), (2, None, b"b", ())])
    partial = build_batch([(3, None, b"c", ())])[:20]
    response = FetchPartitionResponse("t", 0, records=memoryview(whole + partial))
    fetch = CompletedFetch(TP, 1, response, check_crcs=True)
    assert [r.value for r in fetch.take(10)] == [b"b"]
    assert fetch.next_offset == 2


def test_bad_consumer_configs() -> None:
    async def create(**configs) -> None:
        AsyncConsumer(**configs)

    for configs in ({"auto_offset_reset": "smallest"}, {"isolation": "committed"}):
        with pytest.raises(InvalidConfigError):
            asyncio.run(create(**configs))


def test_sync_consumer() -> None:
    with broker_in_thread() as broker:
        fill(broker.create("t")[0], 20)
        with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TP])
            assert c.assignment() == {TP}
            c.seek(TP, 5)
            records: list[ConsumerRecord] = []
            while len(records) < 15:
                records += c.poll(1000)
            assert [r.offset for r in records] == list(range(5, 20))
            assert c.position(TP) == 20
            assert c.end_offsets([TP]) == {TP: 20}
            assert c.offsets_for_times({TP: 1003}) == {TP: OffsetAndTimestamp(3, 1003)}
            c.seek_to_beginning()
            assert c.position(TP) == 0


@async_test
async def test_an_error_after_good_records_waits_for_the_next_poll() -> None:
    async with FakeBroker() as broker:
        good, bad = broker.create("t", 2)
        fill(good, 3)
        fill(bad, 3)
        bad.batches[0] = bad.batches[0][:-1] + bytes([bad.batches[0][-1] ^ 0xFF])
        async with consumer_for(broker) as consumer:
            consumer.assign([TP, TopicPartition("t", 1)])
            records = await poll_until(consumer, 3)
            assert [(r.partition, r.offset) for r in records] == [(0, 0), (0, 1), (0, 2)]
            with pytest.raises(CorruptRecordError):
                await consumer.poll(0)
            assert await consumer.position(TP) == 3


def fetch_offsets(broker: FakeBroker) -> list[int]:
    """The offset of TP each Fetch the broker received asked for, in order."""
    return [
        partition.fetch_offset
        for request in broker.requests_of(ApiKey.FETCH)
        for partition in request.partitions
        if (partition.topic, partition.partition) == ("t", 0)
    ]


async def fetches_sent(broker: FakeBroker, count: int) -> None:
    """Return once the broker has had ``count`` fetches of t-0 (however loaded the machine)."""
    async with asyncio.timeout(30):
        while len(fetch_offsets(broker)) < count:
            await asyncio.sleep(0.01)


@async_test
async def test_the_next_fetch_goes_out_when_a_response_arrives_not_when_the_caller_polls() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 3)  # one batch, offsets 0..2
        async with consumer_for(broker, max_poll_records=1, fetch_max_wait_ms=2000) as consumer:
            consumer.assign([TP])
            assert [r.offset for r in await poll_until(consumer, 1)] == [0]
            await fetches_sent(broker, 2)  # while the caller is busy with record 0
            # the broker already holds a long poll from where the buffered response ends
            assert fetch_offsets(broker) == [0, 3]
            fill(log, 2)
            broker.wake_fetchers()
            assert [r.offset for r in await poll_until(consumer, 4)] == [1, 2, 3, 4]


@async_test
async def test_a_caller_that_does_not_poll_has_at_most_two_responses_buffered() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 30, per_batch=5)
        one_batch = len(log.batches[0])
        async with consumer_for(
            broker, max_poll_records=1, max_partition_fetch_bytes=one_batch
        ) as consumer:
            consumer.assign([TP])
            assert [r.offset for r in await poll_until(consumer, 1)] == [0]
            await fetches_sent(broker, 2)  # the fetch ahead
            await asyncio.sleep(0.2)
            assert fetch_offsets(broker) == [0, 5]  # then nothing until the caller drains one
            records = await poll_until(consumer, 29)
            assert [r.offset for r in records] == list(range(1, 30))


@async_test
async def test_a_seek_back_drops_the_data_fetched_ahead() -> None:
    async with FakeBroker() as broker:
        (log,) = broker.create("t")
        fill(log, 10, per_batch=5)
        one_batch = len(log.batches[0])
        async with consumer_for(
            broker, max_poll_records=2, max_partition_fetch_bytes=one_batch
        ) as consumer:
            consumer.assign([TP])
            assert [r.offset for r in await poll_until(consumer, 2)] == [0, 1]
            await fetches_sent(broker, 2)  # offsets 5..9 are fetched ahead meanwhile
            consumer.seek(TP, 1)
            records = await poll_until(consumer, 9)
            assert [r.offset for r in records] == list(range(1, 10))
            assert fetch_offsets(broker)[:2] == [0, 5]


def test_end_offset_of_a_fetch_is_after_its_last_whole_batch() -> None:
    first = build_batch([(1, None, b"a", ()), (2, None, b"b", ())])
    second = build_batch([(3, None, b"c", ())], base_offset=2)

    def fetched(records: bytes, error: int = 0) -> CompletedFetch:
        response = FetchPartitionResponse("t", 0, error, None, 3, 0, 3, records)
        return CompletedFetch(TP, 1, response, check_crcs=True)

    assert fetched(first + second).end_offset() == 3
    assert fetched(first + second[:-1]).end_offset() == 2  # the partial batch comes again
    assert fetched(b"").end_offset() == 1  # nothing new: fetch the same offset again
    assert fetched(first[:-1]).end_offset() is None  # no whole batch: a larger fetch is needed
    assert fetched(b"", error=KafkaStorageError.code).end_offset() is None


def test_sync_consumer_takes_records_while_a_producer_thread_sends() -> None:
    """Polls on the caller's thread, a few records at a time (so fetching stops with two
    responses buffered and must start again), while another thread produces one record at a
    time: every record once, in order, and a poll waiting on the fetch in flight is woken by
    the record rather than by its timeout."""
    count = 300
    with broker_in_thread() as broker:
        broker.create("t")
        with (
            Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer,
            Consumer(
                bootstrap_servers=broker.bootstrap,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=5000,
                max_poll_records=3,
            ) as consumer,
        ):
            consumer.assign([TP])

            def produce() -> None:
                for i in range(count):
                    producer.send("t", b"%d" % i, partition=0)
                    if i % 50 == 0:
                        time.sleep(0.01)
                producer.flush()

            sender = threading.Thread(target=produce)
            sender.start()
            records: list[ConsumerRecord] = []
            started = time.monotonic()
            while len(records) < count and time.monotonic() - started < 10:
                records += consumer.poll(5000)
            sender.join()
            assert [r.offset for r in records] == list(range(count))
            assert values(records) == [b"%d" % i for i in range(count)]
            producer.send("t", b"late", partition=0)
            started = time.monotonic()
            assert values(consumer.poll(5000)) == [b"late"]
            assert time.monotonic() - started < 2.5  # woken by the record, not the long poll


def test_sync_consumer_raises_an_error_after_good_records_on_the_next_poll() -> None:
    with broker_in_thread() as broker:
        good, bad = broker.create("t", 2)
        fill(good, 3)
        fill(bad, 3)
        bad.batches[0] = bad.batches[0][:-1] + bytes([bad.batches[0][-1] ^ 0xFF])
        with Consumer(
            bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50
        ) as consumer:
            consumer.assign([TP, TopicPartition("t", 1)])
            records: list[ConsumerRecord] = []
            with pytest.raises(CorruptRecordError):
                for _ in range(50):
                    records += consumer.poll(100)
            assert [(r.partition, r.offset) for r in records] == [(0, 0), (0, 1), (0, 2)]
            assert consumer.position(TP) == 3


def test_sync_consumer_poll_times_out_empty() -> None:
    with broker_in_thread() as broker:
        fill(broker.create("t")[0], 2)
        with Consumer(
            bootstrap_servers=broker.bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=100
        ) as consumer:
            consumer.assign([TP])
            assert consumer.poll(0) == []
            started = time.monotonic()
            assert consumer.poll(300) == []
            assert 0.25 <= time.monotonic() - started < 2
