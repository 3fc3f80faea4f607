"""FileRegion: a piece of a response that lives in a segment file rather than in memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class FileSlice(Protocol):
    """``length`` bytes of a file from ``position`` behind an open descriptor ``fd``: what a
    FileRegion sends (storage's FileSlice is one; the network layer does not import storage)."""

    @property
    def fd(self) -> int: ...

    @property
    def path(self) -> Path: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...

    def read_at(self, position: int, size: int) -> bytes: ...


@dataclass(frozen=True)
class FileRegion:
    """A fetch result's file slice as a frame payload piece.

    ``len()`` is its length, so the protocol encoder sizes the frame from it without reading
    it; the response writer sends it with ``sendfile`` straight from the page cache.
    """

    slice: FileSlice

    def __len__(self) -> int:
        return self.slice.length

    @property
    def fd(self) -> int:
        return self.slice.fd

    @property
    def position(self) -> int:
        return self.slice.position
