"""Crashes around a transaction in a real broker process: SIGKILL between a transactional
append and its marker leaves the transaction open after the restart (the LSO pinned at its
first offset, read_committed readers held there) until the coordinator ends it; a marker whose
.txnindex entry was lost, or torn, in a crash is indexed again by recovery."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from kafka_helpers import create_topic, kafka_call
from serve_process import ServeProcess
from server_helpers import RawClient

from odradek.protocol.kafka.api_versions import FETCH, LIST_OFFSETS
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.record.record_batch_builder import build_batch
from odradek.storage.transaction_index import ABORTED_TXN

TOPIC = "crash-tx"
UNVERIFIED = ("--set", "transaction.partition.verification.enable=false")
pytestmark = pytest.mark.timeout(300)


def produce(broker: ServeProcess, records: bytes, transactional_id: str | None = None) -> None:
    """One acks=all produce on odradek's protocol (fsynced when answered)."""
    import socket

    request = ProduceRequest(
        (ProducePartitionData(TOPIC, 0, records),), Acks.ALL, transactional_id=transactional_id
    )
    with RawClient(socket.create_connection(("127.0.0.1", broker.port), timeout=10)) as client:
        response = client.call(request)
    assert response.partitions[0].error == 0, response


def transactional(pid: int, seq: int, count: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch(
        [(now, b"k", f"t{seq + i}".encode(), ()) for i in range(count)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )


def plain(value: bytes) -> bytes:
    return build_batch([(int(time.time() * 1000), b"k", value, ())])


def latest(broker: ServeProcess, isolation_level: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    return kafka_call(broker.bootstrap, LIST_OFFSETS, 7, body)["topics"][0]["partitions"][0][
        "offset"
    ]


def fetch_committed(broker: ServeProcess) -> dict:
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return kafka_call(broker.bootstrap, FETCH, 12, body)["responses"][0]["partitions"][0]


# A process that ends the transaction as the coordinator would (ReplicaManager's seam, on the
# partition's log), says so, and waits to be killed: no clean shutdown follows.
MARKER_WRITER = textwrap.dedent(
    """
    import sys, time
    from odradek.config.broker_config import BrokerConfig
    from odradek.storage.log_manager import LogManager
    from odradek.topic_partition import TopicPartition

    manager = LogManager(BrokerConfig(log_dirs=(sys.argv[1],)))
    manager.startup()
    log = manager.get_log(TopicPartition(sys.argv[2], 0))
    log.append_end_txn_marker(7, 0, 0, committed=False)
    log.flush()
    print("written", flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("index_loss", ["deleted", "torn"])
def test_a_transaction_open_at_a_crash_stays_open_and_its_abort_is_indexed_again(
    tmp_path: Path, index_loss: str
) -> None:
    data = tmp_path / "data"
    # The transaction's batches are written without its coordinator knowing them (as by a
    # producer of transaction version 1 on a broker that does not verify them), so that
    # only a marker written as the coordinator would ends it.
    broker = ServeProcess(data, *UNVERIFIED)
    try:
        create_topic(broker.bootstrap, TOPIC)
        produce(broker, plain(b"before"))  # 0
        produce(broker, transactional(7, 0, 2), "crash-tx-id")  # 1-2
        produce(broker, plain(b"after"))  # 3
        assert latest(broker, 1) == 1
        assert broker.stop(signal.SIGKILL) == -signal.SIGKILL
    finally:
        broker.stop()

    # The restart rebuilds the open transaction from the log: the LSO stays pinned.
    broker = ServeProcess(data)
    try:
        assert (latest(broker, 0), latest(broker, 1)) == (4, 1)
        answer = fetch_committed(broker)
        assert (answer["high_watermark"], answer["last_stable_offset"]) == (4, 1)
        assert answer["aborted_transactions"] == []
        assert broker.stop() == 0  # a clean stop: its snapshot keeps the transaction open
    finally:
        broker.stop()

    # The coordinator aborts it; the process dies before any clean shutdown.
    writer = subprocess.Popen(
        [sys.executable, "-c", MARKER_WRITER, str(data), TOPIC],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "written"
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=30)
    index = data / f"{TOPIC}-0" / "00000000000000000000.txnindex"
    entry = index.read_bytes()
    assert entry == ABORTED_TXN.pack(0, 7, 1, 4, 5)
    if index_loss == "deleted":
        index.unlink()
    else:
        index.write_bytes(entry[:-9])  # the tail of the entry never reached the disk

    broker = ServeProcess(data)
    try:
        assert index.read_bytes() == entry  # indexed again by recovery, whole
        assert (latest(broker, 0), latest(broker, 1)) == (5, 5)
        answer = fetch_committed(broker)
        assert answer["last_stable_offset"] == 5
        assert answer["aborted_transactions"] == [{"producer_id": 7, "first_offset": 1}]
    finally:
        broker.stop()
