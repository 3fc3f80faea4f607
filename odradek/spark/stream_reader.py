"""The streaming reader: micro-batches between offsets Spark keeps in its checkpoint.

The clients are imported where they are used: Spark also makes this reader in a planning
process that only asks it for its read function (odradek/spark/data_source.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from odradek.spark.client_options import common_configs
from odradek.spark.data_loss import report_data_loss
from odradek.spark.offset_range import OffsetRange, offset_ranges
from odradek.spark.partition_offsets import OffsetsJson, offsets_from_json, offsets_to_json
from odradek.spark.rate_limit import rate_limit
from odradek.spark.source_options import SourceOptions
from odradek.spark.trigger_delay import TriggerDelay
from odradek.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.spark.topic_offsets import TopicOffsets


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads what the topics gained since the last micro-batch.

    Offsets are the next offset to read per partition, in Spark's Kafka JSON layout. Spark
    calls the offset methods in one long-lived process and ``read`` on other copies, so the
    broker lookups opened here never travel: each OffsetRange carries what ``read`` needs.
    Partitions that appear later (a subscribed topic created meanwhile) are read from their
    earliest offset.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._lookup: TopicOffsets | None = None
        self._target: dict[TopicPartition, int] | None = None
        minimum = options.min_offsets_per_trigger
        self._delay = (
            None if minimum is None else TriggerDelay(minimum, options.max_trigger_delay_ms / 1000)
        )

    def initialOffset(self) -> OffsetsJson:
        lookup = self._topic_offsets()
        partitions = self._options.subscription.partitions(lookup, require_topics=False)
        earliest, latest = lookup.earliest(partitions), lookup.latest(partitions)
        starting = self._options.starting
        found = lookup.found_for(starting, partitions)
        return offsets_to_json(starting.resolve(partitions, earliest, latest, found))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an availableNow run: what the topics hold now."""
        self._target = self._latest()

    def latestOffset(self, start: OffsetsJson, limit: ReadLimit) -> OffsetsJson:
        """Where the next micro-batch ends: the latest offsets, as far as an availableNow run's
        target, maxOffsetsPerTrigger and minOffsetsPerTrigger (``start`` itself: no batch
        yet) let it."""
        ends = self._latest()
        if self._target is not None:
            target = self._target
            ends = {tp: min(end, target[tp]) for tp, end in ends.items() if tp in target}
        starts = self._with_new_partitions(offsets_from_json(start), ends)
        waiting = sum(max(0, end - starts[tp]) for tp, end in ends.items())
        if self._delay is not None and self._target is None and self._delay.holds_back(waiting):
            return start
        if isinstance(limit, ReadMaxRows):
            ends = rate_limit(starts, ends, limit.max_rows)
        return offsets_to_json(ends)

    def partitions(self, start: OffsetsJson, end: OffsetsJson) -> Sequence[InputPartition]:
        ends = offsets_from_json(end)
        starts = self._with_new_partitions(offsets_from_json(start), ends)
        self._report_losses(starts, ends)
        return offset_ranges(starts, ends, self._options.min_partitions)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        from odradek.spark.range_reader import read_range  # a consumer: only where it reads

        yield from read_range(partition, self._options)

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None

    def _topic_offsets(self) -> TopicOffsets:
        from odradek.spark.topic_offsets import TopicOffsets  # an admin client: only where used

        if self._lookup is None:
            self._lookup = TopicOffsets(**common_configs(self._options.client_configs()))
        return self._lookup

    def _latest(self) -> dict[TopicPartition, int]:
        lookup = self._topic_offsets()
        return lookup.latest(self._options.subscription.partitions(lookup, require_topics=False))

    def _with_new_partitions(
        self, starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """``starts``, plus the earliest offset of partitions only ``ends`` knows."""
        new = [tp for tp in ends if tp not in starts]
        return {**starts, **self._topic_offsets().earliest(new)}

    def _report_losses(
        self, starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int]
    ) -> None:
        """Partitions that vanished or went backwards lost records (a topic deleted or remade)."""
        fail = self._options.fail_on_data_loss
        for tp in sorted(starts):
            if tp not in ends:
                report_data_loss(f"{tp} is gone, from offset {starts[tp]} on", fail)
            elif ends[tp] < starts[tp]:
                report_data_loss(f"{tp} went back from offset {starts[tp]} to {ends[tp]}", fail)
