"""One partition's share of a fetch response, turned into records as the consumer drains it."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

from odradek.client.consumer_record import ConsumerRecord
from odradek.errors import KafkaError, MessageTooLargeError
from odradek.protocol.fetch import FetchPartitionResponse
from odradek.record.memory_records import MemoryRecords
from odradek.topic_partition import TopicPartition


class CompletedFetch:
    """Records of one partition from ``fetch_offset`` on, parsed lazily batch by batch.

    The data starts with the batch holding ``fetch_offset`` (a batch is sent whole), so
    records below it are skipped; it may end inside a batch, and that partial batch is
    dropped (it is fetched again whole next time). Control batches are skipped.
    ``next_offset`` is where the consumer's position moves to: past the last record handed
    out, and past a batch's end once the batch is exhausted (compaction may have removed its
    last records).
    """

    def __init__(
        self,
        topic_partition: TopicPartition,
        fetch_offset: int,
        response: FetchPartitionResponse,
        check_crcs: bool,
    ) -> None:
        self.topic_partition = topic_partition
        self.fetch_offset = fetch_offset
        self.next_offset = fetch_offset
        self.response = response
        self._check_crcs = check_crcs
        self._records = self._parse()
        self._error: KafkaError | None = None

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` more records; fewer means the fetch is exhausted.

        A corrupt batch raises CorruptRecordError, but only once the records before it have
        been handed out (``next_offset`` then points at the corrupt batch).
        """
        if self._error is not None:
            raise self._error
        records: list[ConsumerRecord] = []
        try:
            records.extend(islice(self._records, max_records))
        except KafkaError as error:
            if not records:
                raise
            self._error = error
        return records

    def _parse(self) -> Iterator[ConsumerRecord]:
        topic = self.topic_partition.topic
        partition = self.topic_partition.partition
        start = self.fetch_offset
        whole_batches = False
        for batch in MemoryRecords(self.response.records).batches():
            whole_batches = True
            if batch.next_offset <= start:
                continue
            if self._check_crcs:
                batch.ensure_valid()
            if not batch.is_control:
                timestamp_type = batch.timestamp_type
                for record in batch.records():
                    offset = record.offset
                    if offset >= start:
                        self.next_offset = offset + 1
                        yield ConsumerRecord(
                            topic,
                            partition,
                            offset,
                            record.timestamp,
                            timestamp_type,
                            record.key,
                            record.value,
                            record.headers,
                        )
            self.next_offset = batch.next_offset
        if not whole_batches and len(self.response.records):
            raise MessageTooLargeError(
                f"{self.topic_partition} at offset {start}: the {len(self.response.records)} "
                "bytes fetched hold no whole batch; raise max_partition_fetch_bytes"
            )
