"""AsyncProducer and Producer against the fake broker: batching, compression, retries, order."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
import time

import pytest
from fake_broker import FakeBroker, async_test, broker_in_thread

from odradek.client.partitioner import partition_for_key
from odradek.client.produce_request_result import ProduceRequestResult
from odradek.client.producer import AsyncProducer, Producer
from odradek.client.record_metadata import FutureRecordMetadata, RecordMetadata
from odradek.errors import (
    InvalidConfigError,
    InvalidRecordError,
    KafkaStorageError,
    MessageTooLargeError,
    NetworkError,
    OutOfOrderSequenceNumberError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
)
from odradek.protocol.api_keys import ApiKey
from odradek.record.compression import CompressionType
from odradek.record.record_batch import RecordBatch


def stored_values(broker: FakeBroker, topic: str, partition: int = 0) -> list[bytes]:
    log = broker.topics[topic][partition]
    return [r.value for batch in log.batches for r in RecordBatch(batch).records()]


def stored_batch_sizes(broker: FakeBroker, topic: str, partition: int = 0) -> list[int]:
    return [RecordBatch(batch).records_count for batch in broker.topics[topic][partition].batches]


@async_test
async def test_send_returns_where_the_records_landed() -> None:
    async with FakeBroker() as broker:
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
            first = producer.send("t", b"a", key=b"k", headers=[("h", b"1")], timestamp_ms=1000)
            second = producer.send("t", b"b", timestamp_ms=2000)
            assert await first == RecordMetadata("t", 0, 0, 1000)
            assert await second == RecordMetadata("t", 0, 1, 2000)
        record = next(RecordBatch(broker.topics["t"][0].batches[0]).records())
        assert (record.key, record.value, record.headers) == (b"k", b"a", (("h", b"1"),))


@async_test
async def test_a_full_batch_goes_out_without_waiting_for_linger() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        producer = AsyncProducer(
            bootstrap_servers=broker.bootstrap, linger_ms=60000, batch_size=400
        )
        futures = [producer.send("t", bytes([i]) * 50) for i in range(20)]
        await asyncio.wait_for(futures[0], 2)
        sizes = stored_batch_sizes(broker, "t")
        assert sizes and all(1 < size < 8 for size in sizes)
        assert not futures[-1].done()  # the open batch waits for linger
        await producer.flush()
        assert all(f.done() for f in futures)
        assert stored_values(broker, "t") == [bytes([i]) * 50 for i in range(20)]
        await producer.close()


@async_test
async def test_linger_holds_a_lone_record_back() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=300) as producer:
            started = time.monotonic()
            await producer.send("t", b"v")
            assert time.monotonic() - started >= 0.29


@async_test
async def test_flush_sends_at_once_despite_linger() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        producer = AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=60000)
        waiting_for_metadata = producer.send("t", b"first")
        await producer.flush()
        assert (await waiting_for_metadata).offset == 0
        in_a_batch = producer.send("t", b"second")
        started = time.monotonic()
        await producer.flush()
        assert in_a_batch.done() and time.monotonic() - started < 5
        assert stored_values(broker, "t") == [b"first", b"second"]
        await producer.close()


@pytest.mark.parametrize("codec", list(CompressionType))
@async_test
async def test_compression(codec: CompressionType) -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, compression_type=codec.label, linger_ms=0
        ) as producer:
            values = [b"x" * 100 + bytes([i]) for i in range(30)]
            for value in values:
                producer.send("t", value)
        batches = [RecordBatch(b) for b in broker.topics["t"][0].batches]
        assert {batch.compression_type for batch in batches} == {codec}
        assert stored_values(broker, "t") == values


def test_unknown_compression_type_is_refused() -> None:
    async def create() -> None:
        AsyncProducer(compression_type="brotli")

    with pytest.raises(UnsupportedCompressionTypeError):
        asyncio.run(create())


@async_test
async def test_acks_zero_gets_no_offsets() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, acks=0) as producer:
            metadata = await producer.send("t", b"v", timestamp_ms=5)
        assert metadata == RecordMetadata("t", 0, -1, 5)
        await asyncio.sleep(0.05)
        assert stored_values(broker, "t") == [b"v"]
        assert broker.requests_of(ApiKey.PRODUCE)[0].acks == 0


@async_test
async def test_retriable_errors_are_retried_after_the_backoff() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        broker.inject(ApiKey.PRODUCE, "error", KafkaStorageError.code, times=2)
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, retry_backoff_ms=100, linger_ms=0
        ) as producer:
            started = time.monotonic()
            assert (await producer.send("t", b"v")).offset == 0
            assert time.monotonic() - started >= 0.2
        assert len(broker.requests_of(ApiKey.PRODUCE)) == 3
        assert stored_values(broker, "t") == [b"v"]


@async_test
async def test_retries_zero_fails_at_the_first_error() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        broker.inject(ApiKey.PRODUCE, "error", KafkaStorageError.code)
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, retries=0) as producer:
            with pytest.raises(KafkaStorageError):
                await producer.send("t", b"v")


@async_test
async def test_non_retriable_errors_fail_the_records_at_once() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        broker.inject(ApiKey.PRODUCE, "error", MessageTooLargeError.code)
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
            with pytest.raises(MessageTooLargeError):
                await producer.send("t", b"v")
            assert (await producer.send("t", b"w")).offset == 0
        assert len(broker.requests_of(ApiKey.PRODUCE)) == 2


@async_test
async def test_records_stay_in_order_across_a_disconnect_and_retries() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        broker.inject(ApiKey.PRODUCE, "drop")
        broker.inject(ApiKey.PRODUCE, "error", KafkaStorageError.code)
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap,
            batch_size=200,
            linger_ms=1,
            retry_backoff_ms=10,
            reconnect_backoff_ms=10,
        ) as producer:
            futures = [producer.send("t", str(i).encode() * 10) for i in range(60)]
            offsets = [(await future).offset for future in futures]
        assert stored_values(broker, "t") == [str(i).encode() * 10 for i in range(60)]
        assert offsets == list(range(60))


@async_test
async def test_records_expire_after_the_delivery_timeout() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        broker.inject(ApiKey.PRODUCE, "silence", times=100)
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap,
            request_timeout_ms=100,
            delivery_timeout_ms=400,
            retry_backoff_ms=20,
            reconnect_backoff_ms=10,
            linger_ms=0,
        ) as producer:
            started = time.monotonic()
            with pytest.raises((RequestTimedOutError, NetworkError)):
                await producer.send("t", b"v")
            assert time.monotonic() - started < 1.5


@async_test
async def test_keys_choose_partitions_as_kafka_does() -> None:
    async with FakeBroker(default_partitions=4) as broker:
        async with AsyncProducer(bootstrap_servers=broker.bootstrap) as producer:
            keys = [f"key-{i}".encode() for i in range(40)]
            results = [await future for future in [producer.send("t", b"v", key=k) for k in keys]]
        assert [r.partition for r in results] == [partition_for_key(k, 4) for k in keys]


@async_test
async def test_null_keys_fill_one_partition_batch_after_another() -> None:
    async with FakeBroker(default_partitions=4) as broker:
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, batch_size=1000, linger_ms=50
        ) as producer:
            await producer.send("t", b"first")  # learn the topic
            futures = [producer.send("t", b"v" * 100) for _ in range(80)]
            partitions = [(await future).partition for future in futures]
        runs = [len(list(run)) for _, run in itertools.groupby(partitions)]
        assert len(runs) > 1
        assert runs[0] > 1 and set(runs[1:-1]) <= {runs[0]}  # a new partition per full batch


@async_test
async def test_errors_found_on_the_spot_are_raised_by_send() -> None:
    async with FakeBroker(default_partitions=2) as broker:
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, max_request_size=1000
        ) as producer:
            await producer.send("t", b"v")
            with pytest.raises(UnknownTopicOrPartitionError, match="partitions 0..1, not 2"):
                producer.send("t", b"v", partition=2)
            with pytest.raises(MessageTooLargeError, match="max_request_size"):
                producer.send("t", b"v" * 1000)
        with pytest.raises(RuntimeError, match="closed"):
            producer.send("t", b"v")


@async_test
async def test_unknown_topic_waits_max_block_ms_then_fails() -> None:
    async with FakeBroker(auto_create=False) as broker:
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, max_block_ms=300, retry_backoff_ms=20
        ) as producer:
            started = time.monotonic()
            with pytest.raises(RequestTimedOutError, match="max_block_ms=300"):
                await producer.send("missing", b"v")
            assert 0.29 <= time.monotonic() - started < 2


@async_test
async def test_records_sent_before_the_topic_is_known_keep_their_order() -> None:
    async with FakeBroker() as broker:
        async with AsyncProducer(bootstrap_servers=broker.bootstrap) as producer:
            futures = [producer.send("t", str(i).encode()) for i in range(50)]
            offsets = [(await future).offset for future in futures]
        assert offsets == list(range(50))
        assert stored_values(broker, "t") == [str(i).encode() for i in range(50)]


@async_test
async def test_full_buffer_memory_makes_sends_wait_their_turn() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, buffer_memory=1000, batch_size=300, linger_ms=5
        ) as producer:
            futures = [producer.send("t", bytes([i]) * 100) for i in range(40)]
            assert producer.try_append("t", b"x") is None  # full: later records must wait
            offsets = [(await future).offset for future in futures]
        assert offsets == list(range(40))


@async_test
async def test_full_buffer_memory_times_out_after_max_block_ms() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        broker.inject(ApiKey.PRODUCE, "silence", times=10)
        producer = AsyncProducer(
            bootstrap_servers=broker.bootstrap, buffer_memory=500, linger_ms=0, max_block_ms=200
        )
        producer.send("t", b"v" * 600)
        with pytest.raises(RequestTimedOutError, match="buffer_memory"):
            await producer.append("t", b"v")
        await producer.close(timeout=0.1)


@async_test
async def test_close_with_timeout_fails_what_was_not_sent() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        broker.inject(ApiKey.PRODUCE, "silence", times=10)
        producer = AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        future = producer.send("t", b"v")
        await producer.close(timeout=0.2)
        with pytest.raises(RequestTimedOutError, match="closed after 0.2s"):
            await future


@pytest.mark.parametrize(
    ("name", "value"),
    [("acks", "some"), ("linger_ms", -1), ("batch_size", 0), ("delivery_timeout_ms", 10)],
)
def test_bad_producer_configs(name: str, value: object) -> None:
    async def create() -> None:
        AsyncProducer(**{name: value})

    with pytest.raises(InvalidConfigError, match=name):
        asyncio.run(create())


def test_sync_producer_from_several_threads() -> None:
    results: dict[int, list[RecordMetadata]] = {}
    with broker_in_thread(default_partitions=3) as broker:
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=2) as producer:

            def produce(worker: int) -> None:
                key = str(worker).encode()
                futures = [producer.send("t", f"{worker}-{i}".encode(), key) for i in range(200)]
                results[worker] = [future.result(10) for future in futures]

            workers = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            producer.flush()
        for metadata in results.values():
            assert len({m.partition for m in metadata}) == 1
            offsets = [m.offset for m in metadata]
            assert offsets == sorted(offsets)
        assert sum(len(stored_values(broker, "t", p)) for p in range(3)) == 800


def test_sync_producer_threads_sending_without_linger_keep_each_partitions_order() -> None:
    """With linger_ms=0 nearly every send starts a batch and wakes the sender from its own
    thread; wake-ups coalesce, yet every record goes out, in order within its partition."""
    per_worker = 300
    results: dict[int, list[RecordMetadata]] = {}
    with broker_in_thread(default_partitions=2) as broker:
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
            for partition in range(2):  # the topic known: sends append on the callers' threads
                producer.send("t", b"first", partition=partition).result(5)

            def produce(worker: int) -> None:
                futures = [
                    producer.send("t", f"{worker}-{i}".encode(), partition=worker % 2)
                    for i in range(per_worker)
                ]
                results[worker] = [future.result(10) for future in futures]

            workers = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            late = producer.send("t", b"late", partition=0)  # once all is acknowledged
            assert late.result(5).offset == 2 * per_worker + 1
        for worker, metadata in results.items():
            assert {m.partition for m in metadata} == {worker % 2}
            offsets = [m.offset for m in metadata]
            assert offsets == sorted(offsets) and len(set(offsets)) == per_worker
        for partition in range(2):
            stored = stored_values(broker, "t", partition)
            assert len(stored) == 1 + 2 * per_worker + (partition == 0)
            for worker in (partition, partition + 2):
                mine = [v for v in stored if v.startswith(f"{worker}-".encode())]
                assert mine == [f"{worker}-{i}".encode() for i in range(per_worker)]


def test_record_future_offsets_follow_the_batch_base_offset() -> None:
    result = ProduceRequestResult()
    future = FutureRecordMetadata(result, "t", 2, 3, 100)
    with pytest.raises(concurrent.futures.TimeoutError):
        future.result(timeout=0.01)
    called = []
    future.add_done_callback(called.append)
    result.complete(10, -1, None)
    assert called == [future]
    assert future.result() == RecordMetadata("t", 2, 13, 100)
    assert future.exception() is None


def test_record_future_takes_the_brokers_log_append_time() -> None:
    result = ProduceRequestResult()
    result.complete(0, 999, None)
    assert FutureRecordMetadata(result, "t", 0, 1, 100).result() == RecordMetadata("t", 0, 1, 999)


def test_record_future_raises_the_batch_error_and_completes_once() -> None:
    result = ProduceRequestResult()
    future = FutureRecordMetadata(result, "t", 0, 0, 1)
    result.complete(-1, -1, KafkaStorageError("disk"))
    result.complete(5, -1, None)
    assert isinstance(future.exception(), KafkaStorageError)
    with pytest.raises(KafkaStorageError, match="disk"):
        future.result()


@async_test
async def test_the_idempotent_producer_numbers_each_partitions_batches() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        broker.inject(ApiKey.PRODUCE, "error", OutOfOrderSequenceNumberError.code)
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, batch_size=200, linger_ms=1, retry_backoff_ms=10
        ) as producer:
            assert producer.config.idempotent
            futures = [producer.send("t", str(i).encode() * 10) for i in range(60)]
            offsets = [(await future).offset for future in futures]
        assert offsets == list(range(60))  # OUT_OF_ORDER_SEQUENCE_NUMBER was retried
        batches = [RecordBatch(b) for b in broker.topics["t"][0].batches]
        assert {(b.producer_id, b.producer_epoch) for b in batches} == {(0, 0)}
        sequences = [b.base_sequence for b in batches]
        assert sequences == list(
            itertools.accumulate([0] + [b.records_count for b in batches[:-1]])
        )
        assert len(broker.requests_of(ApiKey.INIT_PRODUCER_ID)) == 1


@async_test
async def test_a_batch_failing_for_good_makes_the_producer_take_the_next_epoch() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, linger_ms=0, retry_backoff_ms=10
        ) as producer:
            await producer.send("t", b"first")
            broker.inject(ApiKey.PRODUCE, "error", InvalidRecordError.code)
            with pytest.raises(InvalidRecordError):
                await producer.send("t", b"refused")
            await producer.send("t", b"after")
        first, after = (RecordBatch(b) for b in broker.topics["t"][0].batches)
        assert (first.producer_epoch, first.base_sequence) == (0, 0)
        assert (after.producer_id, after.producer_epoch, after.base_sequence) == (0, 1, 0)
        bump = broker.requests_of(ApiKey.INIT_PRODUCER_ID)[-1]
        assert (bump.producer_id, bump.producer_epoch) == (0, 0)


def test_idempotence_follows_kafkas_defaults_and_rules() -> None:
    from odradek.client.config import ProducerConfig

    assert ProducerConfig(bootstrap_servers="b:1").idempotent
    assert not ProducerConfig(bootstrap_servers="b:1", acks=1).idempotent
    assert not ProducerConfig(bootstrap_servers="b:1", enable_idempotence=False).idempotent
    with pytest.raises(InvalidConfigError, match="acks"):
        ProducerConfig(bootstrap_servers="b:1", acks=1, enable_idempotence=True)
    with pytest.raises(InvalidConfigError, match="<= 5"):
        ProducerConfig(
            bootstrap_servers="b:1",
            enable_idempotence=True,
            max_in_flight_requests_per_connection=6,
        )


def test_retried_batches_go_back_in_sequence_order_whatever_order_they_failed_in() -> None:
    """One batch a request, up to five requests in flight: their failures may come back in
    any order, yet the partition's queue must resend them by sequence, before new batches."""
    from odradek.client.record_accumulator import RecordAccumulator
    from odradek.topic_partition import TopicPartition

    tp = TopicPartition("t", 0)
    accumulator = RecordAccumulator(
        batch_size=16, compression=CompressionType.NONE, linger_ms=0, buffer_memory=1 << 20
    )
    for i in range(4):  # each record fills its own batch
        accumulator.append(tp, 1000, None, b"v%d" % i * 8, (), 24, now_ms=0)
    sent = []
    for sequence in range(3):
        (batch,) = accumulator.drain([tp], 1 << 20, now_ms=0).values()
        batch.set_producer_state(7, 0, sequence)
        sent.append(batch)
    for batch in (sent[2], sent[0], sent[1]):
        accumulator.reenqueue(batch)
    order = [next(iter(accumulator.drain([tp], 1 << 20, now_ms=0).values())) for _ in range(4)]
    assert [batch.base_sequence for batch in order] == [0, 1, 2, None]


