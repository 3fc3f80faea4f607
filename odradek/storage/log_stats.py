"""Process-wide figures of log flushes and retention (as Kafka's static ``LogFlushStats``).

A Log does not know its broker, so these live beside the code that updates them, outside any
registry; every broker's metrics registry includes them (:mod:`odradek.server.metrics`).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

RETENTION_TIME = "time"
RETENTION_SIZE = "size"
RETENTION_LOG_START_OFFSET = "log_start_offset"
RETENTION_RULES = (RETENTION_TIME, RETENTION_SIZE, RETENTION_LOG_START_OFFSET)

LOG_FLUSH_SECONDS = Histogram(
    "odradek_log_flush_seconds",
    "Time one log flush spends fsyncing its segments (flush.ms, flush.messages, acks=all, roll).",
    buckets=FLUSH_BUCKETS,
    registry=None,
)
RETENTION_DELETED_SEGMENTS = Counter(
    "odradek_retention_deleted_segments",
    "Segments deleted by retention, by rule: time (retention.ms), size (retention.bytes) or "
    "log_start_offset (wholly below the log start offset, after delete-records).",
    ["rule"],
    registry=None,
)
RETENTION_DELETED_BYTES = Counter(
    "odradek_retention_deleted_bytes",
    "Bytes of the segments deleted by retention, by rule.",
    ["rule"],
    registry=None,
)
LOG_STATS = (LOG_FLUSH_SECONDS, RETENTION_DELETED_SEGMENTS, RETENTION_DELETED_BYTES)
"""Every figure of this module, for a registry to include."""

for _rule in RETENTION_RULES:
    RETENTION_DELETED_SEGMENTS.labels(_rule)
    RETENTION_DELETED_BYTES.labels(_rule)
