"""FileRecords: a segment's ``.log`` file, a concatenation of record batches (SPEC 3, 6)."""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.record.batch_header import BatchHeader
from odradek.record.record_batch import (
    BATCH_LENGTH_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    RecordBatch,
    crc_of,
)
from odradek.storage.writeback import MAX_WRITE_BYTES, write_back

try:
    from odradek.record import _record_scan
except ImportError:  # record_framing warns once that the C checks are not built
    _record_scan = None

_SCAN_CHUNK_BYTES = 1024 * 1024
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


@dataclass(frozen=True)
class LogOffsetPosition:
    """Where the batch holding an offset starts: its last offset, file position and size."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True)
class TimestampAndOffset:
    """A record's timestamp and offset (ListOffsets by time, segment max timestamp)."""

    timestamp: int
    offset: int


@dataclass(frozen=True)
class FileSlice:
    """``length`` bytes of a ``.log`` file from ``position``: what a fetch sends with sendfile.

    It may end in the middle of a batch; readers drop a trailing partial batch.
    """

    file: FileRecords
    position: int
    length: int

    @property
    def fd(self) -> int:
        return self.file.fd

    @property
    def path(self) -> Path:
        return self.file.path

    def read_bytes(self) -> bytes:
        """The slice's bytes, copied (the fallback when zero copy is not possible, and tests)."""
        return self.file.read(self.position, self.length)


