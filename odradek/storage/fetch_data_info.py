"""FetchDataInfo and FetchIsolation: what a read returns and how far it may read (design §6)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from odradek.storage.file_records import FileSlice
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.transaction_index import AbortedTxn


class FetchIsolation(Enum):
    """The upper bound of a read: the high watermark for consumers (read_uncommitted), the
    last stable offset for read_committed consumers, the log end for replicas."""

    HIGH_WATERMARK = "high_watermark"
    LOG_END = "log_end"
    TXN_COMMITTED = "txn_committed"


@dataclass(frozen=True)
class FetchDataInfo:
    """The records a read found, as a file slice, and where the fetch offset sits on disk.

    ``records`` is None when there is nothing to return (a read at the end of the log).
    ``aborted_transactions``: for a read_committed read that found records, the aborted
    transactions overlapping them (None for the other isolations).
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice | None
    first_entry_incomplete: bool = False
    aborted_transactions: tuple[AbortedTxn, ...] | None = None

    @property
    def size_in_bytes(self) -> int:
        return self.records.length if self.records is not None else 0
