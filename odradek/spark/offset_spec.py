"""Where a read starts or ends: ``earliest``, ``latest``, an offset per partition, or the first
offset at or after a timestamp (one for all partitions, or one per partition)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from odradek.spark.option_values import parse_int
from odradek.spark.partition_offsets import offsets_from_json
from odradek.topic_partition import TopicPartition

EARLIEST = -2
LATEST = -1
_KEYWORDS = {"earliest": EARLIEST, "latest": LATEST}
_JSON_EXAMPLE = '{"topic": {"0": 42, "1": -2}}'


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, as Spark's Kafka source takes it.

    The JSON form must name every partition of the topics read; in it -2 stands for earliest
    and -1 for latest. ``keyword`` is EARLIEST or LATEST for the keyword forms, else None.
    """

    option: str
    keyword: int | None = None
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None  # startingTimestamp / endingTimestamp: for every partition
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)  # ...ByTimestamp
    latest_when_no_match: bool = False  # else a timestamp past every record fails the read

    @classmethod
    def at_timestamp(cls, text: str, option: str, latest_when_no_match: bool) -> OffsetSpec:
        """startingTimestamp or endingTimestamp: one timestamp (ms) for every partition."""
        timestamp = parse_int(text, option)
        if timestamp < 0:
            raise ValueError(f"option {option} must be a timestamp >= 0, not {timestamp}")
        return cls(option, timestamp=timestamp, latest_when_no_match=latest_when_no_match)

    @classmethod
    def by_timestamps(cls, text: str, option: str, latest_when_no_match: bool) -> OffsetSpec:
        """startingOffsetsByTimestamp or endingOffsetsByTimestamp: JSON of a timestamp (ms) per
        partition, in the offsets' layout."""
        expected = 'JSON like {"topic": {"0": 1700000000000}}'
        timestamps = _per_partition(text, option, expected, 0, "timestamp")
        return cls(option, timestamps=timestamps, latest_when_no_match=latest_when_no_match)

    @classmethod
    def parse(cls, text: str, option: str) -> OffsetSpec:
        keyword = _KEYWORDS.get(text.strip().lower())
        if keyword is not None:
            return cls(option, keyword)
        expected = f"earliest, latest or JSON like {_JSON_EXAMPLE}"
        offsets = _per_partition(text, option, expected, EARLIEST, "offset")
        return cls(option, None, offsets)

    def mentions(self, special: int) -> bool:
        """Whether the spec asks for ``special`` (EARLIEST or LATEST) anywhere."""
        return self.keyword == special or special in self.offsets.values()

    def timestamps_for(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """The timestamp to look an offset up for, per partition; empty unless the spec is a
        timestamp one."""
        if self.timestamp is not None:
            return dict.fromkeys(partitions, self.timestamp)
        if self.timestamps:
            self._check_named(partitions, self.timestamps)
            return {tp: self.timestamps[tp] for tp in partitions}
        return {}

    def resolve(
        self,
        partitions: Collection[TopicPartition],
        earliest: Mapping[TopicPartition, int],
        latest: Mapping[TopicPartition, int],
        found: Mapping[TopicPartition, int] | None = None,
    ) -> dict[TopicPartition, int]:
        """A concrete offset for each of ``partitions``, given their earliest and latest and,
        for a timestamp spec, the offsets ``found`` for :meth:`timestamps_for` (-1: none)."""
        if self.timestamp is not None or self.timestamps:
            return self._resolve_found(partitions, latest, found or {})
        if self.keyword is None:
            self._check_named(partitions, self.offsets)
        resolved = {}
        for tp in partitions:
            wanted = self.offsets[tp] if self.keyword is None else self.keyword
            if wanted == EARLIEST:
                wanted = earliest[tp]
            elif wanted == LATEST:
                wanted = latest[tp]
            resolved[tp] = wanted
        return resolved

    def _resolve_found(
        self,
        partitions: Collection[TopicPartition],
        latest: Mapping[TopicPartition, int],
        found: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, int]:
        resolved = {}
        for tp in partitions:
            offset = found.get(tp, -1)
            if offset < 0:
                if not self.latest_when_no_match:
                    timestamp = self.timestamps_for([tp])[tp]
                    raise ValueError(
                        f"option {self.option}: no record of {tp} has a timestamp at or after "
                        f"{timestamp}"
                    )
                offset = latest[tp]
            resolved[tp] = offset
        return resolved

    def _check_named(
        self, partitions: Collection[TopicPartition], named: Mapping[TopicPartition, int]
    ) -> None:
        missing = sorted(set(partitions) - set(named))
        unknown = sorted(set(named) - set(partitions))
        if missing:
            what = "offset" if named is self.offsets else "timestamp"
            hint = " (-2 for earliest, -1 for latest)" if named is self.offsets else ""
            raise ValueError(
                f"option {self.option} names no {what} for {', '.join(map(str, missing))}; "
                f"name every partition{hint}"
            )
        if unknown:
            raise ValueError(
                f"option {self.option} names {', '.join(map(str, unknown))}, "
                "not a partition of the topics read"
            )


def _per_partition(
    text: str, option: str, expected: str, least: int, what: str
) -> dict[TopicPartition, int]:
    """A value per partition from JSON in Spark's layout, each at least ``least``."""
    try:
        values = offsets_from_json(json.loads(text))
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f"option {option} must be {expected}, not {text!r}") from None
    bad = sorted(tp for tp, value in values.items() if value < least)
    if bad:
        raise ValueError(f"option {option}: {bad[0]} has {what} {values[bad[0]]}, below {least}")
    return values
