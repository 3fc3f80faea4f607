"""LazyIndex: a segment index opened on first use (Kafka's ``LazyIndex``, design §5).

A broker with thousands of segments opens only the indexes that reads and appends touch, so
start-up maps no index files and holds no descriptors for them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Generic, TypeVar

from odradek.storage.abstract_index import AbstractIndex, delete_file_if_exists
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.time_index import TimeIndex

T = TypeVar("T", bound=AbstractIndex)


class LazyIndex(Generic[T]):
    """Holds what opening an index needs and opens it, once, on the first ``get``."""

    def __init__(
        self,
        index_type: type[T],
        path: Path,
        base_offset: int,
        max_index_size: int,
        writable: bool = True,
    ) -> None:
        self._index_type = index_type
        self._path = Path(path)
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._index: T | None = None
        self._lock = threading.Lock()

    @staticmethod
    def for_offset(
        path: Path, base_offset: int, max_index_size: int, writable: bool = True
    ) -> LazyIndex[OffsetIndex]:
        return LazyIndex(OffsetIndex, path, base_offset, max_index_size, writable)

    @staticmethod
    def for_time(
        path: Path, base_offset: int, max_index_size: int, writable: bool = True
    ) -> LazyIndex[TimeIndex]:
        return LazyIndex(TimeIndex, path, base_offset, max_index_size, writable)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def is_loaded(self) -> bool:
        return self._index is not None

    def get(self) -> T:
        """The index, opened (and created, when writable and missing) by the first call."""
        index = self._index
        if index is None:
            with self._lock:
                if self._index is None:
                    self._index = self._index_type(
                        self._path, self._base_offset, self._max_index_size, self._writable
                    )
                index = self._index
        return index

    def rename_to(self, new_path: Path) -> None:
        """Move the index file, opened or not (a file not yet created is only renamed ahead)."""
        with self._lock:
            if self._index is not None:
                self._index.rename_to(new_path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.replace(self._path, new_path)
            self._path = Path(new_path)

    def update_parent_dir(self, parent_dir: Path) -> None:
        """Follow a rename of the directory holding the file, opened or not."""
        with self._lock:
            if self._index is not None:
                self._index.update_parent_dir(parent_dir)
            self._path = Path(parent_dir) / self._path.name

    def delete_if_exists(self) -> bool:
        """Close the index if open and unlink its file; return whether there was a file."""
        with self._lock:
            if self._index is not None:
                return self._index.delete_if_exists()
            return delete_file_if_exists(self._path)

    def close(self) -> None:
        """Trim and close the index if it was opened."""
        with self._lock:
            if self._index is not None:
                self._index.close()

    def close_handler(self) -> None:
        """Close the index without trimming, if it was opened."""
        with self._lock:
            if self._index is not None:
                self._index.close_handler()

    def __repr__(self) -> str:
        state = "loaded" if self.is_loaded else "not loaded"
        return f"LazyIndex({self._index_type.__name__}, {self._path}, {state})"
