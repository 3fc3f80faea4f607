"""The Spark format's planning without Spark: options, offset specs, ranges, rate limits, rows."""

from __future__ import annotations

import os
from collections.abc import Iterable

import pytest

if os.environ.get("CI") != "true":  # in CI a missing PySpark fails the run
    pytest.importorskip("pyspark", reason="the Spark tests need pip install -e '.[spark]'")

import pyarrow as pa  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from odradek.client import ConsumerRecord  # noqa: E402
from odradek.client.config import ProducerConfig  # noqa: E402
from odradek.errors import InvalidConfigError, UnsupportedCompressionTypeError  # noqa: E402
from odradek.record.record_batch import TimestampType  # noqa: E402
from odradek.spark.arrow_records import records_to_batch  # noqa: E402
from odradek.spark.client_options import client_configs  # noqa: E402
from odradek.spark.offset_range import OffsetRange, offset_ranges, split_ranges  # noqa: E402
from odradek.spark.offset_spec import EARLIEST, LATEST, OffsetSpec  # noqa: E402
from odradek.spark.option_values import parse_duration_ms  # noqa: E402
from odradek.spark.partition_offsets import offsets_from_json, offsets_to_json  # noqa: E402
from odradek.spark.rate_limit import rate_limit  # noqa: E402
from odradek.spark.record_sender import rows  # noqa: E402
from odradek.spark.schema import HEADER, source_schema  # noqa: E402
from odradek.spark.sink_options import SinkOptions  # noqa: E402
from odradek.spark.source_options import SourceOptions, include_headers  # noqa: E402
from odradek.spark.subscription import Subscription  # noqa: E402
from odradek.spark.trigger_delay import TriggerDelay  # noqa: E402
from odradek.topic_partition import TopicPartition  # noqa: E402

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def source(streaming: bool = False, **options: str) -> SourceOptions:
    return SourceOptions.parse({"bootstrap": "h:1", "subscribe": "a", **options}, streaming)


# -- offsets -----------------------------------------------------------------------------------


def test_offsets_json_round_trips_in_sparks_layout() -> None:
    offsets = {A1: 7, A0: 3, B0: 0}
    assert offsets_to_json(offsets) == {"a": {"0": 3, "1": 7}, "b": {"0": 0}}
    assert offsets_from_json(offsets_to_json(offsets)) == offsets


