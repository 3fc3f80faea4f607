"""Producer state snapshots in Kafka's format: ``<offset>.snapshot`` (20-digit offset), the
producer map as it stood at that offset, so start-up replays only the batches after it.

Layout (big-endian), version 1 as Kafka's ``ProducerStateManager`` writes it: ``version``
int16, ``crc`` uint32 (CRC-32C of everything after it), then an int32 count of entries, each
``producer_id`` int64, ``epoch`` int16, ``last_sequence`` int32, ``last_offset`` int64,
``offset_delta`` int32, ``timestamp`` int64, ``coordinator_epoch`` int32,
``current_txn_first_offset`` int64.

Kafka writes one row per producer, its last batch. odradek writes a row for each batch the
producer's entry retains (up to five, oldest first, the last one Kafka's row): a producer that
had several batches in flight when the broker stopped retries them after the restart, and each
retry is then recognised and answered with its offsets, as it would have been before the stop
(with one row, every retry but the last one's was refused as out of order). Kafka's reader
keeps the last row of each producer id, so Kafka reads these files as its own. Every row of a
producer carries its coordinator epoch and the first offset of its open transaction (-1 for
none), as Kafka's one row does: a transaction open at the snapshot stays open after a restart.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from odradek.storage.atomic_file import write_atomically
from odradek.storage.log_file_names import filename_prefix_from_offset, offset_from_file_name
from odradek.storage.producer_state_entry import NO_COORDINATOR_EPOCH, NO_TXN_FIRST_OFFSET

SNAPSHOT_FILE_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOT_VERSION = 1

_HEADER = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(Exception):
    """A snapshot file failed its version, length or CRC check (``CorruptSnapshotException``);
    the caller deletes it and rebuilds the state from an older snapshot or the log."""


class SnapshotEntry(NamedTuple):
    """One producer's row in a snapshot."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    current_txn_first_offset: int = NO_TXN_FIRST_OFFSET


def snapshot_file(directory: Path, offset: int) -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{SNAPSHOT_FILE_SUFFIX}"


def is_snapshot_file(name: str) -> bool:
    return name.endswith(SNAPSHOT_FILE_SUFFIX) and len(name) == 20 + len(SNAPSHOT_FILE_SUFFIX)


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the snapshot files in ``directory``, ascending."""
    offsets = []
    for path in directory.iterdir():
        if is_snapshot_file(path.name):
            try:
                offsets.append(offset_from_file_name(path.name))
            except ValueError:
                continue
    return sorted(offsets)


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    rows = list(entries)
    body = bytearray(_COUNT.pack(len(rows)))
    for row in rows:
        body += _ENTRY.pack(*row)
    return _HEADER.pack(PRODUCER_SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes, name: str = "snapshot") -> list[SnapshotEntry]:
    """The entries of a snapshot's bytes; CorruptSnapshotError naming what is wrong."""
    if len(data) < _HEADER.size + _COUNT.size:
        raise CorruptSnapshotError(f"{name}: {len(data)} bytes is too short for a snapshot")
    version, crc = _HEADER.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{name}: unknown snapshot version {version}")
    computed = crc32c(data[_HEADER.size :])
    if computed != crc:
        raise CorruptSnapshotError(
            f"{name}: CRC mismatch: stored {crc:#010x}, computed {computed:#010x}"
        )
    (count,) = _COUNT.unpack_from(data, _HEADER.size)
    start = _HEADER.size + _COUNT.size
    if count < 0 or len(data) != start + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{name}: {count} entries do not fill {len(data)} bytes")
    return [
        SnapshotEntry._make(_ENTRY.unpack_from(data, start + index * _ENTRY.size))
        for index in range(count)
    ]


def write_snapshot(path: Path, entries: Iterable[SnapshotEntry]) -> None:
    """Write a snapshot durably (temp file, fsync, rename, directory fsync)."""
    write_atomically(path, encode_snapshot(entries))


def read_snapshot(path: Path) -> list[SnapshotEntry]:
    return decode_snapshot(path.read_bytes(), path.name)
