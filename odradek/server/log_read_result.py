"""LogReadResult: what reading one partition for a fetch gave (Kafka's ``LogReadResult``)."""

from __future__ import annotations

from typing import NamedTuple

from odradek.errors import KafkaError
from odradek.network.file_region import FileRegion
from odradek.protocol.values.fetch import AbortedTransaction, FetchPartition, FetchPartitionResponse
from odradek.server.partition import Partition
from odradek.storage.fetch_data_info import FetchDataInfo


class LogReadResult(NamedTuple):
    """The slice read from one partition, or the error that stopped the read (a tuple: one
    is made per partition of every fetch)."""

    request: FetchPartition
    partition: Partition | None = None
    info: FetchDataInfo | None = None
    error: KafkaError | None = None

    @property
    def size(self) -> int:
        return self.info.size_in_bytes if self.info is not None else 0

    def to_response(self) -> FetchPartitionResponse:
        """The partition's entry in the fetch response; its records go out with sendfile."""
        request = self.request
        if self.error is not None:
            # The offsets go with an error too (OFFSET_OUT_OF_RANGE): clients read the valid
            # range from them, not from the message.
            known = self.partition is not None
            return FetchPartitionResponse(
                request.topic,
                request.partition,
                self.error.code,
                self.error.message,
                high_watermark=self.partition.log.high_watermark if known else -1,
                log_start_offset=self.partition.log.log_start_offset if known else -1,
            )
        log = self.partition.log
        high_watermark = log.high_watermark
        info = self.info
        slice_ = info.records
        aborted = info.aborted_transactions
        return FetchPartitionResponse(
            request.topic,
            request.partition,
            0,
            None,
            high_watermark,
            log.log_start_offset,
            # The last stable offset, whatever the isolation (as Kafka answers it): the HW
            # unless a transaction is open or its marker not yet committed.
            log.last_stable_offset if log.producer_state.unstable else high_watermark,
            FileRegion(slice_) if slice_ is not None and slice_.length else b"",
            tuple([AbortedTransaction(a.producer_id, a.first_offset) for a in aborted])
            if aborted
            else (),
        )
