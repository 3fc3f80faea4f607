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
from odradek.spark.record_rejected import RecordRejectedError
from odradek.spark.schema import SCHEMA, SCHEMA_WITH_HEADERS


def register(spark: SparkSession) -> bool:
    """Make the ``odradek`` format known to ``spark``, unless it already is (found through
    ``pyspark_odradek``, or registered before): registering it again would replace it, and
    Spark warns "The data source odradek replaced a statically registered data source" on
    every run. True when this call registered it."""
    if is_registered(spark):
        return False
    spark.dataSource.register(OdradekDataSource)
    return True


def is_registered(spark: SparkSession) -> bool:
    """Whether ``spark`` knows the ``odradek`` format (asking its data source manager, which
    looks the static ones up on first use). False where the session has no JVM of its own
    (Spark Connect): registering there is the only way to know it is there."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
    except AttributeError:
        return False
    return bool(manager.dataSourceExists(OdradekDataSource.name()))


__all__ = [
    "SCHEMA",
    "SCHEMA_WITH_HEADERS",
    "DataLossError",
    "OdradekDataSource",
    "RecordRejectedError",
    "is_registered",
    "register",
]
