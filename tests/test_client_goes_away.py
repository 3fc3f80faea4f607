"""A client going away mid-request never leaves a traceback in the broker's log.

The broker runs as its own process (``odradek serve``) and its whole log is read: a client
sends a request whose work outlives it (a CreateTopics, twice for the same topic so the second
creation fails; a Produce waiting for its fsync; a Fetch waiting for data; a JoinGroup waiting
for its rebalance) and closes its connection at once. The work ends as it would have; its
outcome is logged without a traceback and no future is left with an unread exception
("Future exception was never retrieved")."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest
from kafka_helpers import KafkaSocket
from serve_process import ServeProcess
from server_helpers import RawClient, batch

from odradek.client.admin import Admin
from odradek.protocol.kafka.message_codec import encode_parts, request_spec
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest

pytestmark = pytest.mark.slow


def send_and_close(bootstrap: str, api_key: int, version: int, body: dict, reset: bool) -> None:
    """Send one request and close the connection without reading the answer, once the broker
    has had a moment to start on it (a close read with the request cancels it unstarted):
    with a FIN, or (``reset``) a RST, as a killed client's kernel may send."""
    kafka = KafkaSocket(bootstrap)
    spec = request_spec(api_key, version)
    kafka.send(api_key, version, b"".join(map(bytes, encode_parts(spec, body))), spec.flexible)
    time.sleep(0.05)
    if reset:
        kafka.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    kafka.close()


def msgpack_create_and_close(port: int, name: str, reset: bool) -> None:
    """CreateTopics on odradek's protocol, closed as :func:`send_and_close` closes."""
    client = RawClient(socket.create_connection(("127.0.0.1", port), timeout=10))
    client.send(CreateTopicsRequest((CreatableTopic(name, 200),)))
    time.sleep(0.05)
    if reset:
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()


def create_topics(name: str, partitions: int) -> dict:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": 1}
    return {"topics": [topic], "timeout": 30_000, "validate_only": False}


def wait_for_topics(bootstrap: str, *names: str) -> None:
    deadline = time.monotonic() + 60
    with Admin(bootstrap_servers=bootstrap) as admin:
        while not set(names) <= set(admin.list_topics()):
            assert time.monotonic() < deadline, f"{names} not created"
            time.sleep(0.1)


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
def test_requests_whose_client_closes_at_once_leave_no_traceback(
    tmp_path: Path, reset: bool
) -> None:
    with ServeProcess(tmp_path / "data") as broker:
        for _ in range(2):  # the second creation of the same topic fails: nobody is told
            send_and_close(broker.bootstrap, 19, 7, create_topics("gone", 200), reset)
        send_and_close(broker.bootstrap, 19, 7, create_topics("gone", 200), reset)
        send_and_close(broker.bootstrap, 19, 4, create_topics("gone-too", 50), reset)
        for _ in range(2):  # the same on odradek's own protocol
            msgpack_create_and_close(broker.port, "gone-msgpack", reset)
        wait_for_topics(broker.bootstrap, "gone", "gone-too", "gone-msgpack")

        produce = {
            "transactional_id": None,
            "acks": -1,
            "timeout": 30_000,
            "topic_data": [{"name": "gone", "partition_data": [{"index": 0, "records": batch(5)}]}],
        }
        send_and_close(broker.bootstrap, 0, 9, produce, reset)
        fetch = {
            "replica_id": -1,
            "max_wait": 5_000,
            "min_bytes": 1 << 20,
            "topics": [{"topic": "gone-too", "partitions": [{"partition": 0, "fetch_offset": 0}]}],
        }
        send_and_close(broker.bootstrap, 1, 12, fetch, reset)
        join = {
            "group_id": "gone",
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        }
        send_and_close(broker.bootstrap, 11, 5, join, reset)
        time.sleep(2)  # the work outliving its clients ends
        assert broker.stop() == 0
    log = "".join(broker.lines)
    assert "Traceback" not in log and "never retrieved" not in log, log[-6000:]
    assert "created topic gone:" in log
