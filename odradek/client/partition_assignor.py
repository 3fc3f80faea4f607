"""Partition assignors run by a group's leader: Kafka's ``range`` and ``roundrobin``.

Both are deterministic functions of the members' subscriptions and the topics' partition
counts, and give the same answer as Kafka's Java assignors, so odradek's consumers can share a
group with Kafka's clients that use the same strategy.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.topic_partition import TopicPartition

Subscriptions = Mapping[str, tuple[str, ...]]
"""Member id -> the topics it subscribes to."""
Assignment = dict[str, list[TopicPartition]]


def range_assign(subscriptions: Subscriptions, partitions: Mapping[str, int]) -> Assignment:
    """Per topic, its partitions in consecutive ranges over the members that subscribe to it
    (sorted by member id); the first ``count % members`` members get one more."""
    assignment: Assignment = {member: [] for member in subscriptions}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        count = partitions.get(topic, 0)
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not count or not members:
            continue
        per_member, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            length = per_member + (1 if index < extra else 0)
            assignment[member] += [TopicPartition(topic, p) for p in range(start, start + length)]
            start += length
    return assignment


def round_robin_assign(subscriptions: Subscriptions, partitions: Mapping[str, int]) -> Assignment:
    """Every partition of every subscribed topic (sorted), dealt in turn to the members
    (sorted) that subscribe to its topic."""
    assignment: Assignment = {member: [] for member in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return assignment
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    position = 0
    for topic in topics:
        for number in range(partitions.get(topic, 0)):
            for _ in range(len(members)):
                member = members[position % len(members)]
                position += 1
                if topic in subscriptions[member]:
                    assignment[member].append(TopicPartition(topic, number))
                    break
    return assignment


ASSIGNORS = {"range": range_assign, "roundrobin": round_robin_assign}
