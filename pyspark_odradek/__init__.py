"""Makes the ``odradek`` format known to Spark without a register call.

PySpark (4.0 and later) imports every top-level module whose name starts with ``pyspark_``
when a session first resolves a Python data source, and registers its ``DefaultSource``.
"""

from odradek.spark.data_source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
