"""ActiveProducer: what a partition knows of one producer (a row of Kafka's
DescribeProducers answer, from its ``ProducerStateManager.activeProducers``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ActiveProducer:
    """One producer of one partition: its epoch, last sequence and timestamp, the epoch of the
    coordinator of its last marker, and the first offset of its open transaction (-1: none)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int