def test_offset_spec_resolves_keywords_and_json_against_the_log_bounds() -> None:
    earliest, latest = {A0: 2, A1: 0}, {A0: 9, A1: 5}
    assert OffsetSpec.parse("Earliest", "o").resolve([A0, A1], earliest, latest) == earliest
    assert OffsetSpec.parse("latest", "o").resolve([A0, A1], earliest, latest) == latest
    spec = OffsetSpec.parse('{"a": {"0": -2, "1": 4}}', "o")
    assert spec.resolve([A0, A1], earliest, latest) == {A0: 2, A1: 4}
    assert OffsetSpec.parse('{"a": {"0": -1}}', "o").resolve([A0], earliest, latest) == {A0: 9}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("soonest", "must be earliest, latest or JSON"),
        ('["a"]', "must be earliest, latest or JSON"),
        ('{"a": {"x": 1}}', "must be earliest, latest or JSON"),
        ('{"a": {"0": -3}}', "a-0 has offset -3, below -2"),
    ],
)
def test_offset_spec_rejects_what_is_not_an_offset(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OffsetSpec.parse(text, "startingOffsets")


def test_timestamp_specs_resolve_to_the_offsets_found_or_fail_or_take_the_latest() -> None:
    latest = {A0: 9, A1: 5}
    spec = OffsetSpec.at_timestamp("1500", "startingTimestamp", latest_when_no_match=False)
    assert spec.timestamps_for([A0, A1]) == {A0: 1500, A1: 1500}
    assert spec.resolve([A0, A1], {}, latest, {A0: 3, A1: 0}) == {A0: 3, A1: 0}
    with pytest.raises(ValueError, match="startingTimestamp: no record of a-1 has a timestamp"):
        spec.resolve([A0, A1], {}, latest, {A0: 3, A1: -1})
    lenient = OffsetSpec.by_timestamps('{"a": {"0": 7, "1": 8}}', "o", latest_when_no_match=True)
    assert lenient.timestamps_for([A0, A1]) == {A0: 7, A1: 8}
    assert lenient.resolve([A0, A1], {}, latest, {A0: 4, A1: -1}) == {A0: 4, A1: 5}
    with pytest.raises(ValueError, match="o names no timestamp for a-1; name every partition$"):
        OffsetSpec.by_timestamps('{"a": {"0": 7}}', "o", False).timestamps_for([A0, A1])
    assert OffsetSpec.parse("earliest", "o").timestamps_for([A0]) == {}


@pytest.mark.parametrize(
    ("options", "streaming", "option", "timestamp"),
    [
        (
            {"startingTimestamp": "5", "startingOffsetsByTimestamp": '{"a": {"0": 6}}'},
            False,
            "startingTimestamp",
            5,
        ),
        (
            {"startingOffsetsByTimestamp": '{"a": {"0": 6}}', "startingOffsets": "earliest"},
            True,
            "startingOffsetsByTimestamp",
            None,
        ),
        ({"endingTimestamp": "9", "endingOffsets": "latest"}, False, "endingTimestamp", 9),
    ],
)
def test_timestamps_beat_offsets_as_in_spark(
    options: dict[str, str], streaming: bool, option: str, timestamp: int | None
) -> None:
    parsed = source(streaming, **options)
    spec = parsed.ending if option.startswith("ending") else parsed.starting
    assert (spec.option, spec.timestamp) == (option, timestamp)
    assert spec.latest_when_no_match is option.startswith("ending")
    strategy = source(startingTimestamp="5", startingOffsetsByTimestampStrategy="Latest")
    assert strategy.starting.latest_when_no_match is True


def test_offset_spec_json_must_name_exactly_the_partitions_read() -> None:
    spec = OffsetSpec.parse('{"a": {"0": 1}}', "startingOffsets")
    with pytest.raises(ValueError, match="startingOffsets names no offset for a-1"):
        spec.resolve([A0, A1], {}, {})
    spec = OffsetSpec.parse('{"a": {"0": 1}, "b": {"0": 2}}', "startingOffsets")
    with pytest.raises(ValueError, match="names a-0, not a partition of the topics read"):
        spec.resolve([B0], {}, {})


# -- options -----------------------------------------------------------------------------------


def test_source_options_have_sparks_defaults() -> None:
    batch, stream = source(), source(streaming=True)
    assert (batch.starting.keyword, batch.ending.keyword) == (EARLIEST, LATEST)
    assert stream.starting.keyword == LATEST
    assert batch.fail_on_data_loss is True
    assert batch.min_partitions is None and batch.max_offsets_per_trigger is None
    assert batch.include_headers is False


def test_include_headers_adds_the_headers_column_to_the_schema() -> None:
    """Spark's Kafka source has no headers column unless includeHeaders is true."""
    assert "headers" not in source_schema(include_headers({"subscribe": "a"})).names
    with_headers = source_schema(include_headers({"INCLUDEHEADERS": "True"}))
    assert with_headers.names[-1] == "headers"
    assert with_headers.fields[:-1] == source_schema(False).fields
    assert source(includeHeaders="true").include_headers is True


def test_source_options_read_any_case_and_pass_kafka_settings_typed() -> None:
    given = {
        "bootstrap": "h:1",
        "topic": "a, b ,a",
        "minPartitions": "8",
        "FAILONDATALOSS": "False",
        "kafka.max.poll.records": "50",
        "kafka.check.crcs": "false",
    }
    options = SourceOptions.parse(given, streaming=False)
    assert options.subscription == Subscription(topics=("a", "b"))
    assert options.min_partitions == 8
    assert options.fail_on_data_loss is False
    assert options.client_configs() == {
        "bootstrap_servers": "h:1",
        "max_poll_records": 50,
        "check_crcs": False,
    }


def test_kafka_bootstrap_servers_stands_in_for_bootstrap() -> None:
    options = SourceOptions.parse({"kafka.bootstrap.servers": "k:2", "subscribe": "a"}, False)
    assert options.client_configs() == {"bootstrap_servers": "k:2"}


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"bootstrap": ""}, False, "option bootstrap .* is required"),
        ({"topic": "b"}, False, "exactly one of the options subscribe .*, subscribePattern and"),
        ({"assign": '{"a": [0]}'}, False, "exactly one of the options subscribe"),
        ({"subscribe": " , "}, False, "option subscribe names no topic"),
        ({"startingOffsets": "latest"}, False, "startingOffsets cannot be latest"),
        ({"startingOffsets": '{"a": {"0": -1}}'}, False, "startingOffsets cannot be latest"),
        ({"endingOffsets": "earliest"}, False, "endingOffsets cannot be earliest"),
        ({"endingOffsets": "latest"}, True, "endingOffsets is for batch reads"),
        ({"minPartitions": "0"}, False, "minPartitions must be > 0"),
        ({"maxOffsetsPerTrigger": "many"}, True, "maxOffsetsPerTrigger must be an integer"),
        ({"failOnDataLoss": "maybe"}, False, "failOnDataLoss must be true or false"),
        ({"includeHeaders": "yes"}, False, "includeHeaders must be true or false"),
        ({"startingTimestamp": "soon"}, False, "startingTimestamp must be an integer"),
        ({"startingTimestamp": "-1"}, False, "startingTimestamp must be a timestamp >= 0"),
        ({"endingOffsetsByTimestamp": "[]"}, False, "endingOffsetsByTimestamp must be JSON like"),
        ({"startingOffsetsByTimestamp": '{"a": {"0": -5}}'}, False, "a-0 has timestamp -5"),
        ({"endingTimestamp": "5"}, True, "endingTimestamp is for batch reads"),
        (
            {"startingTimestamp": "5", "startingOffsetsByTimestampStrategy": "skip"},
            False,
            "startingOffsetsByTimestampStrategy must be error or latest",
        ),
        ({"kafka.fetch.max.wait.ms": "x"}, False, "kafka.fetch.max.wait.ms must be an integer"),
        ({"kafka.linger.ms": "5"}, False, "kafka.linger.ms is not a setting of ConsumerConfig"),
    ],
)
def test_source_options_say_what_is_wrong(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        source(streaming, **options)


class FakeLookup:
    """The partitions a broker with topics a (2 partitions), ab and b (1 each) has."""

    PARTITIONS = (A0, A1, TopicPartition("ab", 0), B0)

    def partitions(self, topics: Iterable[str] | None) -> list[TopicPartition]:
        wanted = None if topics is None else set(topics)
        return [tp for tp in self.PARTITIONS if wanted is None or tp.topic in wanted]


def subscription(**options: str) -> Subscription:
    return Subscription.parse({name.lower(): value for name, value in options.items()})


def test_subscribe_pattern_matches_whole_topic_names_at_each_lookup() -> None:
    pattern = subscription(subscribePattern="a.*")
    matched = pattern.partitions(FakeLookup(), require_topics=True)
    assert matched == [A0, A1, TopicPartition("ab", 0)]
    assert subscription(subscribePattern="b").partitions(FakeLookup(), True) == [B0]
    assert subscription(subscribePattern="x").partitions(FakeLookup(), True) == []


def test_assign_reads_exactly_the_named_partitions_which_must_exist() -> None:
    assigned = subscription(assign='{"a": [1], "b": [0]}')
    assert assigned.partitions(FakeLookup(), require_topics=False) == [A1, B0]
    with pytest.raises(ValueError, match=r"assign names partitions that do not exist: \['a-7'\]"):
        subscription(assign='{"a": [1, 7]}').partitions(FakeLookup(), require_topics=False)


def test_subscribe_needs_its_topics_only_in_a_batch_read() -> None:
    subscribed = subscription(subscribe="a,nowhere")
    assert subscribed.partitions(FakeLookup(), require_topics=False) == [A0, A1]
    with pytest.raises(ValueError, match="no such topic: nowhere"):
        subscribed.partitions(FakeLookup(), require_topics=True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"assign": "a:0"}, "option assign must be JSON like"),
        ({"assign": '{"a": 0}'}, "option assign must be JSON like"),
        ({"assign": '{"a": [-1]}'}, "option assign must be JSON like"),
        ({"assign": '{"a": [true]}'}, "option assign must be JSON like"),
        ({"assign": '{"a": []}'}, "option assign names no partition"),
        ({"subscribePattern": " "}, "option subscribePattern is empty"),
        ({"subscribePattern": "a("}, "'a\\(' is no regular expression"),
        ({"subscribe": "a", "subscribePattern": "a"}, "exactly one of the options"),
    ],
)
def test_subscription_options_say_what_is_wrong(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        subscription(**options)


def test_min_offsets_per_trigger_waits_for_enough_offsets_or_the_delay() -> None:
    now = [100.0]
    delay = TriggerDelay(min_offsets=10, max_delay_s=60, clock=lambda: now[0])
    assert not delay.holds_back(3)  # the first batch runs at once
    now[0] += 1
    assert not delay.holds_back(0)  # nothing waiting: no batch, and none counted
    assert delay.holds_back(9)
    assert not delay.holds_back(10)  # enough waiting
    now[0] += 59
    assert delay.holds_back(1)
    now[0] += 1
    assert not delay.holds_back(1)  # a minute since the last batch ran
    assert delay.holds_back(1)


def test_trigger_options_take_sparks_durations() -> None:
    options = source(True, minOffsetsPerTrigger="500", maxTriggerDelay="30s")
    assert (options.min_offsets_per_trigger, options.max_trigger_delay_ms) == (500, 30_000)
    assert source(True).max_trigger_delay_ms == 15 * 60_000
    for text, ms in (("250", 250), ("2 min", 120_000), ("1h", 3_600_000), ("10ms", 10)):
        assert parse_duration_ms(text, "o") == ms
    with pytest.raises(ValueError, match="maxTriggerDelay must be a duration such as"):
        source(True, maxTriggerDelay="soon")
    with pytest.raises(ValueError, match="minOffsetsPerTrigger must be > 0"):
        source(True, minOffsetsPerTrigger="0")


def test_producer_settings_are_typed_after_their_defaults() -> None:
    options = {"kafka.acks": "1", "kafka.linger.ms": "20", "kafka.compression.type": "zstd"}
    assert client_configs(options, ProducerConfig) == {
        "acks": "1",
        "linger_ms": 20,
        "compression_type": "zstd",
    }


def test_bad_client_settings_fail_where_the_options_are_read() -> None:
    with pytest.raises(InvalidConfigError, match="max_poll_records must be > 0"):
        source(**{"kafka.max.poll.records": "0"})
    schema = sink_schema(("value", BinaryType()))
    with pytest.raises(UnsupportedCompressionTypeError, match="unknown compression type 'brotli'"):
        SinkOptions.parse(
            {"bootstrap": "h:1", "topic": "t", "kafka.compression.type": "brotli"}, schema
        )


def sink_schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in fields])


