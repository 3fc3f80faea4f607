"""LogAppendInfo: what an append did, for the caller's response and metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LogAppendInfo:
    """The offsets and sizes of one successful append (Kafka's ``LogAppendInfo``)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    record_count: int
    batch_count: int
    valid_bytes: int