def test_retried_batches_keep_sequence_order_across_the_wrap_at_2_to_the_31() -> None:
    """Sequences wrap to 0 after Integer.MAX_VALUE: a batch numbered 2^31 - 2 goes before one
    numbered 0 (the next after it), whichever failed first, and before new batches."""
    from odradek.client.record_accumulator import RecordAccumulator, sequence_distance
    from odradek.topic_partition import TopicPartition

    tp = TopicPartition("t", 0)
    accumulator = RecordAccumulator(
        batch_size=16, compression=CompressionType.NONE, linger_ms=0, buffer_memory=1 << 20
    )
    for i in range(4):  # each record fills its own batch
        accumulator.append(tp, 1000, None, b"v%d" % i * 8, (), 24, now_ms=0)
    sequences = [2**31 - 2, 2**31 - 1, 0]
    sent = []
    for sequence in sequences:
        (batch,) = accumulator.drain([tp], 1 << 20, now_ms=0).values()
        batch.set_producer_state(7, 0, sequence)
        sent.append(batch)
    for failed in itertools.permutations(sent):
        for batch in failed:
            accumulator.reenqueue(batch)
        back = [next(iter(accumulator.drain([tp], 1 << 20, now_ms=0).values())) for _ in sent]
        assert [batch.base_sequence for batch in back] == sequences
    (new,) = accumulator.drain([tp], 1 << 20, now_ms=0).values()
    assert new.base_sequence is None
    assert sequence_distance(2**31 - 1, 0) == 1
    assert sequence_distance(0, 2**31 - 1) == -1
    assert sequence_distance(5, 3) == -2


@async_test
async def test_requests_waiting_for_the_transport_go_out_in_the_order_they_were_drained() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
            await producer.send("t", b"first")  # connected, producer id known
            connection = await producer._client.connection()
            connection.pause_writing()
            futures = []
            for i in range(3):
                futures.append(producer.send("t", b"%d" % i))
                await asyncio.sleep(0.02)  # drained into a request of its own, which waits
            assert len(broker.requests_of(ApiKey.PRODUCE)) == 1
            connection.resume_writing()
            assert [(await future).offset for future in futures] == [1, 2, 3]
        assert stored_values(broker, "t") == [b"first", b"0", b"1", b"2"]
        assert len(broker.requests_of(ApiKey.PRODUCE)) == 4
