"""Consumer records as Arrow record batches in the source's schema."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from odradek.client import ConsumerRecord
from odradek.spark.schema import arrow_schema

_TYPES = {field.name: field.type for field in arrow_schema(include_headers=True)}
_MICROS_PER_MILLI = 1000


def records_to_batch(
    records: Sequence[ConsumerRecord], include_headers: bool = False
) -> pa.RecordBatch:
    """``records`` (at least one) as one batch, with a headers column when
    ``include_headers``; timestamps go from milliseconds to micros.

    Columns are built from the transposed records in one pass each, which is several times
    faster than letting Spark convert rows.
    """
    columns = zip(*records, strict=True)
    topics, partitions, offsets, timestamps, types, keys, values, headers = columns
    millis = pa.array(timestamps, pa.int64())
    arrays = [
        pa.array(keys, _TYPES["key"]),
        pa.array(values, _TYPES["value"]),
        pa.array(topics, _TYPES["topic"]),
        pa.array(partitions, _TYPES["partition"]),
        pa.array(offsets, _TYPES["offset"]),
        pc.multiply(millis, _MICROS_PER_MILLI).cast(_TYPES["timestamp"]),
        pa.array(types, _TYPES["timestampType"]),
    ]
    if include_headers:
        arrays.append(pa.array(headers, _TYPES["headers"]))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers))
