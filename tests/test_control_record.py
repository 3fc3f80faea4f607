"""Control records: the transaction markers' layout and what a corrupt one is refused as."""

from __future__ import annotations

import pytest

from odradek.errors import CorruptRecordError
from odradek.record.control_record import ControlRecordType, EndTransactionMarker
from odradek.record.memory_records import MemoryRecords
from odradek.record.record import Record


def test_a_marker_is_key_version_and_type_and_value_version_and_coordinator_epoch() -> None:
    assert EndTransactionMarker(True, 7).key() == b"\x00\x00\x00\x01"
    assert EndTransactionMarker(False, 7).key() == b"\x00\x00\x00\x00"
    assert EndTransactionMarker(True, 7).value() == b"\x00\x00\x00\x00\x00\x07"


def test_a_marker_batch_is_transactional_and_control_with_the_producer() -> None:
    data = EndTransactionMarker(False, 2).to_batch(99, 4, 1_700_000_000_000, base_offset=17)

    (batch,) = MemoryRecords(data).batches()
    assert (batch.is_transactional, batch.is_control) == (True, True)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 4, -1)
    assert (batch.base_offset, batch.records_count) == (17, 1)
    batch.ensure_valid()
    (record,) = batch.records()
    assert EndTransactionMarker.from_record(record) == EndTransactionMarker(False, 2)


def test_kraft_control_types_are_known_and_later_ones_skipped() -> None:
    assert ControlRecordType.of_key(b"\x00\x00\x00\x02") is ControlRecordType.LEADER_CHANGE
    assert ControlRecordType.of_key(b"\x00\x00\x00\x63") is None


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (b"\x00\x00", b"\x00\x00\x00\x00\x00\x01", "key needs 4 bytes"),
        (b"\xff\xff\x00\x01", b"\x00\x00\x00\x00\x00\x01", "key version -1"),
        (b"\x00\x00\x00\x02", b"", "no marker"),
        (b"\x00\x00\x00\x01", b"\x00\x00", "value needs 6 bytes"),
        (b"\x00\x00\x00\x01", None, "value needs 6 bytes, not 0"),
        (b"\x00\x00\x00\x01", b"\xff\xff\x00\x00\x00\x01", "marker version -1"),
    ],
)
def test_a_corrupt_marker_is_refused_saying_what(
    key: bytes, value: bytes | None, message: str
) -> None:
    broken = Record(offset=0, timestamp=0, key=key, value=value)

    with pytest.raises(CorruptRecordError, match=message):
        EndTransactionMarker.from_record(broken)
