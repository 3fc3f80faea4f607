"""Produce and fetch through a real broker: ordering, acks, group commit, long polls."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
import uvloop
from server_helpers import RunningBroker, batch, read_partition, running_broker

from odradek.client import AsyncConsumer, AsyncProducer
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.fetch import FetchRequest, FetchResponse
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.record.compression import CompressionType
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch_builder import build_batch
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition


@pytest.fixture
def broker(tmp_path: Path) -> RunningBroker:
    with running_broker(tmp_path) as running:
        yield running


def create_topic(broker: RunningBroker, topic: str, partitions: int) -> None:
    with broker.connect() as client:
        response = client.call(CreateTopicsRequest((CreatableTopic(topic, partitions),)))
        assert response.topics[0].error == 0


def produce(topic: str, partition: int, records: bytes, acks: Acks = Acks.LEADER) -> ProduceRequest:
    return ProduceRequest((ProducePartitionData(topic, partition, records),), acks=acks)


def fetch(topic: str, partition: int, offset: int, **options: object) -> FetchRequest:
    return FetchRequest((FetchPartition(topic, partition, offset),), **options)


def values(response: FetchResponse, index: int = 0) -> list[bytes]:
    return [r.value for r in MemoryRecords(response.partitions[index].records).records()]


def test_many_producers_and_consumers_read_every_acknowledged_record_once_in_order(
    broker: RunningBroker,
) -> None:
    partitions, producers, per_producer = 12, 6, 1500
    create_topic(broker, "load", partitions)
    tps = [TopicPartition("load", p) for p in range(partitions)]

    async def produce_all(number: int) -> list[tuple[int, int, bytes]]:
        acks = "all" if number % 2 else "1"
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, acks=acks) as producer:
            sends = [
                producer.send("load", b"%d:%d" % (number, seq), partition=seq % partitions)
                for seq in range(per_producer)
            ]
            results = [await send for send in sends]
        return [(m.partition, m.offset, b"%d:%d" % (number, seq)) for seq, m in enumerate(results)]

    async def consume(assigned: list[TopicPartition], expected: int) -> list:
        async with AsyncConsumer(bootstrap_servers=broker.bootstrap) as consumer:
            consumer.assign(assigned)
            consumer.seek_to_beginning(*assigned)
            records = []
            deadline = time.monotonic() + 60
            while len(records) < expected and time.monotonic() < deadline:
                records += await consumer.poll(500)
            return records

    async def run() -> tuple[list, list]:
        share = producers * per_producer // 3
        consumers = [consume(tps[i::3], share) for i in range(3)]
        results = await asyncio.gather(*consumers, *map(produce_all, range(producers)))
        return [r for c in results[:3] for r in c], [a for p in results[3:] for a in p]

    consumed, acknowledged = uvloop.run(run())
    assert len(acknowledged) == producers * per_producer
    by_position = {(r.partition, r.offset): r.value for r in consumed}
    assert len(by_position) == len(consumed), "a record was delivered twice"
    assert by_position == {(p, o): v for p, o, v in acknowledged}
    per_partition: dict[int, list] = defaultdict(list)
    for record in consumed:
        per_partition[record.partition].append(record)
    for records in per_partition.values():
        assert [r.offset for r in records] == list(range(len(records)))
        last_seq: dict[bytes, int] = {}
        for record in records:
            producer, seq = record.value.split(b":")
            assert int(seq) > last_seq.get(producer, -1), "a producer's records out of order"
            last_seq[producer] = int(seq)


def test_pipelined_produce_requests_to_a_partition_are_applied_in_order(
    broker: RunningBroker,
) -> None:
    """Large appends go to a thread, small ones run on the loop: order holds across both."""
    create_topic(broker, "ordered", 2)
    sent = [b"%d:" % n + b"x" * (100_000 if n % 3 == 0 else 10) for n in range(120)]
    with broker.connect() as client:
        ids = []
        for n, value in enumerate(sent):
            data = [ProducePartitionData("ordered", p, batch(1, values=[value])) for p in (0, 1)]
            ids.append(client.send(ProduceRequest(tuple(data[:: 1 if n % 2 else -1]))))
        offsets = {}
        for _ in ids:
            header, response = client.read_response(produce("ordered", 0, b""))
            offsets[header.correlation_id] = sorted(p.base_offset for p in response.partitions)
        assert [offsets[i] for i in ids] == [[n, n] for n in range(120)]
        for partition in (0, 1):
            read: list[bytes] = []
            while len(read) < len(sent):
                request = fetch("ordered", partition, len(read), max_wait_ms=0, max_bytes=1 << 22)
                read += values(client.call(request))
            assert read == sent


def test_acks_none_gets_no_response_but_is_appended(broker: RunningBroker) -> None:
    create_topic(broker, "fire", 1)
    with broker.connect() as client:
        client.send(produce("fire", 0, batch(2), acks=Acks.NONE), correlation_id=1)
        client.send(ApiVersionsRequest(), correlation_id=2)
        header, _ = client.read_response(ApiVersionsRequest())
        assert header.correlation_id == 2
        response = client.call(fetch("fire", 0, 0, max_wait_ms=0))
        assert len(values(response)) == 2
        assert response.partitions[0].high_watermark == 2


def test_acks_all_answers_after_fsync_and_producers_share_fsyncs(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(broker, "durable", 1)
    flushes = []
    original_flush = UnifiedLog.flush

    def slow_flush(self: UnifiedLog, offset: int | None = None) -> None:
        time.sleep(0.02)
        flushes.append(offset)
        original_flush(self, offset)

    monkeypatch.setattr(UnifiedLog, "flush", slow_flush)
    log = broker.broker.log_manager.get_log(TopicPartition("durable", 0))
    connections, rounds = 20, 5

    def producer_thread(failures: list) -> None:
        with broker.connect() as client:
            for _ in range(rounds):
                response = client.call(produce("durable", 0, batch(2), acks=Acks.ALL))
                offset = response.partitions[0].base_offset
                if log.recovery_point <= offset + 1:
                    failures.append(f"answered before offset {offset + 1} was fsync'ed")

    failures: list[str] = []
    threads = [
        threading.Thread(target=producer_thread, args=(failures,)) for _ in range(connections)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert log.log_end_offset == connections * rounds * 2
    assert len(flushes) < connections * rounds / 3, f"{len(flushes)} fsyncs for 100 requests"


def test_acks_all_records_become_visible_to_consumers_once_fsynced(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(broker, "gated", 1)
    release = threading.Event()
    original_flush = UnifiedLog.flush

    def gated_flush(self: UnifiedLog, offset: int | None = None) -> None:
        assert release.wait(10)
        original_flush(self, offset)

    monkeypatch.setattr(UnifiedLog, "flush", gated_flush)
    with broker.connect() as producer, broker.connect() as consumer:
        producer.send(produce("gated", 0, batch(3), acks=Acks.ALL))
        time.sleep(0.1)
        committed = consumer.call(fetch("gated", 0, 0, max_wait_ms=0))
        assert values(committed) == [] and committed.partitions[0].high_watermark == 0
        log_end = fetch("gated", 0, 0, max_wait_ms=0, isolation=IsolationLevel.LOG_END)
        assert len(values(consumer.call(log_end))) == 3
        waiting = consumer.send(fetch("gated", 0, 0, max_wait_ms=5000))
        release.set()
        header, response = producer.read_response(produce("gated", 0, b""))
        assert response.partitions[0].error == 0
        header, response = consumer.read_response(fetch("gated", 0, 0))
        assert header.correlation_id == waiting
        assert len(values(response)) == 3 and response.partitions[0].high_watermark == 3


def test_long_poll_is_woken_by_an_append(broker: RunningBroker) -> None:
    create_topic(broker, "poll", 1)
    with broker.connect() as consumer, broker.connect() as producer:
        consumer.send(fetch("poll", 0, 0, max_wait_ms=10_000))
        time.sleep(0.2)
        producer.call(produce("poll", 0, batch(1, values=[b"wake"])))
        appended = time.perf_counter()
        _, response = consumer.read_response(fetch("poll", 0, 0))
        latency = time.perf_counter() - appended
    assert values(response) == [b"wake"]
    assert latency < 0.05, f"long poll woke {latency * 1000:.1f} ms after the append"


def test_long_poll_without_data_returns_at_max_wait(broker: RunningBroker) -> None:
    create_topic(broker, "quiet", 1)
    with broker.connect() as client:
        started = time.perf_counter()
        response = client.call(fetch("quiet", 0, 0, max_wait_ms=300))
        waited = time.perf_counter() - started
    assert values(response) == [] and response.partitions[0].error == 0
    assert 0.29 <= waited < 1.0


def test_fetch_waits_for_min_bytes(broker: RunningBroker) -> None:
    create_topic(broker, "bulk", 2)
    one_batch = batch(1, value_size=1000)
    with broker.connect() as consumer, broker.connect() as producer:
        request = FetchRequest(
            (FetchPartition("bulk", 0, 0), FetchPartition("bulk", 1, 0)),
            max_wait_ms=10_000,
            min_bytes=4 * len(one_batch),
        )
        consumer.send(request)
        for number in range(4):
            consumer.sock.settimeout(0.1)
            with pytest.raises(TimeoutError):
                consumer.read_frame()  # not enough yet
            producer.call(produce("bulk", number % 2, one_batch))
        consumer.sock.settimeout(5)
        _, response = consumer.read_response(request)
    assert [len(values(response, i)) for i in (0, 1)] == [2, 2]


def test_first_partition_gets_a_whole_batch_even_over_the_size_limits(
    broker: RunningBroker,
) -> None:
    create_topic(broker, "big", 2)
    large = batch(1, value_size=10_000)
    with broker.connect() as client:
        client.call(produce("big", 0, large))
        client.call(produce("big", 1, large))
        request = FetchRequest(
            (FetchPartition("big", 0, 0, 100), FetchPartition("big", 1, 0, 100)),
            max_wait_ms=0,
            max_bytes=5000,
        )
        response = client.call(request)
    assert len(response.partitions[0].records) == len(large)
    assert len(response.partitions[1].records) == 0


def test_fetch_out_of_range_names_the_valid_range(broker: RunningBroker) -> None:
    create_topic(broker, "range", 1)
    with broker.connect() as client:
        client.call(produce("range", 0, batch(5)))
        response = client.call(fetch("range", 0, 9, max_wait_ms=0))
    (answer,) = response.partitions
    assert answer.error == 1
    assert answer.message == "offset 9 of range-0 is out of range [0, 5]"
    assert (answer.log_start_offset, answer.high_watermark) == (0, 5)  # no English to parse


def test_a_waiting_fetch_does_not_hold_up_later_requests_on_its_connection(
    broker: RunningBroker,
) -> None:
    create_topic(broker, "mixed", 2)
    with broker.connect() as client:
        waiting = client.send(fetch("mixed", 1, 0, max_wait_ms=1000))
        started = time.perf_counter()
        produced = client.send(produce("mixed", 0, batch(1)))
        first, _ = client.read_response(produce("mixed", 0, b""))
        answered = time.perf_counter() - started
        second, _ = client.read_response(fetch("mixed", 1, 0))
    assert (first.correlation_id, second.correlation_id) == (produced, waiting)
    assert answered < 0.5


def test_compacted_topic_is_cleaned_by_the_broker(tmp_path: Path) -> None:
    with running_broker(tmp_path, {"log.cleaner.backoff.ms": "50"}) as broker:
        with broker.connect() as client:
            configs = {
                "cleanup.policy": "compact",
                "segment.bytes": str(1024 * 1024),  # the smallest allowed: 40 KB records
                "min.cleanable.dirty.ratio": "0.01",
            }
            client.call(CreateTopicsRequest((CreatableTopic("compacted", 1, configs),)))
            for n in range(60):
                key, value = b"k%d" % (n % 3), (b"%d" % n).ljust(40_000, b".")
                records = build_batch([(int(time.time() * 1000), key, value, ())])
                assert client.call(produce("compacted", 0, records)).partitions[0].error == 0
            deadline = time.monotonic() + 30
            while len(kept := read_partition(client, "compacted", 0)) == 60:
                assert time.monotonic() < deadline, "the cleaner never compacted the topic"
                time.sleep(0.05)
    values = {value.rstrip(b".") for value in kept.values()}
    assert values >= {b"57", b"58", b"59"}  # the latest value of each key
    assert not {b"0", b"1", b"2"} & values  # the oldest ones are gone


def test_large_append_completes_and_commits_when_its_client_vanishes(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(broker, "abandoned", 1)
    original_append = UnifiedLog.append

    def slow_append(
        self: UnifiedLog, records: bytes, leader_epoch: int = 0, **kwargs: bool
    ) -> object:
        time.sleep(0.2)  # still writing when the client goes
        return original_append(self, records, leader_epoch, **kwargs)

    monkeypatch.setattr(UnifiedLog, "append", slow_append)
    large = batch(1, value_size=100_000)  # appended on a thread
    with broker.connect() as client:
        client.send(produce("abandoned", 0, large))
        time.sleep(0.05)
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    monkeypatch.setattr(UnifiedLog, "append", original_append)
    deadline = time.monotonic() + 60  # the append thread finishes in 0.2 s on a quiet machine
    with broker.connect() as client:
        while True:
            response = client.call(fetch("abandoned", 0, 0, max_wait_ms=0))
            if response.partitions[0].high_watermark == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
    assert response.partitions[0].high_watermark == 1
    assert len(values(response)) == 1


def test_batches_expanding_far_are_validated_on_an_append_thread_that_yields_to_the_loop(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(broker, "zipped", 1)
    original_append = UnifiedLog.append
    appended_on: list[tuple[str, int]] = []

    def recorded_append(
        self: UnifiedLog, records: bytes, leader_epoch: int = 0, **kwargs: bool
    ) -> object:
        niceness = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        appended_on.append((threading.current_thread().name, niceness))
        return original_append(self, records, leader_epoch, **kwargs)

    monkeypatch.setattr(UnifiedLog, "append", recorded_append)
    now = int(time.time() * 1000)
    expanding = build_batch([(now, b"k", bytes(100_000), ())] * 3, compression=CompressionType.GZIP)
    small_zipped = build_batch([(now, b"k", b"v" * 100, ())] * 3, compression=CompressionType.LZ4)
    assert len(expanding) < 2000  # small on the wire, 300 KB to validate
    with broker.connect() as client:
        for records in (expanding, small_zipped, batch(3)):
            assert client.call(produce("zipped", 0, records)).partitions[0].error == 0
    (expanding_thread, expanding_niceness), *others = appended_on
    assert expanding_thread.startswith("odradek-append") and expanding_niceness == 10
    assert not any(thread.startswith("odradek-append") for thread, _ in others)  # on the loop
