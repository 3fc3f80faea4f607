"""Reading one offset range with the project's consumer, as Arrow record batches."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from odradek.client import Consumer, ConsumerRecord
from odradek.errors import OffsetOutOfRangeError
from odradek.spark.arrow_records import records_to_batch
from odradek.spark.data_loss import report_data_loss
from odradek.spark.offset_range import OffsetRange
from odradek.spark.source_options import SourceOptions

# Larger polls and fetches than a consumer's defaults: a range is read end to end at once.
# Options kafka.max.poll.records and kafka.max.partition.fetch.bytes override these.
READ_DEFAULTS = {"max_poll_records": 10_000, "max_partition_fetch_bytes": 4 << 20}
BATCH_ROWS = 10_000
POLL_TIMEOUT_MS = 500


def read_range(offset_range: OffsetRange, options: SourceOptions) -> Iterator[pa.RecordBatch]:
    """The records of ``offset_range`` in batches of about BATCH_ROWS rows, read with the
    read's ``options``: its consumer settings, ``includeHeaders``, and ``failOnDataLoss``
    (records gone before they could be read raise DataLossError or are skipped)."""
    configs = {**READ_DEFAULTS, **options.client_configs(), "auto_offset_reset": "none"}
    with Consumer(**configs) as consumer:
        cursor = RangeCursor(consumer, offset_range, options.fail_on_data_loss)
        for records in cursor.batches():
            yield records_to_batch(records, options.include_headers)


class RangeCursor:
    """Walks a consumer through one range: polls, trims at the end, skips or reports losses."""

    def __init__(self, consumer: Consumer, offset_range: OffsetRange, fail_on_data_loss: bool):
        self._consumer = consumer
        self._range = offset_range
        self._tp = offset_range.topic_partition
        self._fail_on_data_loss = fail_on_data_loss
        self._position = offset_range.start
        consumer.assign([self._tp])
        consumer.seek(self._tp, offset_range.start)

    def batches(self) -> Iterator[list[ConsumerRecord]]:
        """The range's records, about BATCH_ROWS at a time."""
        pending: list[ConsumerRecord] = []
        while self._position < self._range.end:
            pending += self._poll()
            if len(pending) >= BATCH_ROWS:
                yield pending
                pending = []
        if pending:
            yield pending

    def _poll(self) -> list[ConsumerRecord]:
        end = self._range.end
        try:
            records = self._consumer.poll(POLL_TIMEOUT_MS)
        except OffsetOutOfRangeError:
            self._skip_lost_records()
            return []
        if records and records[-1].offset >= end:
            records = [record for record in records if record.offset < end]
        self._position = self._consumer.position(self._tp)
        if not records and self._position < end:
            self._check_records_exist()
        return records

    def _skip_lost_records(self) -> None:
        """The position is outside the log: report what is lost and move past it."""
        earliest = self._consumer.beginning_offsets([self._tp])[self._tp]
        resume = earliest if self._position < earliest else self._range.end
        self._lose_until(min(resume, self._range.end))

    def _check_records_exist(self) -> None:
        """Nothing came: the range's end must still be ahead of the log's end, else it is lost."""
        latest = self._consumer.end_offsets([self._tp])[self._tp]
        if latest <= self._position:
            self._lose_until(self._range.end)

    def _lose_until(self, resume: int) -> None:
        report_data_loss(
            f"offsets {self._position} to {resume - 1} of {self._tp} are gone",
            self._fail_on_data_loss,
        )
        self._position = resume
        if resume < self._range.end:
            self._consumer.seek(self._tp, resume)
