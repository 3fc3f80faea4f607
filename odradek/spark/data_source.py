"""The ``odradek`` format: topics as DataFrames for Spark's Python Data Source API.

Readers and writers are imported where they are made. Spark starts a fresh Python process for
each question it asks a source while planning (its schema, its writer, a micro-batch's commit),
and on a pip-installed PySpark each such process compiles PySpark anew from its zip: those that
need no client should not load one too (the client costs a fresh process about 0.3 s of CPU).
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from odradek.spark.schema import source_schema
from odradek.spark.source_options import include_headers


class OdradekDataSource(DataSource):
    """Reads topics (batch and streaming) and writes DataFrames to them, like Spark's Kafka.

    Options arrive in ``self.options``; they are checked when a reader or writer is made, in
    the Python worker that plans the query.
    """

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        return source_schema(include_headers(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        from odradek.spark.batch_reader import BatchReader
        from odradek.spark.source_options import SourceOptions

        self._check_schema(schema)
        return BatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from odradek.spark.source_options import SourceOptions
        from odradek.spark.stream_reader import StreamReader

        self._check_schema(schema)
        return StreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.sink_options import SinkOptions
        from odradek.spark.writer import BatchWriter

        if overwrite:
            raise ValueError("topics are append-only: write with mode('append')")
        return BatchWriter(SinkOptions.parse(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.sink_options import SinkOptions
        from odradek.spark.writer import StreamWriter

        return StreamWriter(SinkOptions.parse(self.options, schema))

    def _check_schema(self, schema: StructType) -> None:
        expected = self.schema()
        if schema != expected:
            raise ValueError(
                f"the odradek source has a fixed schema ({expected.simpleString()}, headers "
                "with includeHeaders=true); do not set one"
            )
