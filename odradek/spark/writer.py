"""Writers for df.write and df.writeStream: each Spark task sends its rows with one producer.

The producer's code is imported by ``write`` only: Spark makes a writer, and commits a
micro-batch, in Python processes of their own that send nothing (odradek/spark/data_source.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from odradek.spark.sink_options import SinkOptions

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteSummary(WriterCommitMessage):
    """What one task wrote."""

    records: int


def _written(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, WriteSummary))


class BatchWriter(DataSourceArrowWriter):
    """Appends a DataFrame's rows to topics; a record the broker refuses fails the job.

    Records already acknowledged stay written when the job fails: topics have no rollback.
    """

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteSummary:
        from odradek.spark.record_sender import send_batches

        return WriteSummary(send_batches(iterator, self._options))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.info("wrote %d records", _written(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.warning("write failed after %d records were written", _written(messages))


class StreamWriter(DataSourceStreamArrowWriter):
    """Appends each micro-batch's rows to topics: at least once.

    A micro-batch that fails and is run again writes its records again, so a record may be
    written twice, never lost.
    """

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteSummary:
        from odradek.spark.record_sender import send_batches

        return WriteSummary(send_batches(iterator, self._options))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        logger.info("micro-batch %d: wrote %d records", batchId, _written(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        logger.warning(
            "micro-batch %d failed after %d records were written", batchId, _written(messages)
        )
