"""CleanedWriter: gathers the kept batches of a cleaned segment and appends them in large writes.

Kept batches arrive as views of the chunk they were read in (whole runs of batches copied as
they are) or as rebuilt bytes; they are appended once ``io_buffer_size`` bytes are pending
(``log.cleaner.io.buffer.size``), a run larger than that in one append without another copy.
Appends write through (``storage/writeback.py``): each piece reaches the disk before the next is
written, so the segment's final fsync finds little left and the broker's requests are not held
up by a burst of writeback (the produce p99 target of bench/cleaner.py).
"""

from __future__ import annotations

from odradek.cleaner.throttler import Throttler
from odradek.storage.log_segment import LogSegment

Pieces = list[bytes | memoryview]


class CleanedWriter:
    """Appends kept batches, in order, to the ``.cleaned`` segment being written."""

    def __init__(self, cleaned: LogSegment, io_buffer_size: int, throttler: Throttler) -> None:
        self._cleaned = cleaned
        self._io_buffer_size = io_buffer_size
        self._throttler = throttler
        self._pieces: Pieces = []
        self._pending = 0
        self._last_offset = -1

    def add(self, batches: bytes | memoryview, last_offset: int) -> None:
        """Queue whole batches whose offsets go up to ``last_offset`` (or a bound above it)."""
        self._pieces.append(batches)
        self._pending += len(batches)
        self._last_offset = max(self._last_offset, last_offset)
        if self._pending >= self._io_buffer_size:
            self.flush()

    def flush(self) -> None:
        """Append what is pending."""
        if not self._pending:
            return
        pieces = self._pieces
        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        self._cleaned.append(self._last_offset, data, write_through=True)
        self._throttler.maybe_throttle(self._pending)
        self._pieces = []
        self._pending = 0
