"""TransactionMarker: what the transaction coordinator asks partition leaders to write.

The value of one entry of Kafka's WriteTxnMarkers request: a COMMIT or ABORT control batch
for one producer, to be appended to each listed partition. On this single broker the
coordinator hands it to ``ReplicaManager.write_transaction_markers`` in process instead of
sending the request.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.topic_partition import TopicPartition


@dataclass(frozen=True)
class TransactionMarker:
    """Ends one producer's transaction on ``partitions`` (commit or abort)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: tuple[TopicPartition, ...]
