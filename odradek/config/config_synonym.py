"""A broker key that sets a topic key's default (Kafka's ``ConfigSynonym``)."""

from __future__ import annotations

from dataclasses import dataclass

MINUTE_MS = 60 * 1000
HOUR_MS = 60 * MINUTE_MS


@dataclass(frozen=True)
class ConfigSynonym:
    """Broker key ``name`` gives a topic key's value once multiplied by ``multiplier``.

    ``log.retention.hours`` is a synonym of ``retention.ms`` with multiplier 3600000. A negative
    value (-1: unlimited) is passed through unscaled, as Kafka does.
    """

    name: str
    multiplier: int = 1

    def to_topic_value(self, value: object) -> object:
        """The topic key's value for this broker key's ``value``."""
        if self.multiplier == 1 or not isinstance(value, int) or value < 0:
            return value
        return value * self.multiplier
