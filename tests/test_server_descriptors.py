"""A broker run out of file descriptors (a real process under a low ``ulimit -n``): the request
that needed one fails with a retriable error, other topics keep serving, no log directory goes
offline, and the partition works again once descriptors are free."""

from __future__ import annotations

import os
import resource
import socket
import time
from pathlib import Path

import pytest
from log_helpers import batch
from serve_process import ServeProcess
from server_helpers import RawClient, read_partition

from odradek.errors import KafkaStorageError
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.produce import ProducePartitionData

pytestmark = pytest.mark.slow

LIMIT = 256
NOW_MS = int(time.time() * 1000)


def low_descriptor_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def connect(broker: ServeProcess) -> RawClient:
    return RawClient(socket.create_connection(("127.0.0.1", broker.port), timeout=10))


def produce(client: RawClient, topic: str, timestamp: int) -> int:
    """Produce one record stamped ``timestamp``; the partition's error code."""
    records = batch(1, timestamp=timestamp)
    request = ProduceRequest((ProducePartitionData(topic, 0, records),))
    return client.call(request).partitions[0].error


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_running_out_of_descriptors_fails_the_roll_and_nothing_goes_offline(
    tmp_path: Path,
) -> None:
    with ServeProcess(tmp_path / "data", preexec_fn=low_descriptor_limit) as broker:
        assert any(
            f"file descriptor limit {LIMIT} (soft; hard {LIMIT})" in line for line in broker.lines
        )
        with connect(broker) as client:
            # segment.ms=1000: each record stamped a minute after the last rolls a segment.
            topics = (
                CreatableTopic("rolling", 1, {"segment.ms": "1000"}),
                CreatableTopic("steady", 1),
            )
            assert all(t.error == 0 for t in client.call(CreateTopicsRequest(topics)).topics)
            assert produce(client, "rolling", NOW_MS) == 0
            assert produce(client, "steady", NOW_MS) == 0

            fillers: list[socket.socket] = []
            rolled_at = NOW_MS
            errors = []
            try:
                for _ in range(20):  # connections until the broker has no descriptor to spare
                    # (A read of the other topic keeps its index maps among the idle files most
                    # recently used, which the rolls do not push out.)
                    assert list(read_partition(client, "steady", 0)) == [0]
                    while open_descriptors(broker.process.pid) < LIMIT - 1:
                        fillers.extend(
                            socket.create_connection(("127.0.0.1", broker.port)) for _ in range(8)
                        )
                        time.sleep(0.05)
                    rolled_at += 60_000
                    errors.append(produce(client, "rolling", rolled_at))
                    if errors[-1] != 0:
                        break
                assert errors[-1] == KafkaStorageError.code, errors
                assert KafkaStorageError.retriable

                # Everyone else goes on: appends to the other topic, fetches of both.
                assert produce(client, "steady", NOW_MS + 1) == 0
                assert list(read_partition(client, "steady", 0)) == [0, 1]
            finally:
                for filler in fillers:
                    filler.close()

            deadline = time.monotonic() + 60
            while produce(client, "rolling", rolled_at) != 0:  # descriptors come back
                assert time.monotonic() < deadline, "the partition did not recover"
                time.sleep(0.1)
            # The first record, those acknowledged meanwhile and the retried one: no more.
            assert list(read_partition(client, "rolling", 0)) == list(range(len(errors) + 1))
            assert produce(client, "steady", NOW_MS + 2) == 0
            assert list(read_partition(client, "steady", 0)) == [0, 1, 2]
    assert broker.process.returncode == 0
    logged = "".join(broker.lines)
    assert "stays online" in logged and "Too many open files" in logged
    assert "is offline" not in logged, logged
