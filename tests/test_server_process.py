"""`odradek serve` as a real process: SIGKILL loses no acks=all record, SIGTERM/SIGINT stop
cleanly so the next start skips recovery."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from server_helpers import RawClient, batch, read_partition

from odradek.protocol.produce import Acks, ProducePartitionData, ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE_NAME

pytestmark = pytest.mark.slow

SERVING = re.compile(r"serving on [^:]+:(\d+)")
PARTITIONS = 4


def serve_command(data_dir: Path) -> list[str]:
    """``odradek serve`` on ``data_dir``, both ports chosen by the system."""
    ports = ["--port", "0", "--metrics-port", "0"]
    return [sys.executable, "-m", "odradek.cli.main", "serve", "--data-dir", str(data_dir), *ports]


class BrokerProcess:
    """``odradek serve`` on ``data_dir`` with ephemeral ports; its log lines are kept."""

    def __init__(self, data_dir: Path) -> None:
        self.process = subprocess.Popen(
            serve_command(data_dir),
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self.port = self._wait_for_port()
        self._reader = threading.Thread(target=self._keep_reading, daemon=True)
        self._reader.start()

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            if match := SERVING.search(line):
                return int(match.group(1))
        raise AssertionError("the broker did not start:\n" + "".join(self.lines))

    def _keep_reading(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)

    def connect(self) -> RawClient:
        return RawClient(socket.create_connection(("127.0.0.1", self.port), timeout=10))

    def stop(self, signum: int) -> int:
        self.process.send_signal(signum)
        code = self.process.wait(timeout=30)
        self._reader.join(timeout=5)
        return code


def produce(topic: str, partition: int, values: list[bytes]) -> ProduceRequest:
    records = batch(len(values), values=values)
    return ProduceRequest((ProducePartitionData(topic, partition, records),), acks=Acks.ALL)


def test_sigkill_mid_produce_loses_no_record_acknowledged_with_acks_all(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data")
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("crash", PARTITIONS),)))
    acknowledged: dict[tuple[int, int], bytes] = {}
    stop = threading.Event()

    def keep_producing(worker: int) -> None:
        try:
            with broker.connect() as client:
                for n in range(10**9):
                    if stop.is_set():
                        return
                    partition = (worker + n) % PARTITIONS
                    values = [b"w%d-n%d-r%d" % (worker, n, r) for r in range(5)]
                    response = client.call(produce("crash", partition, values)).partitions[0]
                    assert response.error == 0, response
                    for r, value in enumerate(values):
                        acknowledged[(partition, response.base_offset + r)] = value
        except (ConnectionError, OSError):
            return  # the broker died under us

    workers = [threading.Thread(target=keep_producing, args=(w,)) for w in range(6)]
    for worker in workers:
        worker.start()
    time.sleep(1.5)
    broker.process.kill()
    broker.process.wait(timeout=10)
    stop.set()
    for worker in workers:
        worker.join(timeout=10)
    assert len(acknowledged) > 100, "too little was produced before the kill to prove anything"

    restarted = BrokerProcess(tmp_path / "data")
    try:
        with restarted.connect() as client:
            found = {
                (partition, offset): value
                for partition in range(PARTITIONS)
                for offset, value in read_partition(client, "crash", partition).items()
            }
    finally:
        restarted.stop(signal.SIGTERM)
    missing = {key: value for key, value in acknowledged.items() if found.get(key) != value}
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {list(missing)[:3]}"
    assert any("unclean shutdown" in line for line in restarted.lines)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly_and_the_next_start_skips_recovery(
    tmp_path: Path, signum: int
) -> None:
    broker = BrokerProcess(tmp_path / "data")
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("clean", 2),)))
        client.call(produce("clean", 1, [b"kept"]))
    assert broker.stop(signum) == 0
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE_NAME).exists()
    assert any("log manager shut down" in line for line in broker.lines)

    restarted = BrokerProcess(tmp_path / "data")
    try:
        with restarted.connect() as client:
            assert read_partition(client, "clean", 1) == {0: b"kept"}
    finally:
        restarted.stop(signal.SIGTERM)
    startup = "".join(restarted.lines)
    assert "(clean shutdown)" in startup
    assert "recovered 0 segments" in startup


def test_a_second_broker_on_the_same_log_dir_is_refused_in_one_line(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data")
    try:
        second = subprocess.run(
            serve_command(tmp_path / "data"), capture_output=True, text=True, timeout=60
        )
    finally:
        broker.stop(signal.SIGTERM)
    assert second.returncode == 1
    assert (
        "cannot start the broker" in second.stderr and "in use by another broker" in second.stderr
    )
    assert "Traceback" not in second.stderr
