"""DeleteRecords' target offset that names no offset but a place in the partition (Kafka's
DeleteRecordsRequest.HIGH_WATERMARK): what both protocols' requests and the ReplicaManager read."""

from __future__ import annotations

HIGH_WATERMARK_OFFSET = -1
"""Delete everything below the high watermark."""
