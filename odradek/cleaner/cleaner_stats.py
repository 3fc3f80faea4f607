"""CleanerStats: what one cleaning run read, kept and wrote (Kafka's ``CleanerStats``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class CleanerStats:
    """Counters a run adds to as it goes; the cleaning process sends them back when done."""

    start_s: float = field(default_factory=time.monotonic)
    map_complete_s: float = -1.0
    end_s: float = -1.0
    map_bytes_read: int = 0
    map_records_read: int = 0
    bytes_read: int = 0
    records_read: int = 0
    invalid_records_read: int = 0
    bytes_written: int = 0
    records_written: int = 0
    buffer_utilization: float = 0.0
    throttled_s: float = 0.0

    def index_bytes_read(self, size: int, records: int) -> None:
        """A batch scanned while building the offset map."""
        self.map_bytes_read += size
        self.map_records_read += records

    def read_records(self, size: int, records: int) -> None:
        """A batch read while cleaning."""
        self.bytes_read += size
        self.records_read += records

    def invalid_records(self, count: int) -> None:
        """Records with no key: a compacted log cannot keep them."""
        self.invalid_records_read += count

    def recopy_records(self, size: int, records: int) -> None:
        """Kept records written to the cleaned segment."""
        self.bytes_written += size
        self.records_written += records

    def index_done(self) -> None:
        self.map_complete_s = time.monotonic()

    def all_done(self) -> None:
        self.end_s = time.monotonic()

    @property
    def elapsed_secs(self) -> float:
        return self.end_s - self.start_s

    @property
    def elapsed_index_secs(self) -> float:
        return self.map_complete_s - self.start_s
