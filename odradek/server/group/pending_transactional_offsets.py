"""PendingTransactionalOffsets: the offsets transactions committed (TxnOffsetCommit) that
their COMMIT or ABORT marker has not settled yet (Kafka's ``pendingTransactionalOffsets`` and
``openTransactionsByGroup`` of its OffsetMetadataManager).

A transaction's offsets stay here, invisible to OffsetFetch, until the transaction coordinator
writes its marker to the group's ``__consumer_offsets`` partition: COMMIT moves them to the
group's committed offsets, ABORT drops them. While one is pending, OffsetFetch with
``require_stable`` answers UNSTABLE_OFFSET_COMMIT for its partition (KIP-447).
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.server.group.offset_and_metadata import OffsetAndMetadata
from odradek.topic_partition import TopicPartition

GroupOffsets = dict[TopicPartition, OffsetAndMetadata]


class PendingTransactionalOffsets:
    """By producer id, then group: the offsets of each open transaction."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, GroupOffsets]] = {}
        self._open_by_group: dict[str, set[int]] = {}

    def put(
        self, producer_id: int, group_id: str, tp: TopicPartition, value: OffsetAndMetadata
    ) -> None:
        """Record a transaction's offset; of two for one partition the later record wins."""
        offsets = self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {})
        current = offsets.get(tp)
        if current is None or current.record_offset < value.record_offset:
            offsets[tp] = value
        self._open_by_group.setdefault(group_id, set()).add(producer_id)

    def has_open_transactions(self, group_id: str) -> bool:
        """Whether any transaction has offsets of the group pending."""
        return group_id in self._open_by_group

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset of the group for ``tp``."""
        return any(
            tp in self._by_producer[producer_id].get(group_id, ())
            for producer_id in self._open_by_group.get(group_id, ())
        )

    def partitions(self, group_id: str) -> set[TopicPartition]:
        """Every partition the group has a pending transactional offset for."""
        return {
            tp
            for producer_id in self._open_by_group.get(group_id, ())
            for tp in self._by_producer[producer_id].get(group_id, ())
        }

    def remove(self, group_id: str, tp: TopicPartition, before_record_offset: int) -> None:
        """A tombstone of the group's offset for ``tp`` at ``before_record_offset``: the
        pending offsets written before it are gone (Kafka's replay of a tombstone). The
        transaction stays open (its marker is still to come)."""
        for producer_id in self._open_by_group.get(group_id, ()):
            offsets = self._by_producer[producer_id].get(group_id)
            if offsets is None:
                continue
            current = offsets.get(tp)
            if current is not None and current.record_offset < before_record_offset:
                del offsets[tp]

    def complete(
        self, producer_id: int, in_partition: Callable[[str], bool]
    ) -> list[tuple[str, GroupOffsets]]:
        """End ``producer_id``'s transaction in the groups ``in_partition`` accepts (those of
        the ``__consumer_offsets`` partitions its marker was written to): their offsets, by
        group, leave this store (the caller commits or drops them)."""
        groups = self._by_producer.get(producer_id)
        if groups is None:
            return []
        completed = []
        for group_id in [g for g in groups if in_partition(g)]:
            offsets = groups.pop(group_id)
            open_transactions = self._open_by_group.get(group_id)
            if open_transactions is not None:
                open_transactions.discard(producer_id)
                if not open_transactions:
                    del self._open_by_group[group_id]
            completed.append((group_id, offsets))
        if not groups:
            del self._by_producer[producer_id]
        return completed

    def __len__(self) -> int:
        """The number of open transactions with pending offsets."""
        return len(self._by_producer)
