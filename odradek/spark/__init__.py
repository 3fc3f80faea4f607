"""Topics as Spark DataFrames: the ``odradek`` format, on PySpark's Python Data Source API.

``spark.read.format("odradek")``, ``spark.readStream.format("odradek")`` and
``df.write``/``df.writeStream.format("odradek")`` behave like Spark's Kafka source and sink
(see docs/spark.md). Installing odradek makes the format known to Spark by itself, through
the ``pyspark_odradek`` module that Spark looks for; where that module is not on the Python
workers' path (an editable install), call :func:`register` once per session.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from odradek.spark.data_loss import DataLossError
from odradek.spark.data_source import OdradekDataSource
from odradek.spark.record_sender import RecordRejectedError
from odradek.spark.schema import SCHEMA, SCHEMA_WITH_HEADERS


def register(spark: SparkSession) -> None:
    """Make the ``odradek`` format known to ``spark``."""
    spark.dataSource.register(OdradekDataSource)


__all__ = [
    "SCHEMA",
    "SCHEMA_WITH_HEADERS",
    "DataLossError",
    "OdradekDataSource",
    "RecordRejectedError",
    "register",
]
