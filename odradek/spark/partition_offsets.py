"""Offsets per partition as Spark's Kafka source writes them: ``{"topic": {"0": 42}}``."""

from __future__ import annotations

from collections.abc import Mapping

from odradek.topic_partition import TopicPartition

OffsetsJson = dict[str, dict[str, int]]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> OffsetsJson:
    """``offsets`` in the JSON layout, sorted by topic and partition (stable checkpoints)."""
    layout: OffsetsJson = {}
    for tp in sorted(offsets):
        layout.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return layout


def offsets_from_json(layout: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """The offsets of the JSON layout, by TopicPartition."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in layout.items()
        for partition, offset in partitions.items()
    }
