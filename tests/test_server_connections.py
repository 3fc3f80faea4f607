"""Connection limits, idleness, backpressure and graceful shutdown."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest
from log_manager_helpers import wait_until
from server_helpers import RawClient, batch, running_broker

from odradek.client.event_loop_thread import EventLoopThread
from odradek.config.broker_config_loader import load_broker_config
from odradek.network.connection import MAX_IN_FLIGHT_REQUESTS
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.frame import encode_frame
from odradek.protocol.header import RequestHeader
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.server.broker import Broker
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE_NAME


def produce(topic: str, records: bytes, acks: Acks = Acks.LEADER) -> ProduceRequest:
    return ProduceRequest((ProducePartitionData(topic, 0, records),), acks=acks)


def create_topic(client: RawClient, topic: str) -> None:
    assert client.call(CreateTopicsRequest((CreatableTopic(topic, 1),))).topics[0].error == 0


def test_connections_over_max_connections_are_closed_at_accept(tmp_path: Path) -> None:
    with running_broker(tmp_path, {"max.connections": "3"}) as broker:
        clients = [broker.connect() for _ in range(3)]
        for client in clients:
            client.call(ApiVersionsRequest())
        with broker.connect() as refused:
            assert refused.is_closed_by_peer()
        assert broker.metrics()["odradek_rejected_connections_total"] == 1
        assert broker.metrics()["odradek_open_connections"] == 3
        clients.pop().close()
        wait_until(lambda: broker.metrics()["odradek_open_connections"] == 2)
        with broker.connect() as accepted:
            assert accepted.call(ApiVersionsRequest()).broker_id == 0
        for client in clients:
            client.close()


def test_idle_connections_are_closed_busy_ones_are_not(tmp_path: Path) -> None:
    with running_broker(tmp_path, {"connections.max.idle.ms": "300"}) as broker:
        with broker.connect() as setup:
            create_topic(setup, "idle")
        with broker.connect() as idle, broker.connect() as active, broker.connect() as polling:
            polling.send(FetchRequest((FetchPartition("idle", 0, 0),), max_wait_ms=900))
            started = time.monotonic()
            while time.monotonic() - started < 1.2:
                active.call(ApiVersionsRequest())
                time.sleep(0.1)
            assert idle.is_closed_by_peer(timeout=0.1)
            assert not active.is_closed_by_peer(timeout=0.1)
            assert polling.read_frame().header["id"] == 0  # answered at max_wait, not cut off
        assert broker.metrics()['odradek_closed_connections_total{reason="idle"}'] >= 1


@pytest.mark.parametrize("held_s", [0, 1.5])
def test_a_client_that_does_not_read_its_responses_is_not_read_either(
    tmp_path: Path, held_s: float
) -> None:
    # Held back longer than socket.request.timeout.ms with a request half read: that time
    # does not count against it, the broker stopped reading it.
    with running_broker(tmp_path, {"socket.request.timeout.ms": "500"}) as broker:
        with broker.connect() as setup:
            create_topic(setup, "flood")
            setup.call(produce("flood", batch(4, value_size=64 * 1024)))
        fetch = FetchRequest((FetchPartition("flood", 0, 0),), max_wait_ms=0)
        header = RequestHeader(fetch.api_key, 0, 0, "x" * 16 * 1024)  # a big request
        frame = encode_frame({**header.to_header(), **fetch.to_header()})
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # no autotuning
        sock.connect(("127.0.0.1", broker.port))
        with RawClient(sock) as client:
            client.sock.settimeout(0.5)
            sent = 0
            with pytest.raises(TimeoutError):
                while sent < 5000:
                    client.sock.sendall(frame)  # blocks once the broker stops reading
                    sent += 1
            time.sleep(0.5)
            fetches = 'odradek_requests_total{api="Fetch",error="NONE",protocol="msgpack"}'
            handled = broker.metrics()[fetches]
            assert sent >= 100 and handled < sent / 2, (sent, handled)
            time.sleep(held_s)
            client.sock.settimeout(10)
            responses = [client.read_frame() for _ in range(sent)]
        assert all(len(r.payload) > 4 * 64 * 1024 for r in responses)


def test_reading_stops_at_the_in_flight_limit_and_resumes_as_requests_end(
    tmp_path: Path,
) -> None:
    # Past MAX_IN_FLIGHT_REQUESTS waiting requests the broker reads no more of the
    # connection; the end of a waiting request is what lets it read again.
    with running_broker(tmp_path, {}) as broker:
        with broker.connect() as setup:
            create_topic(setup, "quiet")
        with broker.connect() as client:
            fetch = FetchRequest((FetchPartition("quiet", 0, 0),), max_wait_ms=1000)
            sent = time.monotonic()  # no fetch can end before its 1 s wait from here
            fetch_ids = {client.send(fetch) for _ in range(MAX_IN_FLIGHT_REQUESTS + 6)}
            time.sleep(0.3)  # read, all waiting: the broker stopped reading
            versions_id = client.send(ApiVersionsRequest())
            answered = {}
            for _ in range(len(fetch_ids) + 1):
                answered[client.read_frame().header["id"]] = time.monotonic() - sent
            assert set(answered) == fetch_ids | {versions_id}
            # Read only once a waiting fetch ended, whatever the sleep overslept on a busy
            # machine: answered after the first fetch's answer, a wait after the sending.
            assert answered[versions_id] >= min(answered[i] for i in fetch_ids)
            assert answered[versions_id] >= 0.9


def test_half_closed_connection_still_gets_its_responses(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker, broker.connect() as client:
        client.send(ApiVersionsRequest(), correlation_id=5)
        client.sock.shutdown(socket.SHUT_WR)
        assert client.read_frame().header["id"] == 5
        assert client.is_closed_by_peer()


def test_stop_answers_waiting_requests_then_shuts_down_cleanly(tmp_path: Path) -> None:
    config = load_broker_config(
        overrides={"log.dirs": str(tmp_path / "data"), "port": "0", "metrics.port": "0"}
    )
    loop_thread = EventLoopThread(name="test-broker-loop")
    broker = loop_thread.call(Broker, config)
    loop_thread.run(broker.start(), timeout=30)
    client = RawClient(socket.create_connection(("127.0.0.1", broker.port), timeout=10))
    create_topic(client, "stopping")
    client.send(FetchRequest((FetchPartition("stopping", 0, 0),), max_wait_ms=30_000))
    time.sleep(0.1)
    started = time.monotonic()
    stopping = asyncio.run_coroutine_threadsafe(broker.stop(), loop_thread.loop)
    response = client.read_frame()
    assert time.monotonic() - started < 2, "the waiting fetch was not answered at shutdown"
    assert response.header["error"] == 0
    assert client.is_closed_by_peer()
    stopping.result(timeout=30)
    loop_thread.loop.call_soon_threadsafe(loop_thread.loop.stop)
    client.close()
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE_NAME).exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", broker.port), timeout=1)
