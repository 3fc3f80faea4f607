"""The clients' per-record loops in bulk: many records written into a batch at once (the
producer's ``send_many``), a whole records section read into record tuples at once (the
consumer).

They run in C (``_record_codec.c``, built with the package) where that module is present; the
functions here are its Python twins and the fallback where it is not built. Both write and read
exactly what :func:`~odradek.record.record.write_record` and
:func:`~odradek.record.record.decode_records` do, one record at a time
(tests/test_record_codec_native.py compares them).
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.int_limits import INT32_MAX, INT64_MAX, INT64_MIN
from odradek.record.record import (
    Buffer,
    decode_records,
    encode_record,
)

try:
    from odradek.record import _record_codec as _native
except ImportError:  # built without a C compiler: the Python twins below do the work
    _native = None
    logging.getLogger(__name__).warning(
        "odradek.record._record_codec is not built; the clients encode and decode records in "
        "Python, several times slower (install a C compiler and reinstall odradek)"
    )


def py_write_records(
    out: bytearray,
    keys: list[bytes | None] | None,
    values: list[bytes | None],
    start: int,
    stop: int,
    first_offset_delta: int,
    timestamp_delta: int,
    limit: int,
) -> int:
    """Append records ``start`` to ``stop`` of ``values`` (with ``keys``, or none) to ``out``:
    no headers, offset deltas from ``first_offset_delta`` on, one timestamp delta. Stops
    before a record that would take ``out`` past ``limit`` bytes; returns the index of the
    first record not written."""
    if not isinstance(values, list) or not (keys is None or isinstance(keys, list)):
        raise TypeError("write_records: values and keys must be lists")
    if not (
        INT64_MIN <= first_offset_delta <= INT64_MAX and INT64_MIN <= timestamp_delta <= INT64_MAX
    ):
        raise OverflowError("write_records: the deltas must fit 64 bits")
    if keys is not None and len(keys) != len(values):
        raise ValueError("write_records: keys and values differ in length")
    if not 0 <= start <= stop <= len(values):
        raise ValueError("write_records: start and stop must lie in values")
    if first_offset_delta < 0 or first_offset_delta + (stop - start) - 1 > INT32_MAX:
        raise ValueError("write_records: offset deltas must lie in [0, 2^31)")
    size = len(out)
    written = bytearray()  # added to out at the end: an error leaves out as it was
    for index in range(start, stop):
        key = None if keys is None else keys[index]
        value = values[index]
        for what, field in (("key", key), ("value", value)):
            if field is not None and not isinstance(field, bytes):
                raise TypeError(
                    f"a record {what} must be bytes or None, not {type(field).__name__}"
                )
        record = encode_record(first_offset_delta + index - start, timestamp_delta, key, value)
        if len(record) > limit - size:
            out += written
            return index
        written += record
        size += len(record)
    out += written
    return stop


def py_read_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    first_offset: int,
    record_type: type[tuple],
    topic: str,
    partition: int,
    timestamp_type: Any,
) -> list[tuple] | None:
    """The ``count`` records filling ``data`` from offset ``first_offset`` on, each a
    ``record_type`` of (topic, partition, offset, timestamp, timestamp_type, key, value,
    headers); None when ``data`` is anything but exactly ``count`` well-formed records."""
    records = decode_records(data, count, base_offset, base_timestamp, log_append_time)
    if records is None:
        return None
    make = tuple.__new__
    return [
        make(
            record_type,
            (
                topic,
                partition,
                record.offset,
                record.timestamp,
                timestamp_type,
                record.key,
                record.value,
                record.headers,
            ),
        )
        for record in records
        if record.offset >= first_offset
    ]


write_records = py_write_records if _native is None else _native.write_records
read_records = py_read_records if _native is None else _native.read_records
