"""TransactionIndex: a segment's list of aborted transactions, Kafka's ``.txnindex`` file.

A read_committed fetch must tell its consumer which transactions to drop; the index of each
segment lists the transactions whose ABORT marker that segment holds, so the aborted ranges
that overlap a fetch are found without reading the records.

The file is a sequence of 34-byte entries (Kafka's ``AbortedTxn``), all big-endian:

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64 |
    last_stable_offset int64

``first_offset`` is the transaction's first record, ``last_offset`` its ABORT marker, and
``last_stable_offset`` the partition's last stable offset once the marker was written: every
transaction that could overlap a read ends before it, which lets a search stop early.

As Kafka's, the file is created by the first append (most segments see no abort), appends go
to its end, and a tail shorter than an entry (a torn write) is not read; recovery rebuilds the
entries of the markers it replays, and an append cuts a torn tail first, so a torn tail never
sits before a later entry. The index holds no descriptor between calls: an abort is rare, and
a read reads the whole (small) file at once; a flush syncs only what changed since the last.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from odradek.errors import CorruptIndexError

logger = logging.getLogger(__name__)

ABORTED_TXN = struct.Struct(">hqqqq")
CURRENT_VERSION = 0


@dataclass(frozen=True)
class AbortedTxn:
    """One aborted transaction of one producer, as the index stores it."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def to_bytes(self) -> bytes:
        return ABORTED_TXN.pack(
            self.version,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


@dataclass(frozen=True)
class TxnIndexSearchResult:
    """The aborted transactions overlapping a range, and whether the search may stop here
    (``is_complete``) or must go on into the next segment's index."""

    aborted_transactions: tuple[AbortedTxn, ...]
    is_complete: bool


class TransactionIndex:
    """The ``.txnindex`` of the segment based at ``start_offset``."""

    def __init__(self, start_offset: int, path: Path) -> None:
        self.start_offset = start_offset
        self._path = path
        # The last appended entry's last offset, as Kafka keeps it: unknown after opening
        # (recovery resets the index of any segment it rebuilds before appending to it).
        self._last_offset: int | None = None
        self._unflushed = False
        # Whether the file exists, once known: every change to it goes through this object
        # (appends, renames, deletion), so a read_committed fetch looking through the many
        # segments that never saw an abort costs no system call after the first.
        self._has_file: bool | None = None

    @property
    def path(self) -> Path:
        return self._path

    def rename_to(self, path: Path) -> None:
        """Rename the file (if it exists yet); the index is at ``path`` from now on."""
        try:
            if self._path.exists():
                os.replace(self._path, path)
        finally:
            self._path = path

    def append(self, aborted: AbortedTxn) -> None:
        """Add ``aborted`` at the end; its last offset must exceed the last appended one."""
        if self._last_offset is not None and self._last_offset >= aborted.last_offset:
            raise ValueError(
                f"the last offset of appended transactions must increase: "
                f"{aborted.last_offset} is not greater than {self._last_offset} "
                f"in {self._path}"
            )
        descriptor = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            torn = os.fstat(descriptor).st_size % ABORTED_TXN.size
            if torn:
                size = os.fstat(descriptor).st_size - torn
                logger.warning(
                    "%s: cutting a torn entry of %d bytes at byte %d", self._path, torn, size
                )
                os.ftruncate(descriptor, size)
            os.write(descriptor, aborted.to_bytes())
        finally:
            os.close(descriptor)
        self._has_file = True
        self._last_offset = aborted.last_offset
        self._unflushed = True

    def flush(self) -> None:
        """Make the entries durable: nothing to do unless they changed since the last flush
        (most segments never have a file)."""
        if not self._unflushed:
            return
        self._unflushed = False
        try:
            descriptor = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(descriptor)
        except OSError:
            self._unflushed = True
            raise
        finally:
            os.close(descriptor)

    def reset(self) -> None:
        """Remove every entry (recovery appends them again from the records)."""
        self._truncate(0)
        self._last_offset = None

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions whose marker is at or after ``offset`` (and a torn
        tail)."""
        last_kept: int | None = None
        if self._has_file is False:
            return
        try:
            size = self._path.stat().st_size
        except FileNotFoundError:
            self._has_file = False
            return
        end = size
        for position, aborted in self._entries():
            if aborted.last_offset >= offset:
                end = position
                break
            last_kept = aborted.last_offset
        else:
            end = size - size % ABORTED_TXN.size
        if end != size:
            self._truncate(end)
            self._unflushed = True
        self._last_offset = last_kept

    def delete_if_exists(self) -> bool:
        """Delete the file; whether it existed."""
        self._has_file = False
        try:
            self._path.unlink()
        except FileNotFoundError:
            return False
        return True

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [aborted for _, aborted in self._entries()]

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """The aborted transactions overlapping [``fetch_offset``, ``upper_bound_offset``).

        The search is complete once an entry's last stable offset reaches the upper bound: no
        transaction aborted later can have started before it."""
        found = []
        for _, aborted in self._entries():
            if aborted.last_offset >= fetch_offset and aborted.first_offset < upper_bound_offset:
                found.append(aborted)
            if aborted.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(tuple(found), True)
        return TxnIndexSearchResult(tuple(found), False)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for an entry that ends before this segment starts."""
        for _, aborted in self._entries():
            if aborted.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"last offset of aborted transaction {aborted} in {self._path} is less "
                    f"than the segment's start offset {self.start_offset}"
                )

    def _entries(self) -> list[tuple[int, AbortedTxn]]:
        """(position, entry) of every whole entry; a torn tail is not read."""
        if self._has_file is False:
            return []
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            self._has_file = False
            return []
        self._has_file = True
        entries = []
        for position in range(0, len(data) - ABORTED_TXN.size + 1, ABORTED_TXN.size):
            version, producer_id, first, last, stable = ABORTED_TXN.unpack_from(data, position)
            if version > CURRENT_VERSION:
                raise CorruptIndexError(
                    f"aborted transaction version {version} at byte {position} of {self._path}; "
                    f"this broker reads version {CURRENT_VERSION}"
                )
            entries.append((position, AbortedTxn(producer_id, first, last, stable, version)))
        return entries

    def _truncate(self, size: int) -> None:
        try:
            os.truncate(self._path, size)
        except FileNotFoundError:
            pass
