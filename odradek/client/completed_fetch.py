"""One partition's share of a fetch response, turned into records as the consumer drains it."""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from odradek.client.consumer_record import ConsumerRecord
from odradek.errors import KafkaError, MessageTooLargeError
from odradek.protocol.values.fetch import FetchPartitionResponse
from odradek.record.control_record import ControlRecordType
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import RecordBatch
from odradek.topic_partition import TopicPartition


class CompletedFetch:
    """Records of one partition from ``fetch_offset`` on, parsed lazily batch by batch.

    The data starts with the batch holding ``fetch_offset`` (a batch is sent whole), so
    records below it are skipped; it may end inside a batch, and that partial batch is
    dropped (it is fetched again whole next time). Control batches (transaction markers) are
    never handed out, whatever the isolation. ``next_offset`` is where the consumer's position
    moves to: past the last record handed out, and past a batch's end once the batch is
    exhausted (compaction may have removed its last records, a batch may be skipped).

    ``read_committed`` (Kafka's CompletedFetch under READ_COMMITTED): the response lists the
    aborted transactions in the range, by producer and first offset; a transactional batch
    of a producer whose aborted transaction has begun at or before the batch's last offset,
    and whose ABORT marker has not come yet, is skipped.
    """

    def __init__(
        self,
        topic_partition: TopicPartition,
        fetch_offset: int,
        response: FetchPartitionResponse,
        check_crcs: bool,
        read_committed: bool = False,
    ) -> None:
        self.topic_partition = topic_partition
        self.fetch_offset = fetch_offset
        self.next_offset = fetch_offset
        self.response = response
        self._check_crcs = check_crcs
        self._read_committed = read_committed
        self._aborted = [(a.first_offset, a.producer_id) for a in response.aborted_transactions]
        heapq.heapify(self._aborted)  # aborted transactions not reached yet, by first offset
        self._aborted_producers: set[int] = set()  # producers inside an aborted transaction
        self._batches = self._parse()
        self._batch: list[ConsumerRecord] = []  # the records of the batch being handed out
        self._taken = 0  # how many of them are handed out
        self._batch_end: int | None = None  # the next offset after that batch
        self._error: KafkaError | None = None

    def end_offset(self) -> int | None:
        """Where the data fetched ends: the offset after its last whole batch (the fetch
        offset when it holds no records); None when it cannot be read on from there (an
        error, or data but no whole batch). The next fetch of the partition may start there
        before this one is drained. Reads only the batches' headers."""
        if self.response.error:
            return None
        end = None
        try:
            for batch in MemoryRecords(self.response.records).batches():
                end = batch.next_offset
        except KafkaError:
            return None
        if end is None:
            return None if len(self.response.records) else self.fetch_offset
        return max(end, self.fetch_offset)

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` more records; fewer means the fetch is exhausted.

        A corrupt batch raises CorruptRecordError, but only once the records before it have
        been handed out (``next_offset`` then points at the corrupt batch).
        """
        if self._error is not None:
            raise self._error
        records: list[ConsumerRecord] = []
        try:
            while len(records) < max_records:
                batch, taken = self._batch, self._taken
                if taken < len(batch):
                    part = batch[taken : taken + max_records - len(records)]
                    self._taken = taken + len(part)
                    records += part
                    self.next_offset = part[-1].offset + 1
                    continue
                if self._batch_end is not None:
                    self.next_offset, self._batch_end = self._batch_end, None
                next_batch = next(self._batches, None)
                if next_batch is None:
                    break
                self._batch, self._batch_end = next_batch
                self._taken = 0
        except KafkaError as error:
            if not records:
                raise
            self._error = error
        return records

    def _parse(self) -> Iterator[tuple[list[ConsumerRecord], int]]:
        """Each batch's records from ``fetch_offset`` on (decoded in one call a batch), and
        the offset after the batch."""
        topic = self.topic_partition.topic
        partition = self.topic_partition.partition
        start = self.fetch_offset
        whole_batches = False
        for batch in MemoryRecords(self.response.records).batches():
            whole_batches = True
            next_offset = batch.next_offset
            if next_offset <= start:
                continue
            if self._check_crcs:
                batch.ensure_valid()
            if self._read_committed and batch.producer_id >= 0:
                self._reach_aborted_transactions(batch.last_offset)
                if batch.is_control:
                    if _is_abort_marker(batch):
                        self._aborted_producers.discard(batch.producer_id)
                    yield [], next_offset
                    continue
                if batch.is_transactional and batch.producer_id in self._aborted_producers:
                    yield [], next_offset  # an aborted transaction's records
                    continue
            if batch.is_control:
                yield [], next_offset
            else:
                yield batch.record_tuples(start, ConsumerRecord, topic, partition), next_offset
        if not whole_batches and len(self.response.records):
            raise MessageTooLargeError(
                f"{self.topic_partition} at offset {start}: the {len(self.response.records)} "
                "bytes fetched hold no whole batch; raise max_partition_fetch_bytes"
            )

    def _reach_aborted_transactions(self, offset: int) -> None:
        """Aborted transactions that began at or before ``offset``: their producers' batches
        are skipped from now on, until their ABORT markers."""
        aborted = self._aborted
        while aborted and aborted[0][0] <= offset:
            self._aborted_producers.add(heapq.heappop(aborted)[1])


def _is_abort_marker(batch: RecordBatch) -> bool:
    """Whether a control batch is a transaction's ABORT marker (its one record's key)."""
    for record in batch.records():
        return ControlRecordType.of_key(record.key) is ControlRecordType.ABORT
    return False
