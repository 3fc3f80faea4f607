"""Helpers for the tests that drive odradek with Kafka's own clients, or with Kafka frames
built by hand (KafkaSocket)."""

from __future__ import annotations

import socket
import struct
import time
from typing import Protocol

import confluent_kafka
import confluent_kafka.admin

from odradek.protocol.kafka.message_codec import decode, encode_parts, request_spec, response_spec

API_VERSIONS = 18


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    client = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    new = confluent_kafka.admin.NewTopic(name, partitions, replication_factor=1, config=configs)
    client.create_topics([new])[name].result(timeout=30)  # client must outlive its future


def led_partitions(client: object, topic: str) -> int:
    """How many of ``topic``'s partitions the broker's metadata names a leader for (0 while
    it does not know the topic); ``client`` is a confluent-kafka client."""
    metadata = client.list_topics(topic, timeout=10).topics.get(topic)
    if metadata is None or metadata.error is not None:
        return 0
    return sum(1 for partition in metadata.partitions.values() if partition.leader >= 0)


def await_leaders(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60) -> None:
    """Until the broker's metadata names a leader for each of ``topic``'s partitions: Kafka's
    broker learns of a topic from its metadata log a moment after CreateTopics is answered
    (longer on a loaded machine)."""
    client = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while (led := led_partitions(client, topic)) < partitions:
        assert time.monotonic() < deadline, f"{topic}: {led} of {partitions} partitions led"
        time.sleep(0.1)


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


class HasBootstrap(Protocol):
    @property
    def bootstrap(self) -> str: ...


class KafkaSocket:
    """A blocking socket speaking Kafka frames built by hand (or by kafka-python's classes),
    to ``target``: a ``host:port``, or a broker fixture (its ``bootstrap``)."""

    def __init__(self, target: str | HasBootstrap, timeout: float = 10.0) -> None:
        address = target if isinstance(target, str) else target.bootstrap
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> int:
        """A request with header v1 (v2 when ``flexible``), client id "test"; its
        correlation id."""
        self.correlation_id += 1
        header = struct.pack(">hhih", api_key, version, self.correlation_id, 4) + b"test"
        if flexible:
            header += b"\x00"
        frame = header + body
        self.send_raw(struct.pack(">i", len(frame)) + frame)
        return self.correlation_id

    def send_message(self, message: object, version: int) -> int:
        """A request of kafka-python's protocol classes."""
        cls = type(message)
        flexible = cls.flexible_version_q(version)
        return self.send(cls.API_KEY, version, message.encode(version), flexible)

    def read_frame(self) -> bytes:
        """The next response, without its size prefix."""
        size = struct.unpack(">i", read_exactly(self.sock, 4))[0]
        return read_exactly(self.sock, size)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def kafka_call(target: str | HasBootstrap, api_key: int, version: int, body: dict) -> dict:
    """One request encoded and its response decoded by odradek's codec (Kafka's schemas), on
    a connection of its own: what any broker, Kafka's too, answers."""
    kafka = KafkaSocket(target)
    try:
        spec = request_spec(api_key, version)
        kafka.send(api_key, version, b"".join(map(bytes, encode_parts(spec, body))), spec.flexible)
        frame = kafka.read_frame()
    finally:
        kafka.close()
    response = response_spec(api_key, version)
    header = 4 + (1 if response.flexible and api_key != API_VERSIONS else 0)
    return decode(response, memoryview(frame), header)


def read_exactly(sock: socket.socket, count: int) -> bytes:
    """``count`` bytes from ``sock``; ConnectionError if the broker closes it first."""
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def fetch_v12(
    topic: str,
    offset: int,
    *,
    max_wait_ms: int,
    partition_max_bytes: int,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
) -> object:
    """kafka-python's Fetch v12 for partition 0 of ``topic`` from ``offset``, sessionless."""
    from kafka.protocol.consumer import FetchRequest

    return FetchRequest[12](
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
