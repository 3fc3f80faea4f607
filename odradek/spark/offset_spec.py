"""startingOffsets and endingOffsets: ``earliest``, ``latest``, or an offset per partition."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from odradek.spark.partition_offsets import offsets_from_json
from odradek.storage.topic_partition import TopicPartition

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

    @classmethod
    def parse(cls, text: str, option: str) -> OffsetSpec:
        keyword = _KEYWORDS.get(text.strip().lower())
        if keyword is not None:
            return cls(option, keyword)
        try:
            offsets = offsets_from_json(json.loads(text))
        except (ValueError, TypeError, AttributeError):
            raise ValueError(
                f"option {option} must be earliest, latest or JSON like {_JSON_EXAMPLE}, "
                f"not {text!r}"
            ) from None
        bad = sorted(tp for tp, offset in offsets.items() if offset < EARLIEST)
        if bad:
            raise ValueError(f"option {option}: {bad[0]} has offset {offsets[bad[0]]}, below -2")
        return cls(option, None, offsets)

    def mentions(self, special: int) -> bool:
        """Whether the spec asks for ``special`` (EARLIEST or LATEST) anywhere."""
        return self.keyword == special or special in self.offsets.values()

    def resolve(
        self,
        partitions: Collection[TopicPartition],
        earliest: Mapping[TopicPartition, int],
        latest: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, int]:
        """A concrete offset for each of ``partitions``, given their earliest and latest."""
        if self.keyword is None:
            self._check_named(partitions)
        resolved = {}
        for tp in partitions:
            wanted = self.offsets[tp] if self.keyword is None else self.keyword
            if wanted == EARLIEST:
                wanted = earliest[tp]
            elif wanted == LATEST:
                wanted = latest[tp]
            resolved[tp] = wanted
        return resolved

    def _check_named(self, partitions: Collection[TopicPartition]) -> None:
        missing = sorted(set(partitions) - set(self.offsets))
        unknown = sorted(set(self.offsets) - set(partitions))
        if missing:
            raise ValueError(
                f"option {self.option} names no offset for {', '.join(map(str, missing))}; "
                "name every partition (-2 for earliest, -1 for latest)"
            )
        if unknown:
            raise ValueError(
                f"option {self.option} names {', '.join(map(str, unknown))}, "
                "not a partition of the topics read"
            )
