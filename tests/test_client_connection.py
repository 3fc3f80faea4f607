"""Connection and NetworkClient: handshake, pipelining, timeouts and disconnects."""

from __future__ import annotations

import asyncio
import socket

import pytest
from fake_broker import FakeBroker, async_test

from odradek.client.config import ClientConfig
from odradek.client.connection import Connection
from odradek.client.network_client import NetworkClient, reconnect_backoff_ms
from odradek.errors import (
    InvalidConfigError,
    InvalidRequestError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.delete_records import DeleteRecordsRequest
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import ProducePartitionData
from odradek.record.record_batch_builder import build_batch


def connection_to(broker: FakeBroker, timeout_ms: int = 2000) -> Connection:
    return Connection("127.0.0.1", broker.port, client_id="tests", request_timeout_ms=timeout_ms)


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@async_test
async def test_handshake_learns_the_brokers_versions_and_identity() -> None:
    async with FakeBroker() as broker:
        connection = connection_to(broker)
        versions = await connection.connect()
        assert versions.cluster_id == "fake-cluster"
        assert {v.api_key for v in versions.api_versions} == set(ApiKey)
        header, request = broker.requests[0]
        assert header.api_key == ApiKey.API_VERSIONS and header.client_id == "tests"
        assert request.client_software_name == "odradek-python"
        await connection.close()


@async_test
async def test_pipelined_responses_are_matched_by_correlation_id() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        connection = connection_to(broker)
        await connection.connect()
        waiting_fetch = asyncio.ensure_future(
            connection.send(FetchRequest((FetchPartition("t", 0, 0),), max_wait_ms=5000))
        )
        await asyncio.sleep(0.05)
        batch = build_batch([(1, None, b"v", ())])
        produced = await connection.send(ProduceRequest((ProducePartitionData("t", 0, batch),)))
        assert produced.partitions[0].base_offset == 0
        fetched = await waiting_fetch  # answered after the produce it waited for
        assert fetched.partitions[0].high_watermark == 1
        await connection.close()


@async_test
async def test_request_level_error_is_raised_and_the_connection_stays_open() -> None:
    async with FakeBroker() as broker:
        broker.inject(ApiKey.METADATA, "reject", InvalidRequestError.code)
        connection = connection_to(broker)
        await connection.connect()
        with pytest.raises(InvalidRequestError, match="injected"):
            await connection.send(MetadataRequest())
        assert (await connection.send(MetadataRequest())).cluster_id == "fake-cluster"
        await connection.close()


@async_test
async def test_api_the_broker_does_not_serve_is_refused_before_sending() -> None:
    async with FakeBroker() as broker:
        broker.api_versions = tuple(
            v for v in broker.api_versions if v.api_key != ApiKey.DELETE_RECORDS
        )
        connection = connection_to(broker)
        await connection.connect()
        with pytest.raises(UnsupportedVersionError, match="does not support DeleteRecords"):
            await connection.send(DeleteRecordsRequest(()))
        assert len(broker.requests) == 1  # only the handshake went out
        await connection.close()


@async_test
async def test_failed_handshake_closes_the_connection() -> None:
    async with FakeBroker() as broker:
        broker.inject(ApiKey.API_VERSIONS, "reject", UnsupportedVersionError.code)
        connection = connection_to(broker)
        with pytest.raises(UnsupportedVersionError):
            await connection.connect()
        assert connection.closed


@async_test
async def test_timeout_raises_and_closes_failing_the_other_requests() -> None:
    async with FakeBroker() as broker:
        broker.inject(ApiKey.METADATA, "silence", times=2)
        connection = connection_to(broker, timeout_ms=200)
        await connection.connect()
        slow = asyncio.ensure_future(connection.send(MetadataRequest(), timeout_ms=5000))
        with pytest.raises(RequestTimedOutError, match="no response to Metadata request"):
            await connection.send(MetadataRequest())
        with pytest.raises(NetworkError, match="connection closed: no response"):
            await slow
        assert connection.closed
        with pytest.raises(NetworkError):
            await connection.send(MetadataRequest())


@async_test
async def test_disconnect_fails_every_pending_request() -> None:
    async with FakeBroker() as broker:
        broker.inject(ApiKey.METADATA, "silence", times=3)
        connection = connection_to(broker)
        await connection.connect()
        pending = [asyncio.ensure_future(connection.send(MetadataRequest())) for _ in range(3)]
        await asyncio.sleep(0.05)
        for transport in broker.connections:
            transport.abort()
        for future in pending:
            with pytest.raises(NetworkError, match="lost"):
                await future
        assert connection.closed


@async_test
async def test_unreadable_response_stream_fails_pending_requests() -> None:
    async def garbage_server(reader, writer):
        await reader.read(100)
        writer.write(b"\xff\xff\xff\xff garbage")

    server = await asyncio.start_server(garbage_server, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connection = Connection("127.0.0.1", port, client_id=None, request_timeout_ms=2000)
    with pytest.raises(NetworkError, match="unreadable response stream"):
        await connection.connect()
    assert connection.closed
    server.close()


@async_test
async def test_refused_connection_is_a_network_error() -> None:
    connection = Connection("127.0.0.1", unused_port(), client_id=None, request_timeout_ms=2000)
    with pytest.raises(NetworkError, match="cannot connect"):
        await connection.connect()


@async_test
async def test_network_client_tries_each_bootstrap_server_and_reconnects() -> None:
    async with FakeBroker() as broker:
        servers = f"127.0.0.1:{unused_port()},{broker.bootstrap}"
        client = NetworkClient(ClientConfig(bootstrap_servers=servers, reconnect_backoff_ms=10))
        assert (await client.send(MetadataRequest())).cluster_id == "fake-cluster"
        first = await client.connection()
        broker.inject(ApiKey.METADATA, "drop")
        with pytest.raises(NetworkError):
            await client.send(MetadataRequest())
        assert (await client.send(MetadataRequest())).cluster_id == "fake-cluster"
        assert await client.connection() is not first
        await client.close()


@async_test
async def test_network_client_with_no_reachable_broker() -> None:
    client = NetworkClient(ClientConfig(bootstrap_servers=f"127.0.0.1:{unused_port()}"))
    with pytest.raises(NetworkError, match="no bootstrap server is reachable"):
        await client.send(MetadataRequest())


@pytest.mark.parametrize("servers", ["", "localhost", "host:port", ":9092", "h:0", "h:70000"])
def test_bad_bootstrap_servers_are_refused(servers: str) -> None:
    with pytest.raises(InvalidConfigError):
        ClientConfig(bootstrap_servers=servers)


def test_bootstrap_servers_forms() -> None:
    config = ClientConfig(bootstrap_servers="a:1, b:2")
    assert config.broker_addresses() == [("a", 1), ("b", 2)]
    assert ClientConfig(bootstrap_servers=("[::1]:9",)).broker_addresses() == [("::1", 9)]


@async_test
async def test_try_start_writes_now_and_refuses_when_the_connection_cannot_take_it() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        connection = connection_to(broker)
        await connection.connect()
        in_flight = connection.try_start(MetadataRequest(("t",)))
        assert in_flight is not None
        response = await connection.response(in_flight)
        assert [topic.name for topic in response.topics] == ["t"]
        connection.pause_writing()  # the transport's buffer is full: send() would wait
        assert connection.try_start(MetadataRequest(("t",))) is None
        connection.resume_writing()
        await connection.close()
        assert connection.try_start(MetadataRequest(("t",))) is None
        assert len(broker.requests_of(ApiKey.METADATA)) == 1


@async_test
async def test_a_request_started_at_once_still_times_out_and_closes_the_connection() -> None:
    async with FakeBroker() as broker:
        broker.create("t")
        broker.inject(ApiKey.METADATA, "silence")
        connection = connection_to(broker, timeout_ms=100)
        await connection.connect()
        in_flight = connection.try_start(MetadataRequest(("t",)))
        with pytest.raises(RequestTimedOutError):
            await connection.response(in_flight)
        assert connection.closed


def test_reconnect_backoff_doubles_from_reconnect_backoff_ms_to_its_max_with_jitter() -> None:
    """Kafka's ExponentialBackoff(reconnect.backoff.ms, 2, reconnect.backoff.max.ms, 0.2)."""
    for failures, middle in [(1, 50), (2, 100), (3, 200), (4, 400), (5, 800)]:
        waits = [reconnect_backoff_ms(failures, 50, 1000) for _ in range(200)]
        assert middle * 0.8 <= min(waits) < max(waits) <= middle * 1.2, (failures, waits)
    for failures in (6, 7, 30, 1000):
        waits = [reconnect_backoff_ms(failures, 50, 1000) for _ in range(200)]
        assert 800 <= min(waits) and max(waits) == 1000, (failures, waits)  # capped, not above
    assert reconnect_backoff_ms(3, 0, 1000) == 0
    assert 400 <= reconnect_backoff_ms(3, 500, 100) <= 500  # a max below the start: no growth
