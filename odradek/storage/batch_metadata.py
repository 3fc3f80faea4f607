"""BatchMetadata: what a partition remembers of one batch a producer wrote (Kafka's
``BatchMetadata``), enough to recognise a retry of it and answer it with its offsets."""

from __future__ import annotations

from typing import NamedTuple

from odradek.int_limits import INT32_MAX


def decrease_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` in Kafka's wrapping int32 sequence space."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def increase_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` in Kafka's wrapping int32 sequence space."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class BatchMetadata(NamedTuple):
    """The sequence range, offsets and max timestamp of one written batch."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrease_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta
