"""One batch of records for one partition, from its first append until it is acknowledged."""

from __future__ import annotations

from collections.abc import Sequence

from odradek.client.produce_request_result import ProduceRequestResult
from odradek.client.record_metadata import FutureRecordMetadata
from odradek.errors import KafkaError
from odradek.record.compression import CompressionType
from odradek.record.record_batch import HEADER_SIZE as BATCH_HEADER_SIZE
from odradek.record.record_batch import set_producer_state
from odradek.record.record_batch_builder import RecordBatchBuilder
from odradek.topic_partition import TopicPartition

RECORD_OVERHEAD_BOUND = 26
"""Upper bound of a record's framing: length, attributes, deltas, key/value/header counts."""


def estimated_record_size(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> int:
    """An upper bound on the bytes a record adds to an uncompressed batch."""
    size = RECORD_OVERHEAD_BOUND
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    for header_key, header_value in headers:
        size += 10 + len(header_key) * 4 + (len(header_value) if header_value else 0)
    return size


class ProducerBatch:
    """Records appended until the batch is closed, then built once and sent until acknowledged.

    The built bytes are kept, so a retry resends exactly the same batch. Appends come under the
    accumulator's lock; once the batch has left its partition's queue nothing appends to it.
    ``reserved_bytes`` sums the records' size bounds: it measures the batch against
    ``batch_size`` and is what the batch holds of ``buffer_memory``.
    """

    __slots__ = (
        "topic_partition",
        "created_ms",
        "result",
        "attempts",
        "retry_at_ms",
        "reserved_bytes",
        "record_count",
        "base_sequence",
        "_builder",
        "_records",
    )

    def __init__(
        self,
        topic_partition: TopicPartition,
        compression: CompressionType,
        created_ms: int,
        transactional: bool = False,
    ) -> None:
        self.topic_partition = topic_partition
        self.created_ms = created_ms
        self.result = ProduceRequestResult()
        self.attempts = 0
        self.retry_at_ms = 0
        self.reserved_bytes = 0
        self.record_count = 0
        self.base_sequence: int | None = None
        self._builder: RecordBatchBuilder | None = RecordBatchBuilder(
            compression, is_transactional=transactional
        )
        self._records: bytes | bytearray | None = None

    @property
    def estimated_size(self) -> int:
        """An upper bound of the bytes so far, uncompressed; the real size once built."""
        if self._records is not None:
            return len(self._records)
        return BATCH_HEADER_SIZE + self.reserved_bytes

    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        size: int,
        batch_size: int,
    ) -> FutureRecordMetadata | None:
        """Append the record, or return None when it needs a new batch.

        It does when this batch is closed, or holds records and ``size`` more bytes would take
        it past ``batch_size`` (a record larger than that gets a batch of its own).
        """
        builder = self._builder
        count = self.record_count
        if builder is None or (
            count and BATCH_HEADER_SIZE + self.reserved_bytes + size > batch_size
        ):
            return None
        builder.append_with_offset(count, timestamp, key, value, headers)
        self.reserved_bytes += size
        self.record_count = count + 1
        tp = self.topic_partition
        return FutureRecordMetadata(self.result, tp.topic, tp.partition, count, timestamp)

    def try_append_many(
        self,
        timestamp: int,
        keys: list[bytes | None] | None,
        values: list[bytes | None],
        start: int,
        batch_size: int,
    ) -> int:
        """Append records from ``start`` on (no headers) while the batch stays within
        ``batch_size``; the index of the first record not appended. An empty batch takes
        its first record whatever its size, as :meth:`try_append` does.

        The records' exact sizes count towards ``reserved_bytes``, where :meth:`try_append`
        counts an upper bound.
        """
        builder = self._builder
        if builder is None:
            return start
        before = builder.estimated_size_in_bytes
        room = batch_size - BATCH_HEADER_SIZE - self.reserved_bytes
        stopped = builder.append_many(timestamp, keys, values, start, len(values), before + room)
        if stopped == start and not self.record_count:
            stopped = builder.append_many(timestamp, keys, values, start, start + 1, 1 << 62)
        self.reserved_bytes += builder.estimated_size_in_bytes - before
        self.record_count += stopped - start
        return stopped

    def is_full(self, batch_size: int) -> bool:
        return self._builder is None or BATCH_HEADER_SIZE + self.reserved_bytes >= batch_size

    def close(self) -> bytes | bytearray:
        """Build the batch (compressing it) and refuse further appends; idempotent."""
        if self._records is None:
            self._records = self._builder.build()
            self._builder = None
        return self._records

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        """Number the built batch for an idempotent producer; a retry resends it as it is,
        so the broker recognises it."""
        records = bytearray(self.close())
        set_producer_state(records, 0, producer_id, epoch, base_sequence)
        self._records = records
        self.base_sequence = base_sequence

    def clear_producer_state(self) -> None:
        """Forget the batch's sequence (the producer's epoch was bumped: it is numbered again
        when next sent)."""
        self.base_sequence = None

    def complete(
        self, base_offset: int, log_append_time_ms: int = -1, error: KafkaError | None = None
    ) -> None:
        """Settle every record's future: offsets from ``base_offset``, or ``error``."""
        self.result.complete(base_offset, log_append_time_ms, error)
