"""Fetch payloads leave through os.sendfile, from a thread when their pages are cold."""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from log_manager_helpers import wait_until
from server_helpers import RunningBroker, batch, running_broker

from odradek.network.page_cache import is_resident
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.record.memory_records import MemoryRecords
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

SENDFILE = 'odradek_fetch_bytes_total{path="sendfile"}'
COPIED = 'odradek_fetch_bytes_total{path="copied"}'
SEGMENT_BYTES = 1024 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    with running_broker(tmp_path_factory.mktemp("zero-copy")) as running:
        with running.connect() as client:
            topics = (
                CreatableTopic("small", 1),
                CreatableTopic("large", 1, {"segment.bytes": str(SEGMENT_BYTES)}),
            )
            assert all(t.error == 0 for t in client.call(CreateTopicsRequest(topics)).topics)
            client.call(produce("small", batch(20)))
            for _ in range(128):  # 128 batches of 64 KiB: segments of 15 batches
                client.call(produce("large", batch(16, value_size=4096)))
        yield running


def produce(topic: str, records: bytes) -> ProduceRequest:
    return ProduceRequest((ProducePartitionData(topic, 0, records),), acks=Acks.LEADER)


def fetch(topic: str, max_bytes: int = 1 << 20) -> FetchRequest:
    partition = FetchPartition(topic, 0, 0, partition_max_bytes=max_bytes)
    return FetchRequest((partition,), max_wait_ms=0, max_bytes=max_bytes)


def log_of(broker: RunningBroker, topic: str) -> UnifiedLog:
    return broker.broker.log_manager.get_log(TopicPartition(topic, 0))


class SendfileSpy:
    """Wraps os.sendfile, recording each call's byte count and thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_with: int | None = None) -> None:
        self.calls: list[tuple[int, str]] = []
        self.would_block = 0
        self._real = os.sendfile
        self._fail_with = fail_with
        monkeypatch.setattr(os, "sendfile", self)

    def __call__(self, out_fd: int, in_fd: int, offset: int, count: int) -> int:
        if self._fail_with is not None:
            raise OSError(self._fail_with, os.strerror(self._fail_with))
        try:
            sent = self._real(out_fd, in_fd, offset, count)
        except BlockingIOError:
            self.would_block += 1
            raise
        self.calls.append((sent, threading.current_thread().name))
        return sent

    @property
    def bytes_sent(self) -> int:
        return sum(sent for sent, _ in self.calls)


def test_fetch_records_are_sent_with_sendfile(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = broker.metrics()
    spy = SendfileSpy(monkeypatch)
    with broker.connect() as client:
        response = client.call(fetch("small"))
    records = response.partitions[0].records
    assert [r.offset for r in MemoryRecords(records).records()] == list(range(20))
    assert len(records) > 0
    # The client may see the bytes before the broker's thread returns from sendfile.
    wait_until(lambda: spy.bytes_sent == len(records))
    wait_until(lambda: broker.metrics()[SENDFILE] - before[SENDFILE] == len(records))
    assert broker.metrics()[COPIED] == before[COPIED]


def test_records_are_copied_where_sendfile_is_unsupported(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = broker.metrics()
    SendfileSpy(monkeypatch, fail_with=errno.EINVAL)
    with broker.connect() as client:
        response = client.call(fetch("small"))
        assert client.call(ApiVersionsRequest()).broker_id == 0
    records = response.partitions[0].records
    assert len(list(MemoryRecords(records).records())) == 20
    wait_until(lambda: broker.metrics()[COPIED] - before[COPIED] == len(records))
    assert broker.metrics()[SENDFILE] == before[SENDFILE]


def test_large_response_to_a_slow_reader_is_whole_and_later_ones_queue_behind_it(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = SendfileSpy(monkeypatch)
    segments = log_of(broker, "large").segments.values()[:6]  # more than a socket buffers
    request = FetchRequest(
        tuple(FetchPartition("large", 0, s.base_offset, SEGMENT_BYTES) for s in segments),
        max_wait_ms=0,
        max_bytes=len(segments) * SEGMENT_BYTES,
    )
    with broker.connect() as slow, broker.connect() as other:
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        slow.send(request, correlation_id=1)
        time.sleep(0.3)  # the socket is full and the send waits for it; others must not
        slow.send(ApiVersionsRequest(), correlation_id=2)
        started = time.perf_counter()
        assert other.call(ApiVersionsRequest()).broker_id == 0
        assert time.perf_counter() - started < 0.1
        first, second = slow.read_frame(), slow.read_frame()
    assert spy.would_block, "the socket never filled up: the test proves nothing"
    assert (first.header["id"], second.header["id"]) == (1, 2)
    expected = b"".join(s.log.read(0, s.log.size_in_bytes) for s in segments)
    assert bytes(first.payload) == expected


class ReadSpy:
    """Wraps UnifiedLog.read, recording the thread of each call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.threads: list[str] = []
        self._real = UnifiedLog.read
        monkeypatch.setattr(UnifiedLog, "read", self)

    def __get__(self, log: UnifiedLog, owner: type) -> object:
        return lambda *args, **kwargs: self._read(log, *args, **kwargs)

    def _read(self, log: UnifiedLog, *args: object, **kwargs: object) -> object:
        self.threads.append(threading.current_thread().name)
        return self._real(log, *args, **kwargs)


@pytest.mark.parametrize("segment", ["older", "active"])
def test_cold_pages_are_read_and_sent_on_a_thread(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch, segment: str
) -> None:
    topic = "large" if segment == "older" else "small"
    log = log_of(broker, topic)
    cold = log.segments.values()[0].log
    drop_page_cache(cold.path)  # (not probed here: a probe starts reading the pages back in)
    reads = ReadSpy(monkeypatch)
    spy = SendfileSpy(monkeypatch)
    with broker.connect() as client:
        response = client.call(fetch(topic))
    sent = len(response.partitions[0].records)
    assert sent > 0
    assert reads.threads and all(name.startswith("odradek-io") for name in reads.threads)
    wait_until(lambda: spy.bytes_sent == sent)
    if segment == "older":  # (a small slice is cached by the read of its batch header)
        assert all(name.startswith("odradek-io") for _, name in spy.calls)
    pin = cold.pin()
    assert is_resident(pin.fd, 0, sent)


def test_warm_tail_is_read_and_sent_from_the_event_loop(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    with broker.connect() as client:
        client.call(fetch("small"))  # warm whatever an earlier test dropped
        reads = ReadSpy(monkeypatch)
        spy = SendfileSpy(monkeypatch)
        sent = len(client.call(fetch("small")).partitions[0].records)
    wait_until(lambda: spy.bytes_sent == sent)
    assert reads.threads == ["test-broker-loop"]
    assert all(name == "test-broker-loop" for _, name in spy.calls)


def test_residency_probe(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(os.urandom(1 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        assert is_resident(fd, 0, 1 << 20)
        drop_page_cache(path)
        assert not is_resident(fd, 0, 1 << 20)
        os.pread(fd, 4096, 0)
        assert not is_resident(fd, 0, 1 << 20)  # the end is still cold
        assert is_resident(fd, 0, 0)
    finally:
        os.close(fd)


def drop_page_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