def test_sink_options_accept_sparks_kafka_columns() -> None:
    schema = sink_schema(
        ("key", StringType()),
        ("value", BinaryType()),
        ("partition", IntegerType()),
        ("headers", ArrayType(HEADER)),
        ("extra", IntegerType()),
    )
    sink = SinkOptions.parse({"bootstrap": "h:1", "topic": "t", "kafka.linger.ms": "0"}, schema)
    assert sink == SinkOptions("h:1", "t", {"linger_ms": 0})


@pytest.mark.parametrize(
    ("fields", "options", "message"),
    [
        ((("key", StringType()),), {"topic": "t"}, "needs a value column"),
        ((("value", StringType()),), {}, "the option topic, or a topic column"),
        ((("value", IntegerType()),), {"topic": "t"}, "column value is int; it must be binary"),
        (
            (("value", StringType()), ("partition", StringType())),
            {"topic": "t"},
            "column partition is string; it must be int",
        ),
    ],
)
def test_sink_options_refuse_columns_a_write_cannot_use(
    fields: tuple, options: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        SinkOptions.parse({"bootstrap": "h:1", **options}, sink_schema(*fields))


# -- ranges and limits -------------------------------------------------------------------------


def test_ranges_leave_out_empty_partitions() -> None:
    assert offset_ranges({A0: 3, A1: 5}, {A0: 6, A1: 5}) == [OffsetRange("a", 0, 3, 6)]


def test_split_ranges_divides_like_sparks_kafka_source() -> None:
    ranges = [OffsetRange("a", 0, 0, 5), OffsetRange("a", 1, 100, 110)]
    assert split_ranges(ranges, 6) == [
        OffsetRange("a", 0, 0, 2),
        OffsetRange("a", 0, 2, 5),
        OffsetRange("a", 1, 100, 102),
        OffsetRange("a", 1, 102, 104),
        OffsetRange("a", 1, 104, 107),
        OffsetRange("a", 1, 107, 110),
    ]
    assert split_ranges(ranges, 2) == ranges
    assert split_ranges(ranges, None) == ranges


def test_split_ranges_keeps_a_part_for_a_tiny_range() -> None:
    ranges = [OffsetRange("a", 0, 0, 1), OffsetRange("a", 1, 0, 99)]
    split = split_ranges(ranges, 4)
    assert split[0] == OffsetRange("a", 0, 0, 1)
    assert len(split) == 5


def test_rate_limit_shares_the_limit_by_backlog_without_starving_small_partitions() -> None:
    starts = {A0: 0, A1: 10, B0: 5}
    ends = {A0: 90, A1: 19, B0: 6}
    assert rate_limit(starts, ends, 10) == {A0: 9, A1: 11, B0: 6}
    assert rate_limit(starts, ends, 1000) == ends


def test_rate_limit_leaves_partitions_without_backlog_alone() -> None:
    assert rate_limit({A0: 4}, {A0: 4}, 10) == {A0: 4}


# -- rows --------------------------------------------------------------------------------------


def test_records_become_a_batch_in_the_source_schema() -> None:
    records = [
        ConsumerRecord("a", 1, 7, 1500, TimestampType.LOG_APPEND_TIME, b"k", b"v", (("h", b"x"),)),
        ConsumerRecord("a", 1, 8, 1501, TimestampType.CREATE_TIME, None, None, ()),
    ]
    assert records_to_batch(records).schema.names == source_schema(False).names
    batch = records_to_batch(records, include_headers=True)
    assert batch.schema.names == source_schema(True).names
    columns = batch.to_pydict()
    assert columns["offset"] == [7, 8]
    assert columns["partition"] == [1, 1]
    assert [t.timestamp() for t in columns["timestamp"]] == [1.5, 1.501]
    assert columns["timestampType"] == [1, 0]
    assert columns["key"] == [b"k", None] and columns["value"] == [b"v", None]
    assert columns["headers"] == [[{"key": "h", "value": b"x"}], []]


def test_rows_take_strings_as_utf8_and_the_topic_option_over_the_column() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "value": pa.array(["é", None]),
            "key": pa.array([b"k", None]),
            "topic": pa.array(["ignored", "ignored"]),
            "partition": pa.array([3, None], pa.int32()),
            "headers": pa.array(
                [[{"key": "h", "value": b"1"}], None],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
        }
    )
    assert list(rows(batch, "t")) == [
        ("t", "é".encode(), b"k", (("h", b"1"),), 3),
        ("t", None, None, (), None),
    ]


def test_rows_without_a_topic_refuse_a_null_one() -> None:
    batch = pa.RecordBatch.from_pydict({"value": [b"v"], "topic": pa.array([None], pa.string())})
    with pytest.raises(ValueError, match="a row has a null topic"):
        list(rows(batch, None))
