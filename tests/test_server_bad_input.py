"""Bad input over raw sockets: each gets its error (or the connection is closed when the stream
cannot be framed), is logged once with the peer address, and the broker serves on."""

from __future__ import annotations

import logging
import struct

import pytest
from server_helpers import RunningBroker, batch, running_broker

from odradek.errors import (
    CorruptRecordError,
    InvalidRequestError,
    InvalidTopicError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import Acks, ProducePartitionData

MAX_REQUEST_BYTES = 65536


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    root = tmp_path_factory.mktemp("bad-input")
    with running_broker(root, {"socket.request.max.bytes": str(MAX_REQUEST_BYTES)}) as running:
        with running.connect() as client:
            client.call(CreateTopicsRequest((CreatableTopic("orders", 2),)))
        yield running


def assert_still_serving(broker: RunningBroker) -> None:
    with broker.connect() as client:
        assert client.call(ApiVersionsRequest()).broker_id == 0


def produce(topic: str, partition: int, records: bytes) -> ProduceRequest:
    return ProduceRequest((ProducePartitionData(topic, partition, records),), acks=Acks.LEADER)


def segment_bytes(broker: RunningBroker, topic: str, partition: int) -> int:
    return sum(f.stat().st_size for f in (broker.data_dir / f"{topic}-{partition}").glob("*.log"))


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff" * 64,  # a frame size far over the limit
        b"\x00\x00\x00\x00",  # a frame too small to hold its header size
        struct.pack(">II", 12, 8) + b"\xc1" * 8,  # a header that is not msgpack
        struct.pack(">II", 6, 2) + b"\x92\x01",  # a header that is no map
    ],
)
def test_garbage_closes_that_connection_only(broker: RunningBroker, garbage: bytes) -> None:
    with broker.connect() as client:
        client.sock.sendall(garbage)
        assert client.is_closed_by_peer()
    assert_still_serving(broker)


def test_frame_over_the_limit_is_refused_from_its_length_prefix(broker: RunningBroker) -> None:
    with broker.connect() as client:
        client.sock.sendall(struct.pack(">I", MAX_REQUEST_BYTES + 1))
        assert client.is_closed_by_peer(), "the broker waited for the body of an oversized frame"
    with broker.connect() as client:  # exactly at the limit is fine (and is a bad request)
        client.sock.sendall(struct.pack(">II", MAX_REQUEST_BYTES, MAX_REQUEST_BYTES - 4))
        client.sock.sendall(b"\x80" + b"\x00" * (MAX_REQUEST_BYTES - 5))
        assert client.is_closed_by_peer()  # an empty map header: no correlation id to answer
    assert_still_serving(broker)


def test_truncated_frame_does_not_disturb_others(broker: RunningBroker) -> None:
    with broker.connect() as client:
        client.sock.sendall(struct.pack(">II", 1000, 10) + b"\x83")
        with broker.connect() as other:
            assert other.call(ApiVersionsRequest()).broker_id == 0
        client.sock.shutdown(2)
    assert_still_serving(broker)


def test_unknown_api_key_gets_an_error_and_the_connection_stays(broker: RunningBroker) -> None:
    with broker.connect() as client:
        client.send_frame({"api": 99, "v": 0, "id": 7})
        header, _ = client.read_response(ApiVersionsRequest())
        assert (header.correlation_id, header.error) == (7, UnsupportedVersionError.code)
        assert "unknown API key 99" in header.message
        assert client.call(ApiVersionsRequest()).broker_id == 0


def test_unknown_version_names_the_supported_range(broker: RunningBroker) -> None:
    with broker.connect() as client:
        client.send_frame({"api": 0, "v": 5, "id": 8})
        header, _ = client.read_response(ApiVersionsRequest())
        assert (header.correlation_id, header.error) == (8, UnsupportedVersionError.code)
        assert "v0..v0" in header.message


def test_wrong_type_in_the_header_closes_the_connection(broker: RunningBroker) -> None:
    with broker.connect() as client:
        client.send_frame({"api": "produce", "v": 0, "id": 1})
        assert client.is_closed_by_peer()
    assert_still_serving(broker)


