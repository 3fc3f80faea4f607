"""The options of a read, checked once where Spark hands them over."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.client.config import ConsumerConfig
from odradek.spark.client_options import client_configs, take_bootstrap
from odradek.spark.offset_spec import EARLIEST, LATEST, OffsetSpec
from odradek.spark.option_values import parse_bool, parse_duration_ms, parse_positive_int
from odradek.spark.subscription import Subscription

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000  # maxTriggerDelay, as Spark's Kafka source


@dataclass(frozen=True)
class SourceOptions:
    """Where to read from and how: Spark's Kafka source options, plus ``bootstrap``.

    ``consumer_configs`` are the ``kafka.*`` options as consumer settings.
    """

    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    include_headers: bool = False
    consumer_configs: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> SourceOptions:
        """Check ``options`` (keys in any case).

        ValueError, or the client's error for a bad ``kafka.*`` value, says what is wrong.
        """
        options = {name.lower(): value for name, value in options.items()}
        configs = client_configs(options, ConsumerConfig)
        source = cls(
            bootstrap=take_bootstrap(options, configs),
            subscription=Subscription.parse(options),
            starting=_starting(options, streaming),
            ending=_ending(options, streaming),
            min_partitions=_optional_positive(options, "minPartitions"),
            fail_on_data_loss=parse_bool(options.get("failondataloss", "true"), "failOnDataLoss"),
            max_offsets_per_trigger=_optional_positive(options, "maxOffsetsPerTrigger"),
            min_offsets_per_trigger=_optional_positive(options, "minOffsetsPerTrigger"),
            max_trigger_delay_ms=parse_duration_ms(
                options.get("maxtriggerdelay", "15m"), "maxTriggerDelay"
            ),
            include_headers=include_headers(options),
            consumer_configs=configs,
        )
        ConsumerConfig(**source.client_configs())  # a bad setting fails now, not in every task
        return source

    def client_configs(self) -> dict[str, Any]:
        """Keyword arguments for a consumer reading with these options."""
        return {"bootstrap_servers": self.bootstrap, **self.consumer_configs}


def include_headers(options: Mapping[str, str]) -> bool:
    """The option includeHeaders (default false, as Spark's Kafka source): whether rows have a
    headers column. Needed before the other options are checked, for the schema."""
    given = [value for name, value in options.items() if name.lower() == "includeheaders"]
    return bool(given) and parse_bool(given[-1], "includeHeaders")


def _starting(options: Mapping[str, str], streaming: bool) -> OffsetSpec:
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError(
            f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}"
        )
    by_timestamp = _timestamp_spec(options, "starting", latest_when_no_match=strategy == "latest")
    if by_timestamp is not None:
        return by_timestamp
    default = "latest" if streaming else "earliest"
    spec = OffsetSpec.parse(options.get("startingoffsets", default), "startingOffsets")
    if not streaming and spec.mentions(LATEST):
        raise ValueError("option startingOffsets cannot be latest (-1) for a batch read")
    return spec


def _ending(options: Mapping[str, str], streaming: bool) -> OffsetSpec:
    if streaming:
        given = [name for name in _ENDING_OPTIONS if name.lower() in options]
        if given:
            raise ValueError(f"option {given[0]} is for batch reads; a stream has no end")
        return OffsetSpec("endingOffsets", LATEST)
    # As Spark: an ending timestamp with no record at or after it ends at the latest offset.
    by_timestamp = _timestamp_spec(options, "ending", latest_when_no_match=True)
    if by_timestamp is not None:
        return by_timestamp
    spec = OffsetSpec.parse(options.get("endingoffsets", "latest"), "endingOffsets")
    if spec.mentions(EARLIEST):
        raise ValueError("option endingOffsets cannot be earliest (-2)")
    return spec


_ENDING_OPTIONS = ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp")


def _timestamp_spec(
    options: Mapping[str, str], side: str, latest_when_no_match: bool
) -> OffsetSpec | None:
    """``<side>Timestamp`` (it wins, as in Spark) or ``<side>OffsetsByTimestamp``, if given."""
    for name, make in (
        (f"{side}Timestamp", OffsetSpec.at_timestamp),
        (f"{side}OffsetsByTimestamp", OffsetSpec.by_timestamps),
    ):
        if name.lower() in options:
            return make(options[name.lower()], name, latest_when_no_match)
    return None


def _optional_positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    return None if text is None else parse_positive_int(text, name)
