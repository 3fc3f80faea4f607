"""The partitioner must place keys exactly where Kafka's Java client does."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.client.partitioner import (
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

with warnings.catch_warnings():  # kafka-python's import trips a DeprecationWarning
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

# org.apache.kafka.common.utils.UtilsTest.testMurmur2
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafkas_own_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_int(key: bytes) -> None:
    assert -(2**31) <= murmur2(key) < 2**31


def test_to_positive_clears_the_sign_bit_instead_of_negating() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_partition_for_key_is_to_positive_of_the_hash_mod_partitions() -> None:
    # toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16, as Kafka computes it.
    assert partition_for_key(b"foobar", 50) == 16
    assert partition_for_key(b"abc", 7) == 479470107 % 7


def test_keys_of_memoryviews_hash_like_bytes() -> None:
    assert murmur2(memoryview(b"foobar")) == murmur2(b"foobar")


def test_keyed_records_ignore_stickiness() -> None:
    partitioner = StickyPartitioner()
    assert {partitioner.partition("t", b"foobar", 50) for _ in range(10)} == {16}


def test_null_keys_stick_to_one_partition_until_its_batch_fills() -> None:
    partitioner = StickyPartitioner()
    first = partitioner.partition("t", None, 8)
    assert {partitioner.partition("t", None, 8) for _ in range(20)} == {first}
    partitioner.on_new_batch("t", 8, first)
    second = partitioner.partition("t", None, 8)
    assert second != first
    assert {partitioner.partition("t", None, 8) for _ in range(20)} == {second}


def test_a_stale_new_batch_notice_does_not_move_the_sticky_partition() -> None:
    partitioner = StickyPartitioner()
    current = partitioner.partition("t", None, 4)
    partitioner.on_new_batch("t", 4, (current + 1) % 4)
    assert partitioner.partition("t", None, 4) == current


def test_sticky_partitions_spread_over_every_partition() -> None:
    partitioner = StickyPartitioner()
    seen = set()
    for _ in range(400):
        current = partitioner.partition("t", None, 5)
        seen.add(current)
        partitioner.on_new_batch("t", 5, current)
    assert seen == set(range(5))


def test_single_partition_topic_stays_put() -> None:
    partitioner = StickyPartitioner()
    partitioner.on_new_batch("t", 1, partitioner.partition("t", None, 1))
    assert partitioner.partition("t", None, 1) == 0


def test_sticky_partition_is_redrawn_when_the_topic_shrinks() -> None:
    partitioner = StickyPartitioner()
    current = partitioner.partition("t", None, 10)
    while current < 3:
        partitioner.on_new_batch("t", 10, current)
        current = partitioner.partition("t", None, 10)
    assert 0 <= partitioner.partition("t", None, 3) < 3