def test_wrong_type_in_the_body_is_an_invalid_request(broker: RunningBroker) -> None:
    with broker.connect() as client:
        client.send_frame({"api": 1, "v": 0, "id": 3, "partitions": "all of them"})
        header, _ = client.read_response(FetchRequest(()))
        assert (header.correlation_id, header.error) == (3, InvalidRequestError.code)
        assert "partitions must be an array" in header.message
        client.send_frame(
            {
                "api": 0,
                "v": 0,
                "id": 4,
                "partitions": [{"topic": "orders", "partition": 0, "size": 500}],
            },
            b"short",
        )
        header, _ = client.read_response(FetchRequest(()))
        assert (header.correlation_id, header.error) == (4, InvalidRequestError.code)
        assert client.call(ApiVersionsRequest()).broker_id == 0


def test_corrupt_batch_is_rejected_and_nothing_reaches_a_segment(broker: RunningBroker) -> None:
    good = batch(3)
    corrupt = bytearray(batch(3))
    corrupt[-1] ^= 0xFF
    before = segment_bytes(broker, "orders", 1)
    with broker.connect() as client:
        response = client.call(produce("orders", 1, good + bytes(corrupt)))
        assert response.partitions[0].error == CorruptRecordError.code
        assert "CRC" in response.partitions[0].message
        assert segment_bytes(broker, "orders", 1) == before
        response = client.call(produce("orders", 1, good))
        assert response.partitions[0].error == 0
    assert segment_bytes(broker, "orders", 1) == before + len(good)


def test_unknown_topic_or_partition(broker: RunningBroker) -> None:
    with broker.connect() as client:
        for topic, partition in (("no-such-topic", 0), ("orders", 7)):
            response = client.call(produce(topic, partition, batch(1)))
            assert response.partitions[0].error == UnknownTopicOrPartitionError.code
            fetch = FetchRequest((FetchPartition(topic, partition, 0),), max_wait_ms=0)
            assert client.call(fetch).partitions[0].error == UnknownTopicOrPartitionError.code
    assert not (broker.data_dir / "no-such-topic-0").exists()


@pytest.mark.parametrize("topic", ["../escape", "a/b", "..", ".", "x" * 250, "bad\nname"])
def test_illegal_topic_names_are_refused(broker: RunningBroker, topic: str) -> None:
    with broker.connect() as client:
        response = client.call(produce(topic, 0, batch(1)))
        assert response.partitions[0].error == InvalidTopicError.code
        response = client.call(MetadataRequest((topic,)))
        assert response.topics[0].error == InvalidTopicError.code
        response = client.call(CreateTopicsRequest((CreatableTopic(topic, 1),)))
        assert response.topics[0].error == InvalidTopicError.code
    root = broker.data_dir.parent
    assert sorted(p.name for p in root.iterdir()) == ["data"]
    assert not any("escape" in p.name or "/" in p.name for p in broker.data_dir.iterdir())


def test_each_rejection_is_logged_once_with_the_peer_address(
    broker: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="odradek")
    with broker.connect() as client:
        peer = "{}:{}".format(*client.sock.getsockname())
        client.send_frame({"api": 0, "v": 9, "id": 1})
        client.read_response(ApiVersionsRequest())
        client.call(produce("orders", 0, b"\x00" * 70))
    with broker.connect() as garbage:
        garbage_peer = "{}:{}".format(*garbage.sock.getsockname())
        garbage.sock.sendall(b"\xff" * 8)
        assert garbage.is_closed_by_peer()
    messages = [record.getMessage() for record in caplog.records]
    assert len([m for m in messages if peer in m]) == 2, messages
    assert len([m for m in messages if garbage_peer in m]) == 1, messages
    assert any("orders-0" in m and "produce" in m for m in messages)


def test_pipelined_requests_are_all_answered_by_correlation_id(broker: RunningBroker) -> None:
    with broker.connect() as client:
        ids = [client.send(ApiVersionsRequest(), correlation_id=1000 + n) for n in range(50)]
        answered = {client.read_response(ApiVersionsRequest())[0].correlation_id for _ in ids}
        assert answered == set(ids)
