"""The fields of a v2 batch header, all read at once."""

from __future__ import annotations

from typing import NamedTuple


class BatchHeader(NamedTuple):
    """The 61-byte header of a batch, field by field, in wire order (design §3).

    :meth:`RecordBatch.header` unpacks it with one struct call, for code that reads most
    fields of every batch (the append path, recovery) where a property per field would cost
    a call each.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
