"""The rows of a topic, as Spark's Kafka source has them, in Spark's and in Arrow's terms."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

# A read's rows, as Spark's Kafka source gives them by default: no headers.
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)

# A read's rows with the option includeHeaders=true.
SCHEMA_WITH_HEADERS = StructType([*SCHEMA.fields, StructField("headers", ArrayType(HEADER))])


def source_schema(include_headers: bool) -> StructType:
    """The rows a read gives, with or without the headers column."""
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


def arrow_schema(include_headers: bool) -> pa.Schema:
    """:func:`source_schema` in Arrow's terms: Spark checks the batches a reader yields
    against exactly this."""
    return _ARROW_SCHEMAS[include_headers]


_ARROW_SCHEMAS = {
    include: to_arrow_schema(source_schema(include), timezone="UTC") for include in (False, True)
}
