"""How far a read may see into a partition (Kafka's ``FetchIsolation``)."""

from __future__ import annotations

from enum import StrEnum


class IsolationLevel(StrEnum):
    """``high_watermark``: committed records only (consumers, Kafka's read_uncommitted);
    ``txn_committed``: up to the last stable offset, with the aborted transactions listed
    (Kafka's read_committed); ``log_end``: everything appended."""

    HIGH_WATERMARK = "high_watermark"
    LOG_END = "log_end"
    TXN_COMMITTED = "txn_committed"
