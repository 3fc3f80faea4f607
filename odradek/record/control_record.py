"""Control records: the COMMIT and ABORT markers that end a transaction in each partition.

A control batch (attributes: transactional and control) holds one record. Its key is a version
(int16, 0) and the control type (int16: 0 ABORT, 1 COMMIT; KRaft's own types follow), its value
for a marker a version (int16, 0) and the coordinator epoch (int32) of the transaction
coordinator that wrote it. A consumer never sees control records; a read_committed consumer uses
them to close what the aborted-transaction list opened. Kafka's DumpLogSegments prints them as
``endTxnMarker: COMMIT coordinatorEpoch: N``.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from odradek.errors import CorruptRecordError
from odradek.record.record import Record
from odradek.record.record_batch import NO_PARTITION_LEADER_EPOCH
from odradek.record.record_batch_builder import RecordBatchBuilder

CONTROL_KEY = struct.Struct(">hh")
MARKER_VALUE = struct.Struct(">hi")
CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_MARKER_VALUE_VERSION = 0


class ControlRecordType(enum.IntEnum):
    """The control types Kafka defines (its ``ControlRecordType``); only the first two end
    transactions, the rest are KRaft's own metadata-log records."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def of_key(cls, key: bytes | memoryview | None) -> ControlRecordType | None:
        """The type a control record's key names; None for a type this broker does not know
        (a later Kafka's, skipped as Kafka skips it)."""
        if key is None or len(key) < CONTROL_KEY.size:
            raise CorruptRecordError(
                f"a control record key needs {CONTROL_KEY.size} bytes, not "
                f"{0 if key is None else len(key)}"
            )
        version, type_id = CONTROL_KEY.unpack_from(key)
        if version < 0:
            raise CorruptRecordError(f"control record key version {version}")
        try:
            return cls(type_id)
        except ValueError:
            return None


@dataclass(frozen=True)
class EndTransactionMarker:
    """The marker ending one producer's transaction in one partition."""

    committed: bool
    coordinator_epoch: int

    @property
    def control_type(self) -> ControlRecordType:
        return ControlRecordType.COMMIT if self.committed else ControlRecordType.ABORT

    def key(self) -> bytes:
        return CONTROL_KEY.pack(CURRENT_CONTROL_KEY_VERSION, self.control_type)

    def value(self) -> bytes:
        return MARKER_VALUE.pack(CURRENT_MARKER_VALUE_VERSION, self.coordinator_epoch)

    @classmethod
    def from_record(cls, record: Record) -> EndTransactionMarker:
        """The marker a control record holds; CorruptRecordError when it holds none."""
        control_type = ControlRecordType.of_key(record.key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise CorruptRecordError(f"control record of type {control_type} is no marker")
        value = record.value
        if value is None or len(value) < MARKER_VALUE.size:
            raise CorruptRecordError(
                f"an end transaction marker value needs {MARKER_VALUE.size} bytes, not "
                f"{0 if value is None else len(value)}"
            )
        version, coordinator_epoch = MARKER_VALUE.unpack_from(value)
        if version < 0:
            raise CorruptRecordError(f"end transaction marker version {version}")
        return cls(control_type is ControlRecordType.COMMIT, coordinator_epoch)

    def to_batch(
        self,
        producer_id: int,
        producer_epoch: int,
        timestamp: int,
        *,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> bytes:
        """The control batch that writes this marker for ``producer_id`` at ``producer_epoch``."""
        builder = RecordBatchBuilder(
            base_offset=base_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partition_leader_epoch=partition_leader_epoch,
            is_transactional=True,
            is_control=True,
        )
        builder.append(timestamp, self.key(), self.value(), ())
        return builder.build()
