"""maxOffsetsPerTrigger: how far each partition may advance in one micro-batch."""

from __future__ import annotations

import math
from collections.abc import Mapping

from odradek.topic_partition import TopicPartition


def rate_limit(
    starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """``ends`` moved back so that about ``max_rows`` offsets are read in all.

    As Spark's Kafka source: each partition gets a share proportional to its backlog, rounded
    down, but at least one offset so that small partitions are not starved.
    """
    backlog = {tp: end - starts[tp] for tp, end in ends.items() if end > starts[tp]}
    total = sum(backlog.values())
    limited = dict(ends)
    for tp, size in backlog.items():
        share = max_rows * size / total
        limited[tp] = min(ends[tp], starts[tp] + (math.ceil(share) if share < 1 else int(share)))
    return limited
