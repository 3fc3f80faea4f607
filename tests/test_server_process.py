"""`odradek serve` as a real process: SIGKILL loses no acks=all record, SIGTERM/SIGINT stop
cleanly so the next start skips recovery."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from serve_process import ServeProcess, free_ports, serve_command
from server_helpers import RawClient, batch, read_partition

from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE_NAME

pytestmark = pytest.mark.slow

PARTITIONS = 4


def connect(broker: ServeProcess) -> RawClient:
    return RawClient(socket.create_connection(("127.0.0.1", broker.port), timeout=10))


def produce(topic: str, partition: int, values: list[bytes]) -> ProduceRequest:
    records = batch(len(values), values=values)
    return ProduceRequest((ProducePartitionData(topic, partition, records),), acks=Acks.ALL)


def test_sigkill_mid_produce_loses_no_record_acknowledged_with_acks_all(tmp_path: Path) -> None:
    broker = ServeProcess(tmp_path / "data")
    with connect(broker) as client:
        client.call(CreateTopicsRequest((CreatableTopic("crash", PARTITIONS),)))
    acknowledged: dict[tuple[int, int], bytes] = {}
    stop = threading.Event()

    def keep_producing(worker: int) -> None:
        try:
            with connect(broker) as client:
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
    time.sleep(1.5)  # the kill comes mid-produce, after 1.5 s of it
    deadline = time.monotonic() + 60  # and once enough was acknowledged, however loaded
    while len(acknowledged) <= 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    broker.process.kill()
    broker.process.wait(timeout=10)
    stop.set()
    for worker in workers:
        worker.join(timeout=10)
    assert len(acknowledged) > 100, "too little was produced before the kill to prove anything"

    restarted = ServeProcess(tmp_path / "data")
    try:
        with connect(restarted) as client:
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
    broker = ServeProcess(tmp_path / "data")
    with connect(broker) as client:
        client.call(CreateTopicsRequest((CreatableTopic("clean", 2),)))
        client.call(produce("clean", 1, [b"kept"]))
    assert broker.stop(signum) == 0
    assert (tmp_path / "data" / CLEAN_SHUTDOWN_FILE_NAME).exists()
    assert any("log manager shut down" in line for line in broker.lines)

    restarted = ServeProcess(tmp_path / "data")
    try:
        with connect(restarted) as client:
            assert read_partition(client, "clean", 1) == {0: b"kept"}
    finally:
        restarted.stop(signal.SIGTERM)
    startup = "".join(restarted.lines)
    assert "(clean shutdown)" in startup
    assert "recovered 0 segments" in startup


def test_a_second_broker_on_the_same_log_dir_is_refused_in_one_line(tmp_path: Path) -> None:
    broker = ServeProcess(tmp_path / "data")
    try:
        command = serve_command(tmp_path / "data", *free_ports(2))
        second = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        broker.stop(signal.SIGTERM)
    assert second.returncode == 1
    assert (
        "cannot start the broker" in second.stderr and "in use by another broker" in second.stderr
    )
    assert "Traceback" not in second.stderr
