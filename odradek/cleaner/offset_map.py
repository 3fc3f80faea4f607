"""The offset map the cleaner uses: the C map where it is built, else the Python one.

Both are Kafka's ``SkimpyOffsetMap`` (see skimpy_offset_map.py): the same table, keys hashed
under a secret of the map's own, the same bulk operations (batch_scan.py). The C map
(``_offset_map.c``, built with the package) runs the per-record loops of both cleaning passes,
many times faster than Python (docs/native.md has the figures).
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

from odradek.cleaner.batch_keys import Buffer
from odradek.cleaner.skimpy_offset_map import SECRET_BYTES, SkimpyOffsetMap, table_size

try:
    from odradek.cleaner._offset_map import OffsetMap as NativeOffsetMap
except ImportError:  # built without a C compiler: the Python map does the work
    NativeOffsetMap = None
    logging.getLogger(__name__).warning(
        "odradek.cleaner._offset_map is not built; the log cleaner maps and filters records "
        "in Python, many times slower (install a C compiler and reinstall odradek)"
    )


class OffsetMap(Protocol):
    """What the cleaner asks of a map (batch_scan.py describes the bulk operations)."""

    slots: int
    max_entries: int
    latest_offset: int
    lookups: int
    probes: int

    @property
    def size(self) -> int: ...

    @property
    def is_full(self) -> bool: ...

    def put(self, key: bytes, offset: int) -> None: ...

    def get(self, key: bytes) -> int: ...

    def track_records(self, first_offset: int, count: int) -> None: ...

    def map_records(
        self, data: Buffer, position: int, end: int, count: int, base_offset: int, start: int
    ) -> int: ...

    def retain_records(
        self,
        data: Buffer,
        position: int,
        end: int,
        count: int,
        base_offset: int,
        retain_deletes: bool,
    ) -> tuple[bytes, int] | None: ...

    def map_batches(
        self, data: Buffer, position: int, end: int, start: int
    ) -> tuple[int, int, int, int]: ...

    def filter_batches(
        self, data: Buffer, position: int, end: int, retain_deletes: bool
    ) -> tuple[int, int, list, int, int, int, int, int, int]: ...


def create_offset_map(memory: int, load_factor: float, *, native: bool = True) -> OffsetMap:
    """A map of at most ``memory`` bytes (24 a slot), filled to at most ``load_factor``: the C
    map unless ``native`` is False or it is not built. Each map hashes under a secret of its
    own (skimpy_offset_map.py says why)."""
    secret = os.urandom(SECRET_BYTES)
    if native and NativeOffsetMap is not None:
        return NativeOffsetMap(*table_size(memory, load_factor), secret)
    return SkimpyOffsetMap(memory, load_factor, secret)
