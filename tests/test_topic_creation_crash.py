"""`odradek serve` killed or stopped in the middle of creating a topic of many partitions: after
the restart the topic is absent or whole, and a clean-shutdown marker never claims a state the
broker did not reach."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from serve_process import ServeProcess
from server_helpers import RawClient, batch, read_partition

from odradek.errors import UnknownTopicOrPartitionError
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE_NAME
from odradek.storage.pending_partition_creation import FILE_PREFIX

pytestmark = pytest.mark.slow

TOPIC = "wide"
PARTITIONS = 6000
DEADLINE_S = 60.0


def connect(broker: ServeProcess) -> RawClient:
    return RawClient(socket.create_connection(("127.0.0.1", broker.port), timeout=120))


def partition_dirs(data_dir: Path) -> int:
    with os.scandir(data_dir) as entries:
        return sum(1 for entry in entries if entry.name.startswith(f"{TOPIC}-"))


def pending_markers(data_dir: Path) -> list[str]:
    return [name for name in os.listdir(data_dir) if name.startswith(FILE_PREFIX)]


def start_creation(broker: ServeProcess) -> threading.Thread:
    """Ask for the topic on a thread (its answer may never come) and return that thread."""

    def create() -> None:
        try:
            with connect(broker) as client:
                client.call(CreateTopicsRequest((CreatableTopic(TOPIC, PARTITIONS),)))
        except (ConnectionError, OSError):
            pass  # the broker went away first

    thread = threading.Thread(target=create, daemon=True)
    thread.start()
    return thread


def await_partition_dirs(data_dir: Path, at_least: int) -> int:
    deadline = time.monotonic() + DEADLINE_S
    while (count := partition_dirs(data_dir)) < at_least:
        assert time.monotonic() < deadline, f"only {count} partition directories appeared"
        time.sleep(0.002)
    return count


def assert_absent_or_whole(data_dir: Path) -> str:
    """Restart the broker on ``data_dir``; the topic must be absent or have every partition
    serving. Returns which, with the restart's log."""
    restarted = ServeProcess(data_dir)
    try:
        with connect(restarted) as client:
            (topic,) = client.call(
                MetadataRequest((TOPIC,), allow_auto_topic_creation=False)
            ).topics
            if topic.error == UnknownTopicOrPartitionError.code:
                assert partition_dirs(data_dir) == 0
                outcome = "absent"
            else:
                assert topic.error == 0, topic
                assert len(topic.partitions) == PARTITIONS
                last = PARTITIONS - 1
                produced = ProduceRequest(
                    (ProducePartitionData(TOPIC, last, batch(1, values=[b"v"])),), Acks.ALL
                )
                assert client.call(produced).partitions[0].error == 0
                assert read_partition(client, TOPIC, last) == {0: b"v"}
                outcome = "whole"
        assert pending_markers(data_dir) == []
    finally:
        restarted.stop(signal.SIGTERM)
    return outcome + "\n" + "".join(restarted.lines)


def test_sigkill_mid_creation_leaves_the_topic_absent(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = ServeProcess(data_dir)
    start_creation(broker)
    made = await_partition_dirs(data_dir, 500)
    broker.process.kill()
    broker.process.wait(timeout=10)
    left = partition_dirs(data_dir)
    assert made <= left < PARTITIONS, "the kill did not land mid-creation"
    assert pending_markers(data_dir)

    outcome = assert_absent_or_whole(data_dir)
    assert outcome.startswith("absent")
    assert "rolling back the unfinished creation of 6000 partitions of wide" in outcome


def test_sigterm_mid_creation_never_claims_a_clean_state_it_did_not_reach(tmp_path: Path) -> None:
    """SIGTERM during the creation; the process is killed the moment a clean-shutdown marker
    appears, so whatever the marker claims is what is on disk."""
    data_dir = tmp_path / "data"
    broker = ServeProcess(data_dir)
    start_creation(broker)
    await_partition_dirs(data_dir, 500)
    broker.process.send_signal(signal.SIGTERM)
    marker = data_dir / CLEAN_SHUTDOWN_FILE_NAME
    deadline = time.monotonic() + DEADLINE_S
    while not marker.exists() and broker.process.poll() is None:
        assert time.monotonic() < deadline, "the broker neither stopped nor wrote its marker"
        time.sleep(0.001)
    broker.process.kill()
    broker.process.wait(timeout=10)
    if marker.exists():
        assert pending_markers(data_dir) == []
        assert partition_dirs(data_dir) in (0, PARTITIONS)

    outcome = assert_absent_or_whole(data_dir)
    assert outcome.startswith(("absent", "whole"))
    if marker.exists() and outcome.startswith("whole"):
        assert "(clean shutdown)" in outcome
