"""SkimpyOffsetMap: key -> latest offset in a fixed amount of memory (Kafka's class of that name).

Each slot holds a 16-byte hash of a key and an 8-byte offset, 24 bytes, in three flat arrays;
the keys themselves are never stored, so ``memory`` bounds the map whatever the key sizes.

Kafka hashes keys with MD5. This map hashes them with keyed BLAKE2b (16 bytes, hashlib's),
under a secret of its own: 16 bytes from ``os.urandom`` drawn when the map is made. Not
Python's ``hash``, whose secret is the process's and is zero under ``PYTHONHASHSEED=0``: with
a secret nobody knows, nobody can craft keys that share a slot and a probe sequence (and make
every lookup walk all of them), or share a hash (and make the cleaner drop one for the
other). Open addressing with double hashing over a prime number of slots finds a key in about
two probes at the default load factor of 0.9; ``lookups`` and ``probes`` count them, as
Kafka's map does.

This is the Python map: the fallback where the C map (``_offset_map.c``, the same table, with
SipHash-1-3 keyed the same way, which is cheaper in C and dearer in Python) is not built, and
the oracle the C map is tested against. Its bulk operations are :mod:`batch_scan`'s.
"""

from __future__ import annotations

import os
import struct
from array import array
from hashlib import blake2b

from odradek.cleaner import batch_scan
from odradek.cleaner.batch_keys import Buffer

HASH_BYTES = 16
OFFSET_BYTES = 8
BYTES_PER_ENTRY = HASH_BYTES + OFFSET_BYTES
NOT_FOUND = -1

SECRET_BYTES = 16
_HASHES = struct.Struct("<qq")  # a key's 16-byte hash: the first and the second 64-bit hash


class SkimpyOffsetMap:
    """Maps keys (by their 128-bit hash) to offsets; holds at most ``max_entries`` keys."""

    def __init__(self, memory: int, load_factor: float = 0.9, secret: bytes | None = None) -> None:
        self.slots, self.max_entries = table_size(memory, load_factor)
        self._secret = os.urandom(SECRET_BYTES) if secret is None else secret
        if len(self._secret) != SECRET_BYTES:
            raise ValueError(f"the offset map's secret is {SECRET_BYTES} bytes")
        self._first_hashes = array("q", bytes(OFFSET_BYTES * self.slots))
        self._second_hashes = array("q", bytes(OFFSET_BYTES * self.slots))
        self._offsets = array("q", [NOT_FOUND]) * self.slots
        self._entries = 0
        self.latest_offset = NOT_FOUND
        self.lookups = 0
        self.probes = 0

    def _hashes(self, key: bytes) -> tuple[int, int]:
        """The key's two 64-bit hashes under the map's secret."""
        return _HASHES.unpack(blake2b(key, digest_size=16, key=self._secret).digest())

    @property
    def size(self) -> int:
        """The number of keys in the map."""
        return self._entries

    @property
    def utilization(self) -> float:
        return self._entries / self.slots

    @property
    def is_full(self) -> bool:
        """No room for one more key (Kafka stops mapping here, even for a key it already has)."""
        return self._entries >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        """Map ``key`` to ``offset``; ValueError when the key is new and the map is full."""
        if offset < 0:
            raise ValueError("offsets are not negative")
        first, second = self._hashes(key)
        slots = self.slots
        slot = first % slots
        step = 1 + second % (slots - 1)
        offsets, firsts, seconds = self._offsets, self._first_hashes, self._second_hashes
        self.lookups += 1
        self.probes += 1
        while offsets[slot] != NOT_FOUND:
            if firsts[slot] == first and seconds[slot] == second:
                offsets[slot] = offset
                return
            slot = (slot + step) % slots
            self.probes += 1
        if self._entries >= self.max_entries:
            raise ValueError(f"offset map of {self.max_entries} entries is full")
        firsts[slot] = first
        seconds[slot] = second
        offsets[slot] = offset
        self._entries += 1

    def get(self, key: bytes) -> int:
        """The offset mapped to ``key``, or -1 when the map does not have it."""
        first, second = self._hashes(key)
        slots = self.slots
        slot = first % slots
        step = 1 + second % (slots - 1)
        offsets, firsts, seconds = self._offsets, self._first_hashes, self._second_hashes
        self.lookups += 1
        self.probes += 1
        while (offset := offsets[slot]) != NOT_FOUND:
            if firsts[slot] == first and seconds[slot] == second:
                return offset
            slot = (slot + step) % slots
            self.probes += 1
        return NOT_FOUND

    def update_latest_offset(self, offset: int) -> None:
        """Record that the map covers every offset up to ``offset``."""
        self.latest_offset = offset

    def clear(self) -> None:
        self._offsets = array("q", [NOT_FOUND]) * self.slots
        self._entries = 0
        self.latest_offset = NOT_FOUND

    def track_records(self, first_offset: int, count: int) -> None:
        """Nothing: this map decides every batch from its records (the C map can remember
        what its first pass learned of them, see _offset_map.c)."""

    def map_records(
        self, data: Buffer, position: int, end: int, count: int, base_offset: int, start: int
    ) -> int:
        return batch_scan.map_records(self, data, position, end, count, base_offset, start)

    def retain_records(
        self,
        data: Buffer,
        position: int,
        end: int,
        count: int,
        base_offset: int,
        retain_deletes: bool,
    ) -> tuple[bytes, int] | None:
        return batch_scan.retain_records(
            self, data, position, end, count, base_offset, retain_deletes
        )

    def map_batches(
        self, data: Buffer, position: int, end: int, start: int
    ) -> tuple[int, int, int, int]:
        return batch_scan.map_batches(self, data, position, end, start)

    def filter_batches(
        self, data: Buffer, position: int, end: int, retain_deletes: bool
    ) -> tuple[int, int, list, int, int, int, int, int, int]:
        return batch_scan.filter_batches(self, data, position, end, retain_deletes)


def table_size(memory: int, load_factor: float) -> tuple[int, int]:
    """(slots, max_entries) of a map in ``memory`` bytes: a prime number of slots, filled at
    most to ``load_factor`` and never to the last slot, so a probe always ends."""
    slots = _largest_prime_at_most(memory // BYTES_PER_ENTRY)
    return slots, min(int(slots * load_factor), slots - 1)


def _largest_prime_at_most(n: int) -> int:
    """Double hashing visits every slot only when the slot count is prime."""
    if n < 3:
        raise ValueError(f"an offset map needs room for 3 slots of {BYTES_PER_ENTRY} bytes")
    candidate = n if n % 2 else n - 1
    while candidate > 3 and any(candidate % d == 0 for d in range(3, int(candidate**0.5) + 1, 2)):
        candidate -= 2
    return candidate
