"""ConsumerRebalanceListener: hear of partitions taken away and handed out by a rebalance."""

from __future__ import annotations

from odradek.topic_partition import TopicPartition


class ConsumerRebalanceListener:
    """Override what you need. ``on_partitions_revoked`` runs before the consumer rejoins its
    group (commit or save state there), ``on_partitions_assigned`` once the new assignment is
    known and before any of its records are returned. With the blocking Consumer the methods
    run on a worker thread and may call the consumer; with AsyncConsumer they may be
    coroutines."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> object:
        return None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> object:
        return None
