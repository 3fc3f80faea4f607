"""ListOffsets' target timestamps that name no time but a place in the partition (Kafka's
ListOffsetsRequest constants): what both protocols' handlers and the log look them up by."""

from __future__ import annotations

EARLIEST_TIMESTAMP = -2
"""Target timestamp meaning the log start offset."""
LATEST_TIMESTAMP = -1
"""Target timestamp meaning the high watermark (or the log end offset with ``log_end``)."""
MAX_TIMESTAMP = -3
"""Target timestamp meaning the record with the largest timestamp (Kafka's ListOffsets v7+)."""