class FileRecords:
    """An open ``.log`` file: appends at its end, reads by position, scans batch headers.

    The size is tracked in memory rather than taken from the file so a preallocated file
    (``preallocate=true``) and concurrent readers see only whole appended batches.
    """

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self._path = path
        self._fd = fd
        self._size = size

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
    ) -> FileRecords:
        flags = os.O_RDWR | (0 if file_already_exists else os.O_CREAT)
        fd = os.open(path, flags, 0o644)
        try:
            if file_already_exists:
                size = os.fstat(fd).st_size
            else:
                size = 0
                if preallocate and init_file_size > 0:
                    os.posix_fallocate(fd, 0, init_file_size)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, size)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def append(self, data: bytes | bytearray | memoryview, *, write_through: bool = False) -> int:
        """Write ``data`` at the end; return the bytes written. All or nothing as far as the
        size readers see: on a failed or short write the tail is cut back and the error raised.

        At most ``MAX_WRITE_BYTES`` go in one write call. ``write_through`` also sends each
        piece to disk before the next is written (``writeback``): for the cleaner's large
        segments, so their writing does not hold up the broker's; it is not an fsync.
        """
        position = self._size
        one_call = len(data) <= MAX_WRITE_BYTES and not write_through
        try:
            written = os.pwrite(self._fd, data, position) if one_call else 0
            if written < len(data):  # in pieces, or a short write (disk nearly full) to finish
                written = self._write_pieces(data, written, position, write_through)
        except OSError:
            self._truncate_file(position)
            raise
        self._size = position + written
        return written

    def _write_pieces(
        self, data: bytes | bytearray | memoryview, written: int, position: int, write_through: bool
    ) -> int:
        """Write ``data[written:]`` at ``position + written`` in pieces; return len(data)."""
        with memoryview(data) as view:
            while written < len(view):
                piece = os.pwrite(
                    self._fd, view[written : written + MAX_WRITE_BYTES], position + written
                )
                if write_through:
                    write_back(self._fd, position + written, piece)
                written += piece
        return written

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (fewer at the end of the file)."""
        size = max(0, min(size, self._size - position))
        chunks = []
        while size > 0:
            chunk = os.pread(self._fd, size, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
            size -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def slice(self, position: int, size: int) -> FileSlice:
        return FileSlice(self, position, max(0, min(size, self._size - position)))

    def batch_headers(self, start_position: int = 0) -> Iterator[tuple[int, RecordBatch]]:
        """``(position, header view)`` of each whole batch from ``start_position``, reading only
        the 61 header bytes of each; stops at a batch that runs past the end."""
        position = start_position
        end = self._size
        while position + HEADER_SIZE <= end:
            header = RecordBatch(os.pread(self._fd, HEADER_SIZE, position))
            if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                return
            if position + header.size_in_bytes > end:
                return
            yield position, header
            position += header.size_in_bytes

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, RecordBatch]]:
        """``(position, batch)`` of each whole batch from ``start_position``, reading the file in
        large chunks (recovery and full scans). Stops at a short or impossible length; the caller
        validates CRCs and decides where the valid bytes end."""
        position = start_position
        end = self._size
        while position + HEADER_SIZE <= end:
            chunk = self.read(position, min(_SCAN_CHUNK_BYTES, end - position))
            view = memoryview(chunk)
            consumed = 0
            while consumed + HEADER_SIZE <= len(chunk):
                header = RecordBatch(chunk, consumed)
                if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                    return
                size = header.size_in_bytes
                if consumed + size > len(chunk):
                    break
                yield position + consumed, RecordBatch(view[consumed : consumed + size])
                consumed += size
            if consumed == 0:
                # The first batch is larger than a chunk, or runs past the end of the file.
                size = RecordBatch(chunk).size_in_bytes
                if position + size > end:
                    return
                yield position, RecordBatch(self.read(position, size))
                consumed = size
            position += consumed

    def checked_batch_headers(
        self, start_position: int = 0
    ) -> Iterator[tuple[int, BatchHeader, bool]]:
        """``(position, header, whether its CRC matches)`` of each whole batch from
        ``start_position``; stops at a short or impossible length (recovery's scan).

        The file is read in large chunks into one buffer, allocated (and page-faulted) once, in
        this thread: the kernel's own read-ahead keeps a sequential scan of a cold file going,
        and a second thread to read ahead lost more to waking each other than it overlapped
        (docs/native.md). Nothing of a batch but its header outlives its step.
        """
        position, end = start_position, self._size
        buffer = bytearray(_SCAN_CHUNK_BYTES)
        unpack_header = HEADER_STRUCT.unpack_from
        while position + HEADER_SIZE <= end:
            read = self._read_into(buffer, position, min(len(buffer), end - position))
            batches, consumed, impossible = _whole_batches(buffer, read)
            if not batches:
                # The first batch is larger than the buffer, or runs past the end of the file.
                size = _size_at(buffer, 0) if read >= HEADER_SIZE else 0
                if impossible or read < HEADER_SIZE or position + size > end:
                    return
                buffer = bytearray(size)
                continue
            matches = _crc_matches(buffer, batches)
            for (offset, _), crc_matches in zip(batches, matches, strict=True):
                header = BatchHeader._make(unpack_header(buffer, offset))
                yield position + offset, header, crc_matches
            if impossible:
                return
            position += consumed

    def _read_into(self, buffer: bytearray, position: int, size: int) -> int:
        """Fill ``buffer[:size]`` from ``position``; the bytes read (fewer at the file end)."""
        read = 0
        with memoryview(buffer) as view:
            while read < size:
                count = os.preadv(self._fd, [view[read:size]], position + read)
                if count == 0:
                    break
                read += count
        return read

    def search_for_offset_with_size(
        self, target_offset: int, starting_position: int
    ) -> LogOffsetPosition | None:
        """The first batch from ``starting_position`` whose last offset >= ``target_offset``."""
        for position, header in self.batch_headers(starting_position):
            if header.last_offset >= target_offset:
                return LogOffsetPosition(header.last_offset, position, header.size_in_bytes)
        return None

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with timestamp >= the target."""
        for position, header in self.batch_headers(starting_position):
            if header.max_timestamp < target_timestamp:
                continue
            batch = RecordBatch(self.read(position, header.size_in_bytes))
            for record in batch.records():
                if record.timestamp >= target_timestamp and record.offset >= starting_offset:
                    return TimestampAndOffset(record.timestamp, record.offset)
        return None

    def largest_timestamp_after(self, starting_position: int) -> TimestampAndOffset:
        """The largest batch max timestamp from ``starting_position`` on, and its last offset."""
        largest = TimestampAndOffset(-1, -1)
        for _, header in self.batch_headers(starting_position):
            if header.max_timestamp > largest.timestamp:
                largest = TimestampAndOffset(header.max_timestamp, header.last_offset)
        return largest

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size`` bytes; return how many were removed."""
        if target_size > self._size or target_size < 0:
            raise ValueError(
                f"cannot truncate {self._path} of size {self._size} to {target_size} bytes"
            )
        removed = self._size - target_size
        self._truncate_file(target_size)
        self._size = target_size
        return removed

    def _truncate_file(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def trim(self) -> None:
        """Drop preallocated space past the data (when the segment stops being active)."""
        if os.fstat(self._fd).st_size != self._size:
            self._truncate_file(self._size)

    def flush(self) -> None:
        """fsync the data; a closed file (shut down or deleted meanwhile) has nothing to flush."""
        if self._fd >= 0:
            os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.trim()
            os.close(self._fd)
            self._fd = -1

    def close_handler(self) -> None:
        """Close the descriptor without trimming (the file is about to be deleted)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to(self, new_path: Path) -> None:
        os.replace(self._path, new_path)
        self._path = new_path

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            os.unlink(self._path)
        except OSError as error:
            if error.errno == errno.ENOENT:
                return False
            raise
        return True

    def __repr__(self) -> str:
        return f"FileRecords({self._path}, size={self._size})"


def _size_at(buffer: bytearray, offset: int) -> int:
    """The size of the batch whose header starts at ``offset``, length field and all."""
    return _INT32.unpack_from(buffer, offset + BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD


def _python_whole_batches(buffer: bytearray, read: int) -> tuple[list[tuple[int, int]], int, bool]:
    """The (offset, size) of each whole batch in ``buffer[:read]``, the bytes they take, and
    whether a header with an impossible length ends them (``whole_batches`` in C)."""
    batches = []
    consumed = 0
    while consumed + HEADER_SIZE <= read:
        size = _size_at(buffer, consumed)
        if size < HEADER_SIZE:
            return batches, consumed, True
        if consumed + size > read:
            break
        batches.append((consumed, size))
        consumed += size
    return batches, consumed, False


def _python_crc_matches(buffer: bytearray, batches: list[tuple[int, int]]) -> list[bool]:
    """Whether each of the whole ``batches`` has the CRC its header says (``crc_matches``
    in C)."""
    return [
        crc_of(buffer, offset, size) == _UINT32.unpack_from(buffer, offset + CRC_OFFSET)[0]
        for offset, size in batches
    ]


if _record_scan is not None:
    _whole_batches, _crc_matches = _record_scan.whole_batches, _record_scan.crc_matches
else:
    _whole_batches, _crc_matches = _python_whole_batches, _python_crc_matches
