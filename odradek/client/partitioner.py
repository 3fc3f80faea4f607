"""Which partition a record goes to: Kafka's murmur2 for keys, a sticky choice for null keys.

A keyed record goes to ``toPositive(murmur2(key)) % numPartitions``, bit for bit what Kafka's
Java client computes, so keys land where a Java producer would put them. Records without a key
stick to one partition until its batch is full, then move to another picked at random (Kafka's
sticky partitioner, KIP-480): batches fill up and go out whole instead of one small batch per
partition per linger period.
"""

from __future__ import annotations

import random
import struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 of ``data`` as Kafka's ``Utils.murmur2``: a signed 32-bit int."""
    length = len(data)
    h = _SEED ^ length
    words = length // 4
    for k in struct.unpack_from(f"<{words}I", data):
        k = (k * _M) & _MASK32
        k ^= k >> 24
        h = ((h * _M) & _MASK32) ^ ((k * _M) & _MASK32)
    tail = length & 3
    if tail:
        index = words * 4
        if tail == 3:
            h ^= data[index + 2] << 16
        if tail >= 2:
            h ^= data[index + 1] << 8
        h = ((h ^ data[index]) * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not abs, which overflows on MIN)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Keyed records by hash; null-key records to one partition per topic until its batch fills."""

    def __init__(self) -> None:
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= num_partitions:
            sticky = self._sticky[topic] = random.randrange(num_partitions)
        return sticky

    def on_new_batch(self, topic: str, num_partitions: int, previous: int) -> None:
        """The sticky ``previous`` partition's batch is full: move null keys to another one."""
        if self._sticky.get(topic) == previous and num_partitions > 1:
            other = random.randrange(num_partitions - 1)
            self._sticky[topic] = other if other < previous else other + 1
