"""FileRecords: a segment's ``.log`` file, a concatenation of record batches (design §3, 6)."""

from __future__ import annotations

import errno
import os
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from odradek.record.batch_header import BatchHeader
from odradek.record.record_batch import (
    BATCH_LENGTH_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    RecordBatch,
    crc_of,
)
from odradek.storage.idle_file_cache import IDLE_FILES
from odradek.storage.segment_append_state import AppendState
from odradek.storage.shared_descriptor import DescriptorPin, SharedDescriptor
from odradek.storage.writeback import MAX_WRITE_BYTES, write_back

try:
    from odradek.record import _record_scan
except ImportError:  # record_framing warns once that the C checks are not built
    _record_scan = None

_SCAN_CHUNK_BYTES = 1024 * 1024
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


_BATCH_START = struct.Struct(">qi4xb6xi")
"""A batch header's baseOffset, batchLength, magic and lastOffsetDelta: where it starts and ends."""


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

    It may end in the middle of a batch; readers drop a trailing partial batch. It holds the
    file's descriptor (``pin``) until it is garbage-collected, so the number it sends from is
    still the segment's however long the send takes: a segment closed meanwhile closes its
    descriptor only once the last slice of it is gone.
    """

    file: FileRecords
    position: int
    length: int
    pin: DescriptorPin = field(repr=False, compare=False)

    @property
    def fd(self) -> int:
        return self.pin.fd

    @property
    def path(self) -> Path:
        return self.file.path

    def read_bytes(self) -> bytes:
        """The slice's bytes, copied (the fallback when zero copy is not possible, and tests)."""
        return self.read_at(self.position, self.length)

    def read_at(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes of the file from ``position``, read through the pinned
        descriptor (fewer at the end of the file)."""
        return _read_fully(self.pin.fd, position, size)


class FileRecords:
    """A ``.log`` file: appends at its end, reads by position, scans batch headers.

    The size is tracked in memory rather than taken from the file so a preallocated file
    (``preallocate=true``) and concurrent readers see only whole appended batches.

    The file being written (the active segment's) keeps its descriptor open: ``_fd`` is it,
    -1 otherwise. While its segment is active, its append state (``segment_append_state.py``)
    writes to it and owns the size. Any other file is opened when a read needs it and kept
    open among the most recently used idle files (``IDLE_FILES``), so many partitions with
    many segments hold a bounded number of descriptors. Every use holds the descriptor
    (``SharedDescriptor``) while it runs, so closing never pulls one from under a read.
    """

    def __init__(
        self, path: Path, descriptor: SharedDescriptor | None, size: int, *, writing: bool
    ) -> None:
        self._path = path
        self._descriptor = descriptor
        self._writing = writing and descriptor is not None
        self._fd = descriptor.fd if self._writing else -1
        self._size = size
        # The active segment's append state while it owns the size (LogSegment lends it).
        self._append_state: AppendState | None = None
        self._closed = False
        self._open_lock = threading.Lock()  # opening, closing and renaming the file

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
    ) -> FileRecords:
        """A new file, open for writing; or an existing one (``file_already_exists``), whose
        descriptor is opened by its first use."""
        if file_already_exists:
            return cls(path, None, os.stat(path).st_size, writing=False)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if preallocate and init_file_size > 0:
                os.posix_fallocate(fd, 0, init_file_size)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, SharedDescriptor(fd), 0, writing=True)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def fd(self) -> int:
        """The descriptor appends write to; -1 when the file is not being written."""
        return self._fd

    @property
    def size_in_bytes(self) -> int:
        state = self._append_state
        return self._size if state is None else state.size

    def lend_to(self, state: AppendState) -> None:
        """The segment's append state owns the size (and writes at the end) from now on."""
        if self._fd < 0 or state.fd != self._fd:
            raise ValueError(f"{self._path}: an append state must write to the open descriptor")
        self._append_state = state

    def take_back(self) -> None:
        """Own the size again, as the append state left it."""
        state = self._append_state
        if state is not None:
            self._size = state.size
            self._append_state = None

    def _check_not_lent(self) -> None:
        if self._append_state is not None:
            raise RuntimeError(f"{self._path} is written through its segment's append state")

    @property
    def is_open(self) -> bool:
        """Whether the file holds a descriptor now (idle files may not)."""
        return self._descriptor is not None

    # --- descriptors -------------------------------------------------------------------------

    def _hold(self) -> SharedDescriptor:
        """The file's descriptor, opened if need be, held once for the caller, who releases it."""
        descriptor = self._descriptor
        if descriptor is None or not descriptor.acquire():
            descriptor = self._reopen()
        if not self._writing:
            IDLE_FILES.touch(self)
        return descriptor

    def _reopen(self) -> SharedDescriptor:
        """``_hold``'s slow path. While ``_descriptor`` is set the file holds it once, so it
        cannot be closed; it is unset before that hold is released."""
        with self._open_lock:
            descriptor = self._descriptor
            if descriptor is not None and descriptor.acquire():
                return descriptor
            if self._closed:
                raise OSError(errno.EBADF, f"{self._path} is closed")
            descriptor = SharedDescriptor(os.open(self._path, os.O_RDWR))
            descriptor.acquire()
            self._descriptor = descriptor
            return descriptor

    def pin(self) -> DescriptorPin:
        """A hold on the file's descriptor for a reader that releases it elsewhere."""
        return DescriptorPin(self._hold())

    def start_writing(self) -> None:
        """Keep the descriptor open and publish it in ``_fd``: the file takes appends again
        (a segment that became the active one)."""
        with self._open_lock:
            if self._closed:
                raise OSError(errno.EBADF, f"{self._path} is closed")
            descriptor = self._descriptor
            if descriptor is None:
                descriptor = self._descriptor = SharedDescriptor(os.open(self._path, os.O_RDWR))
            self._writing = True
            self._fd = descriptor.fd
        IDLE_FILES.discard(self)

    def stop_writing(self) -> None:
        """The file takes no more appends: its descriptor becomes an idle one, closed when it
        is the least recently used past the idle cache's capacity."""
        self._check_not_lent()
        with self._open_lock:
            if not self._writing:
                return
            self._writing = False
            self._fd = -1
        IDLE_FILES.touch(self)

    def release_idle(self) -> None:
        """Let go of the descriptor unless the file is being written (the idle cache evicts
        it); readers in flight keep it open until they are done."""
        with self._open_lock:
            if self._writing:
                return
            descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            descriptor.release()

    def _let_go(self) -> None:
        """Close for good: the descriptor closes once readers in flight are done with it."""
        self._check_not_lent()
        with self._open_lock:
            self._closed = True
            self._writing = False
            self._fd = -1
            descriptor, self._descriptor = self._descriptor, None
        IDLE_FILES.discard(self)
        if descriptor is not None:
            descriptor.release()

    # --- writes ------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, *, write_through: bool = False) -> int:
        """Write ``data`` at the end; return the bytes written. All or nothing as far as the
        size readers see: on a failed or short write the tail is cut back and the error raised.

        At most ``MAX_WRITE_BYTES`` go in one write call. ``write_through`` also sends each
        piece to disk before the next is written (``writeback``): for the cleaner's large
        segments, so their writing does not hold up the broker's; it is not an fsync.
        """
        self._check_not_lent()
        if self._fd < 0:
            self.start_writing()
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

    # --- reads -------------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (fewer at the end of the file)."""
        size = max(0, min(size, self.size_in_bytes - position))
        descriptor = self._hold()
        try:
            return _read_fully(descriptor.fd, position, size)
        finally:
            descriptor.release()

    def slice(self, position: int, size: int) -> FileSlice:
        """A slice of the file holding its descriptor until it is gone (see FileSlice)."""
        return FileSlice(
            self, position, max(0, min(size, self.size_in_bytes - position)), self.pin()
        )

    def batch_headers(self, start_position: int = 0) -> Iterator[tuple[int, RecordBatch]]:
        """``(position, header view)`` of each whole batch from ``start_position``, reading only
        the 61 header bytes of each; stops at a batch that runs past the end."""
        position = start_position
        end = self.size_in_bytes
        if position + HEADER_SIZE > end:
            return
        descriptor = self._hold()
        try:
            while position + HEADER_SIZE <= end:
                header = RecordBatch(os.pread(descriptor.fd, HEADER_SIZE, position))
                if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                    return
                if position + header.size_in_bytes > end:
                    return
                yield position, header
                position += header.size_in_bytes
        finally:
            descriptor.release()

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, RecordBatch]]:
        """``(position, batch)`` of each whole batch from ``start_position``, reading the file in
        large chunks (recovery and full scans). Stops at a short or impossible length; the caller
        validates CRCs and decides where the valid bytes end."""
        position = start_position
        end = self.size_in_bytes
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
        position, end = start_position, self.size_in_bytes
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
        descriptor = self._hold()
        try:
            with memoryview(buffer) as view:
                while read < size:
                    count = os.preadv(descriptor.fd, [view[read:size]], position + read)
                    if count == 0:
                        break
                    read += count
        finally:
            descriptor.release()
        return read

    def batch_starting_at(self, position: int, offset: int) -> LogOffsetPosition | None:
        """The whole batch at ``position`` if it starts at ``offset``, with one header read;
        None otherwise. For a position handed out earlier as where ``offset`` would begin (a
        log end): the file may have been cut or replaced since, so it is checked, not trusted.
        Offsets ascend through a segment, so a batch starting at ``offset`` is the one
        ``search_for_offset_with_size`` would find, without its index lookup and scan."""
        end = self.size_in_bytes
        if position < 0 or position + HEADER_SIZE > end:
            return None
        descriptor = self._hold()
        try:
            data = os.pread(descriptor.fd, _BATCH_START.size, position)
        finally:
            descriptor.release()
        if len(data) < _BATCH_START.size:
            return None
        base_offset, batch_length, magic, last_offset_delta = _BATCH_START.unpack(data)
        size = batch_length + LOG_OVERHEAD
        if base_offset != offset or magic != MAGIC or size < HEADER_SIZE or position + size > end:
            return None
        return LogOffsetPosition(base_offset + last_offset_delta, position, size)

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

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size`` bytes; return how many were removed."""
        self._check_not_lent()
        if target_size > self._size or target_size < 0:
            raise ValueError(
                f"cannot truncate {self._path} of size {self._size} to {target_size} bytes"
            )
        removed = self._size - target_size
        self._truncate_file(target_size)
        self._size = target_size
        return removed

    def _truncate_file(self, size: int) -> None:
        descriptor = self._hold()
        try:
            os.ftruncate(descriptor.fd, size)
        finally:
            descriptor.release()

    def trim(self) -> None:
        """Drop preallocated space past the data (when the segment stops being active)."""
        self._check_not_lent()
        fd = self._fd
        length = os.fstat(fd).st_size if fd >= 0 else os.stat(self._path).st_size
        if length != self._size:
            self._truncate_file(self._size)

    def flush(self) -> None:
        """fsync the data; a closed file (shut down or deleted meanwhile) has nothing to flush.

        An idle file whose descriptor was released is opened again for it: fdatasync writes
        the file's dirty pages whichever descriptor wrote them.
        """
        if self._closed:
            return
        try:
            descriptor = self._hold()
        except OSError as error:
            if error.errno == errno.EBADF and self._closed:
                return
            raise
        try:
            os.fdatasync(descriptor.fd)
        finally:
            descriptor.release()

    def close(self) -> None:
        """Trim the file and close it; the descriptor closes once readers in flight are done."""
        if self._closed:
            return
        self.trim()
        self._let_go()

    def close_handler(self) -> None:
        """Close without trimming (the file is about to be deleted)."""
        self._let_go()

    def rename_to(self, new_path: Path) -> None:
        with self._open_lock:
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
        return f"FileRecords({self._path}, size={self.size_in_bytes})"


def _read_fully(fd: int, position: int, size: int) -> bytes:
    """Up to ``size`` bytes of ``fd`` from ``position`` (fewer at the end of the file)."""
    chunks = []
    while size > 0:
        chunk = os.pread(fd, size, position)
        if not chunk:
            break
        chunks.append(chunk)
        position += len(chunk)
        size -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


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
