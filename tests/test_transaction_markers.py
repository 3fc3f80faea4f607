"""ReplicaManager.write_transaction_markers (the seam the transaction coordinator calls):
COMMIT/ABORT control batches appended as the coordinator, ordered with the partition's other
appends, answered once durable, with Kafka's WriteTxnMarkers errors per partition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    InvalidProducerEpochError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.values.produce import Acks
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch_builder import build_batch
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.server.log_flusher import LogFlusher
from odradek.server.replica_manager import ReplicaManager
from odradek.server.transaction.transaction_marker import TransactionMarker
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_manager import LogManager
from odradek.storage.transaction_index import AbortedTxn
from odradek.topic_partition import TopicPartition


def txn(pid: int, epoch: int, seq: int) -> bytes:
    return build_batch(
        [(int(time.time() * 1000), b"k", f"t{pid}-{seq}".encode(), ())],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LogManager, ReplicaManager]]:
    manager = LogManager(BrokerConfig(log_dirs=(str(tmp_path / "a"),)))
    manager.startup()
    executor = ThreadPoolExecutor(1)
    flusher = LogFlusher(1)
    try:
        TopicAdmin(manager, manager.config).create_topic("tx", 2)
        yield manager, ReplicaManager(manager, executor, flusher, executor)
    finally:
        manager.shutdown()
        flusher.shutdown()
        executor.shutdown()


def test_markers_end_the_transaction_on_every_partition_once_durable(served) -> None:
    manager, replicas = served
    tx0, tx1 = TopicPartition("tx", 0), TopicPartition("tx", 1)

    async def run() -> dict:
        for number in (0, 1):
            partition = replicas.partition("tx", number)
            await partition.append(txn(7, 0, 0), Acks.ALL)
            await partition.durable(0)
        assert replicas.partition("tx", 0).log.last_stable_offset == 0
        return await replicas.write_transaction_markers(
            [TransactionMarker(7, 0, 2, False, (tx0, tx1, TopicPartition("tx", 5)))]
        )

    results = asyncio.run(run())
    assert results[tx0] is None and results[tx1] is None
    assert isinstance(results[TopicPartition("tx", 5)], UnknownTopicOrPartitionError)
    for tp in (tx0, tx1):
        log = manager.get_log(tp)
        # Durable, so committed: the HW passed the marker and the LSO with it.
        assert log.recovery_point == log.high_watermark == log.last_stable_offset == 2
        assert log.local_log.collect_aborted_transactions(0, 2) == [AbortedTxn(7, 0, 1, 2)]
        batches = list(MemoryRecords(log.read(0, 4096).records.read_bytes()).batches())
        assert [b.is_control for b in batches] == [False, True]
        info = log.read(0, 4096, FetchIsolation.TXN_COMMITTED)
        assert info.aborted_transactions == (AbortedTxn(7, 0, 1, 2),)


def test_marker_errors_are_kafkas_per_partition(served) -> None:
    _, replicas = served
    tx0 = TopicPartition("tx", 0)

    async def run() -> list[dict]:
        await replicas.partition("tx", 0).append(txn(7, 3, 0), Acks.LEADER)
        answers = [
            await replicas.write_transaction_markers([TransactionMarker(7, 2, 0, True, (tx0,))])
        ]
        answers.append(
            await replicas.write_transaction_markers([TransactionMarker(7, 3, 5, True, (tx0,))])
        )
        await replicas.partition("tx", 0).append(txn(7, 3, 1), Acks.LEADER)
        answers.append(
            await replicas.write_transaction_markers([TransactionMarker(7, 3, 4, False, (tx0,))])
        )
        return answers

    stale_epoch, written, fenced = asyncio.run(run())
    assert isinstance(stale_epoch[tx0], InvalidProducerEpochError)
    assert written[tx0] is None
    assert isinstance(fenced[tx0], TransactionCoordinatorFencedError)


def test_a_read_committed_fetch_waiting_at_the_lso_is_answered_when_the_marker_commits(
    served,
) -> None:
    """A read_committed consumer long-polling at the LSO (the records after it are in the
    log, above it) is woken by the COMMIT marker, not by its timeout."""
    from odradek.protocol.fetch import DEFAULT_MAX_BYTES
    from odradek.protocol.header import RequestHeader
    from odradek.protocol.isolation import IsolationLevel
    from odradek.protocol.values.fetch import FetchPartition
    from odradek.server.request_context import RequestContext

    _, replicas = served
    tx0 = TopicPartition("tx", 0)

    async def run() -> tuple[float, object]:
        partition = replicas.partition("tx", 0)
        await partition.append(txn(7, 0, 0), Acks.ALL)
        await partition.durable(0)
        started = time.monotonic()
        waiting = asyncio.ensure_future(
            replicas.fetch_messages(
                RequestContext("127.0.0.1:1", RequestHeader(1, 0, 1, "test")),
                (FetchPartition("tx", 0, 0),),
                max_wait_ms=10_000,
                min_bytes=1,
                max_bytes=DEFAULT_MAX_BYTES,
                isolation=IsolationLevel.TXN_COMMITTED,
            )
        )
        await asyncio.sleep(0.3)
        assert not waiting.done()  # nothing stable to read
        await replicas.write_transaction_markers([TransactionMarker(7, 0, 0, True, (tx0,))])
        response = await asyncio.wait_for(waiting, 5)
        return time.monotonic() - started, response[0]

    took, answer = asyncio.run(run())
    assert took < 5
    assert answer.last_stable_offset == 2 and len(answer.records) > 0
    assert answer.aborted_transactions == ()
