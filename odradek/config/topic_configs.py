"""The topic-level keys (Kafka's ``LogConfig`` definitions), with Kafka's defaults."""

from __future__ import annotations

from odradek.config.config_def import ConfigDef
from odradek.config.config_key import ConfigKey
from odradek.config.config_type import ConfigType
from odradek.config.importance import Importance
from odradek.config.validator import Validator
from odradek.int_limits import INT64_MAX

INT, LONG, DOUBLE = ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE
BOOLEAN, STRING, LIST = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.LIST
MEDIUM = Importance.MEDIUM

DAY_MS = 24 * 3600 * 1000
WEEK_MS = 7 * DAY_MS
MIB = 1024 * 1024

# Kafka 4.0's floor (KIP-1030; it was 14 bytes before): a segment costs files, a descriptor
# while active, index maps and a roll, so one-record segments are a way to exhaust a broker's
# descriptors and time. Code and tests that need smaller segments build a LogConfig directly.
MIN_SEGMENT_BYTES = 1024 * 1024
# Kafka's floor from 5.0 (KIP-1030; 4 bytes before): an index too small for an entry is full at
# once and rolls the segment on every append, whatever segment.bytes says.
MIN_SEGMENT_INDEX_BYTES = 1024
# The floors raised since overrides were first stored: a stored value below one loads at it.
RAISED_FLOORS = {"segment.bytes": MIN_SEGMENT_BYTES, "segment.index.bytes": MIN_SEGMENT_INDEX_BYTES}
# A legitimate batch rarely compresses 10:1; 32 leaves room, and caps a decompression bomb
# at 32 MiB under the default max.message.bytes.
DEFAULT_DECOMPRESSION_MAX_RATIO = 32
CLEANUP_POLICIES = ("delete", "compact")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")

TOPIC_CONFIG_DEF = ConfigDef(
    [
        ConfigKey("segment.bytes", INT, 1024 * MIB, MEDIUM,
                  "Size at which the active segment is rolled to a new one. At least 1 MiB, as "
                  "in Kafka 4.0, so that no topic can make a segment of every record.",
                  Validator.at_least(MIN_SEGMENT_BYTES)),
        ConfigKey("segment.ms", LONG, WEEK_MS, MEDIUM,
                  "Age after which a non-empty active segment is rolled even if not full, so "
                  "retention and compaction can act on it. The age is record time, as in "
                  "Kafka: from the max timestamp of the segment's first batch to that of the "
                  "batch being appended (by the clock from the segment's creation when the "
                  "first batch has no timestamp).",
                  Validator.at_least(1)),
        ConfigKey("segment.jitter.ms", LONG, 0, MEDIUM,
                  "Upper bound of a random amount taken off segment.ms per segment, so that many "
                  "partitions do not roll at the same moment.",
                  Validator.at_least(0)),
        ConfigKey("segment.index.bytes", INT, 10 * MIB, MEDIUM,
                  "Size the offset and time indexes are preallocated to; a full index rolls the "
                  "segment. At least 1 KiB (Kafka's floor from 5.0), so that an index always "
                  "has room for entries and no topic can roll a segment on every append.",
                  Validator.at_least(MIN_SEGMENT_INDEX_BYTES)),
        ConfigKey("index.interval.bytes", INT, 4096, MEDIUM,
                  "Bytes of records written between two offset index entries (sparser index, "
                  "longer scans).",
                  Validator.at_least(0)),
        ConfigKey("retention.ms", LONG, WEEK_MS, MEDIUM,
                  "Age after which a segment is deleted under the delete policy; -1 keeps data "
                  "forever.",
                  Validator.at_least(-1)),
        ConfigKey("retention.bytes", LONG, -1, MEDIUM,
                  "Size a partition may grow to before its oldest segments are deleted under the "
                  "delete policy; -1 means no limit.",
                  Validator.at_least(-1)),
        ConfigKey("cleanup.policy", LIST, ("delete",), MEDIUM,
                  "What happens to old segments: delete them (retention), compact them (keep the "
                  "latest record per key), or both.",
                  Validator.one_of(*CLEANUP_POLICIES)),
        ConfigKey("max.message.bytes", INT, 1048588, MEDIUM,
                  "Largest record batch the broker accepts for this topic.",
                  Validator.at_least(0)),
        ConfigKey("message.decompression.max.ratio", INT, DEFAULT_DECOMPRESSION_MAX_RATIO, MEDIUM,
                  "How many times max.message.bytes the records of one compressed batch may "
                  "take once decompressed; the codec is stopped at that size and the produce "
                  "refused with RECORD_LIST_TOO_LARGE, so a small batch cannot expand without "
                  "bound (odradek's own key).",
                  Validator.at_least(1)),
        ConfigKey("message.timestamp.type", STRING, "CreateTime", MEDIUM,
                  "Whether record timestamps are the producer's (CreateTime) or the broker's "
                  "append time (LogAppendTime).",
                  Validator.one_of(*TIMESTAMP_TYPES)),
        ConfigKey("message.timestamp.before.max.ms", LONG, INT64_MAX, MEDIUM,
                  "How far a CreateTime timestamp may lie before the broker's clock; older "
                  "batches are refused.",
                  Validator.at_least(0)),
        ConfigKey("message.timestamp.after.max.ms", LONG, 3_600_000, MEDIUM,
                  "How far a CreateTime timestamp may lie after the broker's clock; batches "
                  "further in the future are refused (Kafka 4's default: one hour).",
                  Validator.at_least(0)),
        ConfigKey("flush.messages", LONG, INT64_MAX, MEDIUM,
                  "Records appended before the log is forced to disk with fsync; by default the "
                  "OS writes data back on its own.",
                  Validator.at_least(1)),
        ConfigKey("flush.ms", LONG, INT64_MAX, MEDIUM,
                  "Time after which unflushed data is forced to disk with fsync.",
                  Validator.at_least(0)),
        ConfigKey("file.delete.delay.ms", LONG, 60000, MEDIUM,
                  "Time a deleted segment's files stay on disk (renamed .deleted) before removal, "
                  "so in-flight reads can finish.",
                  Validator.at_least(0)),
        ConfigKey("preallocate", BOOLEAN, False, MEDIUM,
                  "Preallocate the file of a new segment to segment.bytes."),
        ConfigKey("delete.retention.ms", LONG, DAY_MS, MEDIUM,
                  "How long a tombstone (null value) is kept after the first cleaning that kept "
                  "it (its batch's delete horizon), so consumers can see the delete.",
                  Validator.at_least(0)),
        ConfigKey("min.compaction.lag.ms", LONG, 0, MEDIUM,
                  "Minimum age of a record before compaction may remove it.",
                  Validator.at_least(0)),
        ConfigKey("max.compaction.lag.ms", LONG, INT64_MAX, MEDIUM,
                  "Maximum age of an uncompacted record: past it the log is cleaned whatever its "
                  "dirty ratio.",
                  Validator.at_least(1)),
        ConfigKey("min.cleanable.dirty.ratio", DOUBLE, 0.5, MEDIUM,
                  "Share of the log that must be uncompacted (dirty) before the cleaner picks it.",
                  Validator.between(0, 1)),
        ConfigKey("compression.type", STRING, "producer", MEDIUM,
                  "Compression of stored batches; producer keeps the producer's compression.",
                  Validator.one_of(*COMPRESSION_TYPES)),
    ]
)
