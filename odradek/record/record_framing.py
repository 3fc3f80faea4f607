"""The framing walk over a producer batch's records: the append path's per-record check.

Before a batch is accepted every record must frame exactly (design §4 step 1): its length varint
lands on the next record, its fields end where its length says, its offsetDelta is its index,
and the records fill the batch.

The walk runs in C (``_record_scan.c``, built with the package) where that module is present,
about ten times faster than this Python walk (docs/native.md has the figures).
The C walk only gives a verdict; when it rejects a batch this module walks it again in Python
to raise the error that names the record and byte at fault. Where the C module is missing (a
build without a C compiler) the Python walk does all the work.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from odradek.errors import CorruptRecordError, InvalidRecordError
from odradek.record.record import decode_varint, decode_varlong

try:
    from odradek.record._record_scan import walk_records as _native_walk
except ImportError:  # built without a C compiler: the Python walk below does the work
    _native_walk = None
    logging.getLogger(__name__).warning(
        "odradek.record._record_scan is not built; record batches are validated in Python, "
        "several times slower (install a C compiler and reinstall odradek)"
    )

Buffer = bytes | bytearray

MIN_RECORD_SIZE = 7  # length, attributes, timestampDelta, offsetDelta, key/value lengths, headers

_ABOVE_ANY_DELTA = 2**64
_BELOW_ANY_DELTA = -(2**64)


class RecordFraming(NamedTuple):
    """What the walk learned: the spread of timestamp deltas and where the largest is.

    A named tuple: one is made per batch on the append path, and a tuple is made in a tenth
    of the time a frozen dataclass takes.
    """

    min_timestamp_delta: int
    max_timestamp_delta: int
    index_of_max_timestamp: int


def check_framing(
    data: Buffer, position: int, end: int, count: int, *, keys_required: bool
) -> RecordFraming:
    """Walk the ``count`` (at least one) records in ``data[position:end]``; prove they frame.

    CorruptRecordError (InvalidRecordError for a null key when ``keys_required``) names the
    record index and byte position of the first fault.
    """
    if count < 1 or count > (end - position) // MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"recordsCount {count} cannot fit in {end - position} bytes of records"
        )
    if _native_walk is not None:
        framing = _native_walk(data, position, end, count, keys_required)
        if framing is not None:
            return RecordFraming._make(framing)
    framing = _walk(data, position, end, count, keys_required)
    if _native_walk is not None:  # the two walks disagree: trust the stricter
        raise CorruptRecordError(f"records at byte {position} do not frame")
    return framing


def _walk(data: Buffer, position: int, end: int, count: int, keys_required: bool) -> RecordFraming:
    """The per-record loop: it raises the error naming the fault, and is the whole check where
    the C walk is not built."""
    min_delta = _ABOVE_ANY_DELTA
    max_delta = _BELOW_ANY_DELTA
    index_of_max = 0
    for index in range(count):
        start = position
        try:
            delta, has_key, position = _check_record(data, position, end, index)
        except CorruptRecordError as error:
            raise CorruptRecordError(f"record {index} at byte {start}: {error.message}") from None
        if keys_required and not has_key:
            raise InvalidRecordError(
                f"record {index} at byte {start} has no key, which a compacted topic requires"
            )
        if delta > max_delta:
            max_delta = delta
            index_of_max = index
        min_delta = min(min_delta, delta)
    if position != end:
        raise CorruptRecordError(
            f"{end - position} bytes at byte {position} follow the {count} declared records"
        )
    return RecordFraming(min_delta, max_delta, index_of_max)


def _check_record(data: Buffer, position: int, end: int, index: int) -> tuple[int, bool, int]:
    """Prove the record at ``position`` frames; its timestamp delta, whether it has a key,
    and where the next record starts."""
    length, position = decode_varint(data, position)
    record_end = position + length
    if length < 0 or record_end > end:
        raise CorruptRecordError(f"length {length} overruns the batch end at byte {end}")
    delta, position = decode_varlong(data, position + 1)  # after the attributes byte
    offset_delta, position = decode_varint(data, position)
    if offset_delta != index:
        raise CorruptRecordError(f"offsetDelta is {offset_delta}, expected {index}")
    key_length, position = _skip_field(data, position, "key")
    _, position = _skip_field(data, position, "value")
    count, position = decode_varint(data, position)
    if count < 0:
        raise CorruptRecordError(f"header count {count} is negative")
    for header in range(count):
        length, position = decode_varint(data, position)
        if length < 0:
            raise CorruptRecordError(f"header {header} has key length {length}")
        _check_header_key(data, position, length, header)
        _, position = _skip_field(data, position + length, f"header {header} value")
        if position > record_end:
            raise CorruptRecordError(f"header {header} overruns the record end")
    if position != record_end:
        raise CorruptRecordError(f"fields end at byte {position}, length says {record_end}")
    return delta, key_length >= 0, position


def _check_header_key(data: Buffer, position: int, length: int, header: int) -> None:
    """A header key is a string to every client: some (kafka-python) fail a whole fetch on
    one that does not decode, so none is stored."""
    try:
        bytes(data[position : position + length]).decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorruptRecordError(
            f"header {header} key is not UTF-8 ({error.reason} at byte "
            f"{position + error.start})"
        ) from None


def _skip_field(data: Buffer, position: int, name: str) -> tuple[int, int]:
    """Step over a length-prefixed field that may be null; its length and where it ends."""
    length, position = decode_varint(data, position)
    if length < -1:
        raise CorruptRecordError(f"{name} length {length} is negative")
    return length, position + max(length, 0)
