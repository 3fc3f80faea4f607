"""Which topic-partitions a read covers: Spark's Kafka source's three ways to say it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.topic_partition import TopicPartition

if TYPE_CHECKING:  # the admin client behind it is loaded where offsets are looked up
    from odradek.spark.topic_offsets import TopicOffsets

# The options that choose the topic-partitions; a read gives exactly one.
_CHOICES = ("subscribe", "topic", "subscribepattern", "assign")


@dataclass(frozen=True)
class Subscription:
    """``subscribe`` (or its synonym ``topic``): named topics, every partition of each;
    ``subscribePattern``: every topic whose whole name matches a regular expression, looked
    up again at each planning; ``assign``: named partitions only."""

    topics: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    assigned: tuple[TopicPartition, ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Subscription:
        """From ``options`` (keys in lower case); ValueError says what is wrong."""
        given = [name for name in _CHOICES if name in options]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of the options subscribe (or topic), subscribePattern and assign"
            )
        name, text = given[0], options[given[0]]
        if name == "subscribepattern":
            return cls(pattern=_pattern(text))
        if name == "assign":
            return cls(assigned=_assigned(text))
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise ValueError(f"option {name} names no topic")
        return cls(topics=topics)

    def partitions(self, lookup: TopicOffsets, require_topics: bool) -> list[TopicPartition]:
        """The partitions read, as the broker has them now. Assigned partitions must exist;
        subscribed topics too when ``require_topics`` (a batch read)."""
        if self.pattern is not None:
            pattern = self.pattern
            return [tp for tp in lookup.partitions(None) if pattern.fullmatch(tp.topic)]
        if self.assigned:
            found = set(lookup.partitions({tp.topic for tp in self.assigned}))
            missing = [str(tp) for tp in self.assigned if tp not in found]
            if missing:
                raise ValueError(f"option assign names partitions that do not exist: {missing}")
            return sorted(self.assigned)
        partitions = lookup.partitions(self.topics)
        missing = sorted(set(self.topics) - {tp.topic for tp in partitions})
        if missing and require_topics:
            raise ValueError(f"no such topic: {', '.join(missing)}")
        return partitions


def _pattern(text: str) -> re.Pattern[str]:
    if not text.strip():
        raise ValueError("option subscribePattern is empty")
    try:
        return re.compile(text)
    except re.error as error:
        message = f"option subscribePattern {text!r} is no regular expression: {error}"
        raise ValueError(message) from None


def _assigned(text: str) -> tuple[TopicPartition, ...]:
    """``{"topicA": [0, 1], "topicB": [2]}`` as topic-partitions."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not all(
        isinstance(partitions, list)
        and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions)
        for partitions in parsed.values()
    ):
        raise ValueError(
            f'option assign must be JSON like {{"topicA": [0, 1], "topicB": [2]}}, not {text!r}'
        )
    named = {TopicPartition(topic, p) for topic, partitions in parsed.items() for p in partitions}
    assigned = tuple(sorted(named))
    if not assigned:
        raise ValueError("option assign names no partition")
    return assigned
