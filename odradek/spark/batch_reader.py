"""The batch reader: plans offset ranges once, and reads each in a Spark task."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from odradek.spark.client_options import common_configs
from odradek.spark.offset_range import OffsetRange, offset_ranges
from odradek.spark.range_reader import read_range
from odradek.spark.source_options import SourceOptions
from odradek.spark.topic_offsets import TopicOffsets


class BatchReader(DataSourceReader):
    """Reads the topics between startingOffsets and endingOffsets.

    Spark plans a DataFrame once, so every action on it reads the same offset ranges.
    """

    def __init__(self, options: SourceOptions) -> None:
        self._options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self._options
        with TopicOffsets(**common_configs(options.client_configs())) as lookup:
            partitions = options.subscription.partitions(lookup, require_topics=True)
            earliest = lookup.earliest(partitions)
            latest = lookup.latest(partitions)
            found_start = lookup.found_for(options.starting, partitions)
            found_end = lookup.found_for(options.ending, partitions)
        starts = options.starting.resolve(partitions, earliest, latest, found_start)
        ends = options.ending.resolve(partitions, earliest, latest, found_end)
        for tp in partitions:
            if starts[tp] > ends[tp]:
                raise ValueError(
                    f"{tp}: startingOffsets {starts[tp]} is after endingOffsets {ends[tp]}"
                )
        return offset_ranges(starts, ends, options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of one OffsetRange; when no range has any, Spark passes a bare one."""
        if isinstance(partition, OffsetRange):
            yield from read_range(partition, self._options)
