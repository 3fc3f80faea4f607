"""What an admin client learns of transactions: Kafka's TransactionListing,
TransactionDescription and ProducerState."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.topic_partition import TopicPartition


@dataclass(frozen=True)
class TransactionListing:
    """One transactional id a coordinator knows (ListTransactions)."""

    transactional_id: str
    producer_id: int
    state: str
    """Kafka's name of the state: Empty, Ongoing, PrepareCommit, CompleteCommit, ..."""


@dataclass(frozen=True)
class TransactionDescription:
    """Where a transactional id stands at its coordinator (DescribeTransactions)."""

    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    """When the open transaction began; None when there is none."""
    topic_partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ProducerState:
    """A producer a partition's leader knows (DescribeProducers), as Kafka's ``ProducerState``."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    """The epoch of the coordinator that wrote the producer's last marker; None when none did."""
    current_transaction_start_offset: int | None
    """The first offset of the producer's open transaction; None when none is open."""
