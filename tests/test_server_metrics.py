"""The broker's /metrics: requests, bytes, connections, event-loop lag, partitions."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from log_manager_helpers import wait_until
from server_helpers import batch, running_broker

from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.header import RequestHeader
from odradek.protocol.messages import encode_request
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest, DeleteTopicsRequest
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import Acks, ProducePartitionData


def test_metrics_follow_requests_connections_and_partitions(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker:
        with broker.connect() as client:
            client.call(CreateTopicsRequest((CreatableTopic("metered", 2),)))
            records = batch(10)
            client.call(ProduceRequest((ProducePartitionData("metered", 1, records),), Acks.ALL))
            client.call(FetchRequest((FetchPartition("metered", 1, 0),), max_wait_ms=0))
            client.call(FetchRequest((FetchPartition("metered", 5, 0),), max_wait_ms=0))
            client.send_frame({"api": 0, "v": 3, "id": 99})
            client.read_frame()
            metrics = broker.metrics()
            assert metrics["odradek_open_connections"] == 1
        requests = 'odradek_requests_total{api="%s",error="%s",protocol="msgpack"}'
        assert metrics[requests % ("Produce", "NONE")] == 1
        assert metrics[requests % ("Fetch", "NONE")] == 2
        assert metrics[requests % ("Produce", "UNSUPPORTED_VERSION")] == 1
        partition_errors = 'odradek_partition_errors_total{api="Fetch",error="%s"}'
        assert metrics[partition_errors % "UNKNOWN_TOPIC_OR_PARTITION"] == 1
        latency = 'odradek_request_latency_seconds_count{api="Produce",protocol="msgpack"}'
        assert metrics[latency] == 2
        assert metrics["odradek_network_bytes_in_total"] > len(records)
        assert metrics["odradek_network_bytes_out_total"] > len(records)
        assert metrics['odradek_fetch_bytes_total{path="sendfile"}'] == len(records)
        partition = '{partition="1",topic="metered"}'
        assert metrics[f"odradek_log_end_offset{partition}"] == 10
        assert metrics[f"odradek_high_watermark{partition}"] == 10
        assert metrics[f"odradek_log_start_offset{partition}"] == 0
        assert metrics[f"odradek_log_size_bytes{partition}"] == len(records)
        assert metrics[f"odradek_log_segments{partition}"] == 1
        wait_until(lambda: broker.metrics()["odradek_open_connections"] == 0)

        with broker.connect() as client:
            client.call(DeleteTopicsRequest(("metered",)))
        assert not any("metered" in name for name in broker.metrics())


def test_event_loop_lag_is_measured(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker:
        wait_until(lambda: broker.metrics()["odradek_event_loop_lag_seconds_count"] >= 4, 60)
        broker.loop_thread.call(time.sleep, 0.2)  # hold the loop up
        time.sleep(0.1)
        with broker.connect() as client:
            client.call(ApiVersionsRequest())
        metrics = broker.metrics()
    assert metrics["odradek_event_loop_lag_seconds_count"] >= 4
    assert (
        metrics['odradek_event_loop_lag_seconds_bucket{le="0.1"}']
        < (metrics["odradek_event_loop_lag_seconds_count"])
    ), "a 200 ms stall was not seen"


def test_network_bytes_are_every_byte_received_and_sent(tmp_path: Path) -> None:
    frame = b"".join(
        bytes(part) for part in encode_request(RequestHeader(18, 0, 7, "c"), ApiVersionsRequest())
    )
    with running_broker(tmp_path) as broker:
        before = broker.metrics()
        responses = 0
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            for _ in range(3):
                sock.sendall(frame)
                size = 4 + int.from_bytes(_receive(sock, 4), "big")
                _receive(sock, size - 4)
                responses += size
            metrics = broker.metrics()
    for name, expected in (("in", 3 * len(frame)), ("out", responses)):
        total = f"odradek_network_bytes_{name}_total"
        assert metrics[total] - before[total] == expected


def _receive(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data
