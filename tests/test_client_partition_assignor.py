"""The leader's assignors give Kafka's Java assignors' answers."""

from __future__ import annotations

from odradek.client.partition_assignor import range_assign, round_robin_assign
from odradek.topic_partition import TopicPartition as TP


def test_range_gives_consecutive_ranges_per_topic_the_first_members_one_more() -> None:
    subscriptions = {"c1": ("t0", "t1"), "c0": ("t0", "t1")}
    assigned = range_assign(subscriptions, {"t0": 3, "t1": 3})
    assert assigned == {
        "c0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)],
        "c1": [TP("t0", 2), TP("t1", 2)],
    }


def test_round_robin_deals_partitions_in_turn_skipping_members_not_subscribed() -> None:
    subscriptions = {"c0": ("t0",), "c1": ("t0", "t1"), "c2": ("t0", "t1", "t2")}
    assigned = round_robin_assign(subscriptions, {"t0": 1, "t1": 2, "t2": 3})
    # Kafka's RoundRobinAssignor javadoc example
    assert assigned == {
        "c0": [TP("t0", 0)],
        "c1": [TP("t1", 0)],
        "c2": [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)],
    }


def test_every_partition_goes_to_exactly_one_member() -> None:
    subscriptions = {f"m{i}": ("a", "b") for i in range(4)}
    for assign in (range_assign, round_robin_assign):
        assigned = assign(subscriptions, {"a": 7, "b": 5, "unknown": 3})
        owned = [tp for partitions in assigned.values() for tp in partitions]
        assert sorted(owned) == sorted(
            [TP("a", p) for p in range(7)] + [TP("b", p) for p in range(5)]
        )
