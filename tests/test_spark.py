"""The odradek Spark format on a local Spark session against a broker in a subprocess.

One Spark session and one broker serve the whole module; each test works on its own topics.
The session is started without calling ``odradek.spark.register``: the format must be found
through the ``pyspark_odradek`` module, as it is for an installed odradek.
"""

from __future__ import annotations

import importlib
import itertools
import operator
import os
import re
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

if os.environ.get("CI") != "true":  # in CI a missing PySpark fails, as a missing Java does
    pytest.importorskip("pyspark", reason="the Spark tests need pip install -e '.[spark]'")

from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql import DataFrame, DataFrameReader, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.streaming import StreamingQuery  # noqa: E402
from serve_process import ServeProcess  # noqa: E402

import odradek.spark  # noqa: E402
import pyspark_odradek  # noqa: E402
from odradek.client import Admin, NewTopic, Producer  # noqa: E402
from odradek.record.memory_records import MemoryRecords  # noqa: E402
from odradek.topic_partition import TopicPartition  # noqa: E402

EXAMPLES = Path(__file__).parents[1] / "examples"
# ODRADEK_TEST_SPARK_MASTER=local-cluster[2,1,1024] runs the module with two executor processes,
# as on a cluster: nothing may depend on the driver and the executors sharing a process.
SPARK_MASTER = os.environ.get("ODRADEK_TEST_SPARK_MASTER", "local[2]")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Recent: retention would delete records stamped more than retention.ms (7 days) ago.
BASE_TIMESTAMP = int(time.time() * 1000)
# (key, value, headers): null keys and values, empty ones, headers with null values.
SAMPLES = [
    (b"k0", b"v0", ()),
    (None, b"v1", (("h1", b"x"), ("h2", None))),
    (b"k2", None, ()),
    (None, None, (("h", b""),)),
    (b"", b"", ()),
] + [(f"key-{i % 7}".encode(), f"value-{i}".encode() * 3, ()) for i in range(300)]

Row = tuple[Any, ...]
by_position = operator.itemgetter(2, 3, 4)  # a row's topic, partition and offset


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The broker's data directory."""
    return tmp_path_factory.mktemp("broker") / "data"


@pytest.fixture(scope="module")
def bootstrap(data_dir: Path) -> Iterator[str]:
    """``odradek serve`` in a subprocess; its host:port."""
    with ServeProcess(data_dir) as broker:
        yield broker.bootstrap


def require_java() -> None:
    """Skip without Java, except in CI (CI=true), where a missing Java is a failure."""
    if shutil.which("java") or os.environ.get("JAVA_HOME"):
        return
    reason = "the Spark tests need Java 17 (no java on PATH and no JAVA_HOME)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the test run, bound to loopback, UI off."""
    require_java()
    shim_root = str(Path(pyspark_odradek.__file__).parents[1])
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        # Spark looks data sources up by running PYSPARK_PYTHON (else python3 from PATH), not
        # spark.pyspark.python: without this the tests pass only from inside the venv.
        env.setenv("PYSPARK_PYTHON", sys.executable)
        # Where an installed odradek puts pyspark_odradek: on the Python workers' path.
        env.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [shim_root, os.getenv("PYTHONPATH")]))
        )
        session = (
            SparkSession.builder.master(SPARK_MASTER)
            .appName("odradek-tests")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


_topic_numbers = itertools.count()


@pytest.fixture
def new_topic(bootstrap: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Creates a topic named after the test; returns its name."""

    def create(partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        name = f"{request.node.name[:40]}-{next(_topic_numbers)}".replace("[", "-").strip("]")
        with Admin(bootstrap_servers=bootstrap) as admin:
            admin.create_topics([NewTopic(name, partitions, configs or {})])
        return name

    return create


def produce(
    bootstrap: str,
    topic: str,
    samples: Sequence[tuple[bytes | None, bytes | None, tuple]],
    partitions: int = 1,
    compression: str = "none",
) -> list[Row]:
    """Send ``samples`` round-robin over ``partitions``; the rows a read should give back."""
    with Producer(bootstrap_servers=bootstrap, compression_type=compression) as producer:
        sent = [
            (
                key,
                value,
                headers,
                BASE_TIMESTAMP + i,
                producer.send(topic, value, key, headers, i % partitions, BASE_TIMESTAMP + i),
            )
            for i, (key, value, headers) in enumerate(samples)
        ]
        producer.flush()
    rows = []
    for key, value, headers, timestamp, future in sent:
        where = future.result()
        rows.append((key, value, topic, where.partition, where.offset, timestamp, 0, headers))
    return rows


def read(spark: SparkSession, bootstrap: str, topics: str, **options: Any) -> DataFrame:
    """A batch read of ``topics``, with headers unless ``options`` say otherwise."""
    reader = spark.read.format("odradek").option("bootstrap", bootstrap)
    reader = reader.option("subscribe", topics).option("includeHeaders", "true")
    return reader.options(**options).load()


def rows_of(df: DataFrame) -> list[Row]:
    """Rows as tuples, timestamps in epoch milliseconds and headers as (key, value) tuples."""
    columns = ["key", "value", "topic", "partition", "offset"]
    selected = df.select(*columns, F.unix_millis("timestamp"), "timestampType", "headers")
    rows = [(*row[:7], tuple((h.key, h.value) for h in row[7])) for row in selected.collect()]
    return sorted(rows, key=by_position)


def positions(df: DataFrame) -> list[tuple[str, int, int]]:
    return sorted(tuple(row) for row in df.select("topic", "partition", "offset").collect())


# -- batch reads -------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("codec", CODECS)
def test_batch_read_gives_back_what_was_produced(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str], codec: str
) -> None:
    topic = new_topic(partitions=3)
    expected = produce(bootstrap, topic, SAMPLES, partitions=3, compression=codec)
    df = read(spark, bootstrap, topic)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert rows_of(df) == sorted(expected, key=by_position)


@pytest.mark.spark
def test_a_read_has_no_headers_column_unless_asked(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """As Spark's Kafka source: includeHeaders defaults to false, batch and streaming."""
    topic = new_topic(partitions=1)
    expected = produce(bootstrap, topic, SAMPLES[:5])
    df = read(spark, bootstrap, topic, includeHeaders="false")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    columns = ["key", "value", "topic", "partition", "offset"]
    rows = df.select(*columns, F.unix_millis("timestamp"), "timestampType").collect()
    assert sorted((tuple(row) for row in rows), key=repr) == sorted(
        (row[:7] for row in expected), key=repr
    )
    assert "headers" not in stream(spark, bootstrap, topic, includeHeaders="false").columns


@pytest.mark.spark
def test_offset_ranges_bound_the_read_and_stay_fixed_across_actions(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    produce(bootstrap, topic, SAMPLES[:20], partitions=2)
    df = read(
        spark,
        bootstrap,
        topic,
        startingOffsets=f'{{"{topic}": {{"0": 2, "1": -2}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 7, "1": -1}}}}',
    )
    wanted = [(topic, 0, o) for o in range(2, 7)] + [(topic, 1, o) for o in range(10)]
    assert positions(df) == wanted
    produce(bootstrap, topic, SAMPLES[:4], partitions=2)
    assert positions(df) == wanted
    assert df.count() == len(wanted)
    assert read(spark, bootstrap, topic).count() == 24


@pytest.mark.spark
def test_min_partitions_splits_ranges_in_proportion_to_their_size(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    produce(bootstrap, topic, SAMPLES[:6] + SAMPLES[:24], partitions=2)
    ending = f'{{"{topic}": {{"0": 5, "1": 10}}}}'
    df = read(spark, bootstrap, topic, endingOffsets=ending, minPartitions=6)
    assert df.rdd.getNumPartitions() == 6  # 5 and 10 offsets of 15: 2 parts and 4 parts
    per_task = df.rdd.mapPartitions(lambda rows: [[(r.partition, r.offset) for r in rows]])
    assert sorted(per_task.collect()) == [
        [(0, 0), (0, 1)],
        [(0, 2), (0, 3), (0, 4)],
        [(1, 0), (1, 1)],
        [(1, 2), (1, 3)],
        [(1, 4), (1, 5), (1, 6)],
        [(1, 7), (1, 8), (1, 9)],
    ]
    assert positions(df) == [(topic, 0, o) for o in range(5)] + [(topic, 1, o) for o in range(10)]


@pytest.mark.spark
def test_a_start_after_the_end_is_refused(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, SAMPLES[:3])
    starting, ending = f'{{"{topic}": {{"0": 2}}}}', f'{{"{topic}": {{"0": 1}}}}'
    df = read(spark, bootstrap, topic, startingOffsets=starting, endingOffsets=ending)
    with pytest.raises(Exception, match=f"{topic}-0: startingOffsets 2 is after endingOffsets 1"):
        df.count()


@pytest.mark.spark
def test_an_empty_topic_reads_as_no_rows(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    assert read(spark, bootstrap, new_topic()).count() == 0


@pytest.mark.spark
def test_assign_and_subscribe_pattern_choose_what_is_read(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    first, second = new_topic(partitions=2), new_topic(partitions=1)
    produce(bootstrap, first, SAMPLES[:10], partitions=2)
    produce(bootstrap, second, SAMPLES[:3])

    def reader() -> DataFrameReader:  # a new one each time: option() changes the reader
        return spark.read.format("odradek").option("bootstrap", bootstrap)

    assigned = reader().option("assign", f'{{"{first}": [1], "{second}": [0]}}').load()
    assert {(topic, partition) for topic, partition, _ in positions(assigned)} == {
        (first, 1),
        (second, 0),
    }
    assert len(positions(assigned)) == 5 + 3
    prefix = first.rsplit("-", 1)[0]  # both topics are named after this test
    matched = reader().option("subscribePattern", re.escape(prefix) + "-[0-9]+").load()
    assert len(positions(matched)) == 10 + 3
    with pytest.raises(Exception, match="assign names partitions that do not exist"):
        reader().option("assign", f'{{"{first}": [5]}}').load().count()


@pytest.mark.spark
def test_timestamps_choose_where_a_read_starts_and_ends(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Record i has timestamp BASE_TIMESTAMP + i: a read starts at the first record at or
    after startingTimestamp and ends before the first at or after endingOffsetsByTimestamp."""
    topic = new_topic(partitions=1)
    produce(bootstrap, topic, SAMPLES[:10])
    df = read(
        spark,
        bootstrap,
        topic,
        startingTimestamp=str(BASE_TIMESTAMP + 3),
        endingOffsetsByTimestamp=f'{{"{topic}": {{"0": {BASE_TIMESTAMP + 7}}}}}',
    )
    assert [offset for _, _, offset in positions(df)] == [3, 4, 5, 6]
    past_the_end = str(BASE_TIMESTAMP + 100)
    to_the_end = read(spark, bootstrap, topic, startingTimestamp="0", endingTimestamp=past_the_end)
    assert len(positions(to_the_end)) == 10  # no record at or after it: the end is the latest
    with pytest.raises(Exception, match="no record of .* has a timestamp at or after"):
        read(spark, bootstrap, topic, startingTimestamp=past_the_end).count()
    lenient = read(
        spark,
        bootstrap,
        topic,
        startingTimestamp=past_the_end,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert lenient.count() == 0


@pytest.mark.spark
def test_reading_a_missing_topic_fails_naming_it(spark: SparkSession, bootstrap: str) -> None:
    with pytest.raises(Exception, match="no such topic: nowhere"):
        read(spark, bootstrap, "nowhere").count()


@pytest.mark.spark
def test_deleted_records_fail_the_read_or_are_skipped_per_fail_on_data_loss(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, SAMPLES[:10])
    starting = f'{{"{topic}": {{"0": 0}}}}'
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.delete_records({TopicPartition(topic, 0): 4})
    with pytest.raises(Exception, match=f"offsets 0 to 3 of {topic}-0 are gone.*failOnDataLoss"):
        read(spark, bootstrap, topic, startingOffsets=starting).count()
    df = read(spark, bootstrap, topic, startingOffsets=starting, failOnDataLoss="false")
    assert positions(df) == [(topic, 0, o) for o in range(4, 10)]


# -- batch writes ------------------------------------------------------------------------------


@pytest.mark.spark
def test_write_then_read_back(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    rows = [
        ("a", b"1", 0, [("h", b"x")]),
        (None, b"2", 1, []),
        ("c", None, 1, [("h1", None), ("h2", b"")]),
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value binary, partition int, headers array<struct<key:string,value:binary>>",
    )
    writer = df.write.format("odradek").mode("append").option("bootstrap", bootstrap)
    writer.option("topic", topic).option("kafka.compression.type", "lz4").save()
    back = read(spark, bootstrap, topic).collect()
    assert sorted(
        [(r.key, r.value, r.partition, [(h.key, h.value) for h in r.headers]) for r in back],
        key=repr,
    ) == [
        (None, b"2", 1, []),
        (b"a", b"1", 0, [("h", b"x")]),
        (b"c", None, 1, [("h1", None), ("h2", b"")]),
    ]


@pytest.mark.spark
def test_write_routes_rows_by_their_topic_column(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    first, second = new_topic(), new_topic()
    df = spark.createDataFrame(
        [(first, "one"), (second, "two"), (first, "three")], "topic string, value string"
    )
    df.write.format("odradek").mode("append").option("bootstrap", bootstrap).save()
    back = read(spark, bootstrap, f"{first},{second}").select("topic", "value").collect()
    assert sorted(tuple(r) for r in back) == [
        (first, b"one"),
        (first, b"three"),
        (second, b"two"),
    ]


@pytest.mark.spark
def test_a_record_the_broker_refuses_fails_the_write_clearly(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(configs={"max.message.bytes": "1024"})
    df = spark.createDataFrame([(b"small",), (b"x" * 4000,)], "value binary")
    with pytest.raises(Exception, match=f"broker refused a record for topic '{topic}'.*TOO_LARGE"):
        df.write.format("odradek").mode("append").option("bootstrap", bootstrap).option(
            "topic", topic
        ).save()


@pytest.mark.spark
def test_write_without_a_value_column_is_refused_up_front(
    spark: SparkSession, bootstrap: str
) -> None:
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="needs a value column"):
        df.write.format("odradek").mode("append").option("bootstrap", bootstrap).option(
            "topic", "anything"
        ).save()


# -- streaming ---------------------------------------------------------------------------------


class Batches:
    """A foreachBatch sink: per micro-batch, the (topic, partition, offset) of its rows."""

    def __init__(self) -> None:
        self.seen: list[list[tuple[str, int, int]]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.seen.append(positions(df))

    def offsets(self) -> list[tuple[str, int, int]]:
        return sorted(itertools.chain.from_iterable(self.seen))


def stream(spark: SparkSession, bootstrap: str, topics: str, **options: Any) -> DataFrame:
    """A streaming read of ``topics``, with headers unless ``options`` say otherwise."""
    reader = spark.readStream.format("odradek").option("bootstrap", bootstrap)
    reader = reader.option("subscribe", topics).option("includeHeaders", "true")
    return reader.options(**options).load()


SPARK_START_ATTEMPTS = 3
# Spark 4's PythonWorkerFactory.createSimpleWorker waits a fixed 10 s (no setting changes it)
# for the interpreter it starts to connect back. The driver-side runner of a Python data
# source's stream reader (PythonStreamingSourceRunner) always starts its worker so, whatever
# spark.python.use.daemon or spark.python.worker.reuse say (those apply to the daemon's
# workers), and a new one for each query: on a machine running two suites, importing pyspark
# can take longer than that.
CONNECT_BACK_FAILED = "Python worker failed to connect back"


def started_again_if_its_source_did_not_start(
    start: Callable[[], StreamingQuery], wait: Callable[[StreamingQuery], object]
) -> StreamingQuery:
    """Start a query and ``wait`` on it; the query. A query Spark could not start because its
    source's Python worker did not connect back in time is started again from its checkpoint,
    as a user restarts a failed stream: only on that error and only when it failed before its
    first trigger, so nothing was read or written twice. Any other failure is raised."""
    for attempt in range(1, SPARK_START_ATTEMPTS + 1):
        query = start()
        try:
            wait(query)
            return query
        except BaseException as error:
            query.stop()
            not_started = (
                isinstance(error, StreamingQueryException)
                and CONNECT_BACK_FAILED in str(error)
                and not query.recentProgress
            )
            if not not_started or attempt == SPARK_START_ATTEMPTS:
                raise
            # Shown in the run's summary, so how often it happens stays visible.
            warnings.warn(
                f"{CONNECT_BACK_FAILED} in 10 s: the query is started again", stacklevel=2
            )
    raise AssertionError("unreachable")


def until_terminated(start: Callable[[], StreamingQuery], timeout_s: float = 120) -> StreamingQuery:
    """Start a query that ends by itself (``availableNow``) and wait until it has; the query."""
    query = started_again_if_its_source_did_not_start(
        start, lambda query: query.awaitTermination(timeout_s)
    )
    query.stop()
    return query


def running(start: Callable[[], StreamingQuery]) -> StreamingQuery:
    """Start a query that runs until it is stopped and let it process what is available; the
    running query."""
    return started_again_if_its_source_did_not_start(
        start, lambda query: query.processAllAvailable()
    )


def run_available_now(df: DataFrame, sink: Batches, checkpoint: Path) -> None:
    """Run the query until it has read what its topics held when it started."""
    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    until_terminated(writer.trigger(availableNow=True).start)


@pytest.mark.spark
def test_stream_reads_in_bounded_batches_and_restarts_where_it_stopped(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    produce(bootstrap, topic, SAMPLES[:10], partitions=2)
    df = stream(spark, bootstrap, topic, startingOffsets="earliest", maxOffsetsPerTrigger=4)
    first = Batches()
    run_available_now(df, first, tmp_path / "checkpoint")
    assert [len(batch) for batch in first.seen] == [4, 4, 2]
    assert first.offsets() == [(topic, p, o) for p in (0, 1) for o in range(5)]

    produce(bootstrap, topic, SAMPLES[:6], partitions=2)
    second = Batches()
    run_available_now(df, second, tmp_path / "checkpoint")
    assert second.offsets() == [(topic, p, o) for p in (0, 1) for o in range(5, 8)]


@pytest.mark.spark
def test_stream_from_latest_reads_only_what_comes_after_it_started(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, SAMPLES[:3])
    sink = Batches()
    writer = stream(spark, bootstrap, topic).writeStream.foreachBatch(sink)
    query = running(writer.option("checkpointLocation", str(tmp_path / "checkpoint")).start)
    try:
        produce(bootstrap, topic, SAMPLES[:2])
        query.processAllAvailable()
    finally:
        query.stop()
    assert sink.offsets() == [(topic, 0, 3), (topic, 0, 4)]


@pytest.mark.spark
def test_stream_from_a_timestamp_starts_at_the_first_record_that_late(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, SAMPLES[:6])  # record i has timestamp BASE_TIMESTAMP + i
    df = stream(spark, bootstrap, topic, startingTimestamp=str(BASE_TIMESTAMP + 4))
    sink = Batches()
    run_available_now(df, sink, tmp_path / "checkpoint")
    assert sink.offsets() == [(topic, 0, 4), (topic, 0, 5)]


@pytest.mark.spark
def test_min_offsets_per_trigger_holds_a_batch_back_until_enough_are_waiting(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, SAMPLES[:2])
    options = {"startingOffsets": "earliest", "minOffsetsPerTrigger": "3"}
    sink = Batches()
    writer = stream(spark, bootstrap, topic, **options).writeStream.foreachBatch(sink)
    # The first batch runs at once, with what there is.
    query = running(writer.option("checkpointLocation", str(tmp_path / "checkpoint")).start)
    try:
        produce(bootstrap, topic, SAMPLES[:2])
        query.processAllAvailable()  # 2 waiting, fewer than 3, within maxTriggerDelay (15m)
        held_back = len(sink.seen)
        produce(bootstrap, topic, SAMPLES[:1])
        query.processAllAvailable()
    finally:
        query.stop()
    assert held_back == 1
    assert [[offset for _, _, offset in batch] for batch in sink.seen] == [[0, 1], [2, 3, 4]]


@pytest.mark.spark
def test_stream_picks_up_a_subscribed_topic_created_later(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    present = new_topic()
    later = f"{present}-later"
    produce(bootstrap, present, SAMPLES[:2])
    df = stream(spark, bootstrap, f"{present},{later}", startingOffsets="earliest")
    first = Batches()
    run_available_now(df, first, tmp_path / "checkpoint")
    assert first.offsets() == [(present, 0, 0), (present, 0, 1)]

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(later, 2)])
    produce(bootstrap, later, SAMPLES[:4], partitions=2)
    second = Batches()
    run_available_now(df, second, tmp_path / "checkpoint")
    assert second.offsets() == [(later, p, o) for p in (0, 1) for o in range(2)]


@pytest.mark.spark
@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_stream_records_deleted_before_they_were_read(
    spark: SparkSession,
    bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    fail_on_data_loss: str,
) -> None:
    topic = new_topic()
    produce(bootstrap, topic, SAMPLES[:5])
    df = stream(
        spark, bootstrap, topic, startingOffsets="earliest", failOnDataLoss=fail_on_data_loss
    )
    run_available_now(df, Batches(), tmp_path / "checkpoint")
    produce(bootstrap, topic, SAMPLES[:5])
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.delete_records({TopicPartition(topic, 0): 8})
    after = Batches()
    if fail_on_data_loss == "true":
        with pytest.raises(Exception, match=f"offsets 5 to 7 of {topic}-0 are gone"):
            run_available_now(df, after, tmp_path / "checkpoint")
    else:
        run_available_now(df, after, tmp_path / "checkpoint")
        assert after.offsets() == [(topic, 0, 8), (topic, 0, 9)]


@pytest.mark.spark
def test_write_stream_copies_a_topic(
    spark: SparkSession,
    bootstrap: str,
    data_dir: Path,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    source, target = new_topic(partitions=2), new_topic()
    produced = produce(bootstrap, source, SAMPLES[:50], partitions=2)
    df = stream(spark, bootstrap, source, startingOffsets="earliest", maxOffsetsPerTrigger=20)
    writer = df.select("key", "value", "headers").writeStream.format("odradek")
    writer = writer.option("bootstrap", bootstrap).option("topic", target)
    writer = writer.option("checkpointLocation", str(tmp_path / "checkpoint"))
    query = until_terminated(writer.trigger(availableNow=True).start)
    copied = read(spark, bootstrap, target).select("key", "value", "headers").collect()
    as_tuples = sorted(
        ((r.key, r.value, tuple((h.key, h.value) for h in r.headers)) for r in copied), key=repr
    )
    assert as_tuples == sorted(((k, v, h) for k, v, _, _, _, _, _, h in produced), key=repr)
    # A write task per source range, but producers kept in the Python workers between tasks:
    # a task slot runs two workers here (one reads, one writes), so there are at most two
    # producers a slot, fewer than the tasks.
    write_tasks = 2 * sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
    segments = sorted((data_dir / f"{target}-0").glob("*.log"))
    batches = MemoryRecords(b"".join(segment.read_bytes() for segment in segments)).batches()
    producer_ids = {batch.producer_id for batch in batches}
    assert len(producer_ids) <= 2 * spark.sparkContext.defaultParallelism < write_tasks
    assert min(producer_ids) >= 0  # idempotent, as the producer is by default


# -- the example pipeline ----------------------------------------------------------------------


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """Imports a module of examples/ by name."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module


@pytest.mark.spark
def test_example_pipeline_counts_clicks_in_batch_and_in_a_restarted_stream(
    spark: SparkSession,
    bootstrap: str,
    example: Callable[[str], ModuleType],
    tmp_path: Path,
) -> None:
    topics, generator, job = map(example, ("click_topics", "generate_clicks", "count_clicks"))
    topics.ensure_pipeline_topics(bootstrap, "clicks", "counts-batch")
    topics.ensure_pipeline_topics(bootstrap, "clicks", "counts-stream")
    with Admin(bootstrap_servers=bootstrap) as admin:
        configs = admin.describe_configs(["counts-batch"])["counts-batch"]
    assert configs["cleanup.policy"].value == "compact"
    sent = generator.generate_clicks(bootstrap, 3000, "clicks")

    job.count_batch(spark, bootstrap, "clicks", "counts-batch")
    assert job.latest_counts(spark, bootstrap, "counts-batch") == sent

    checkpoint = str(tmp_path / "checkpoint")
    for _ in range(2):  # the second run starts from the first one's checkpoint
        until_terminated(
            lambda: job.count_stream(spark, bootstrap, checkpoint, True, "clicks", "counts-stream")
        )
        assert job.latest_counts(spark, bootstrap, "counts-stream") == sent
        sent += generator.generate_clicks(bootstrap, 1000, "clicks", seed=len(sent))


@pytest.mark.spark
def test_what_a_kafka_client_wrote_reads_identically(
    spark: SparkSession, bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Records produced by librdkafka over Kafka's protocol read as they were sent."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = new_topic(partitions=2)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5}
    )
    expected = []
    for i, (key, value, headers) in enumerate(SAMPLES[:50]):
        producer.produce(
            topic,
            value=value,
            key=key,
            partition=i % 2,
            timestamp=BASE_TIMESTAMP + i,
            headers=list(headers) or None,
        )
        expected.append((key, value, topic, i % 2, i // 2, BASE_TIMESTAMP + i, 0, headers))
    assert producer.flush(30) == 0

    assert rows_of(read(spark, bootstrap, topic)) == sorted(expected, key=by_position)


@pytest.mark.spark
def test_register_leaves_a_format_the_session_found_alone(spark: SparkSession) -> None:
    """Found through pyspark_odradek: registering again would replace it, with a warning."""
    assert odradek.spark.is_registered(spark)
    assert odradek.spark.register(spark) is False
    if SPARK_MASTER.startswith("local-cluster["):  # the driver and two executor processes
        assert spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() == 3


def test_the_streaming_example_says_where_each_micro_batch_spent_its_time(
    example: Callable[[str], ModuleType],
) -> None:
    job = example("count_clicks")
    progress = {
        "batchId": 4,
        "numInputRows": 5,
        "durationMs": {"addBatch": 2243, "latestOffset": 3, "triggerExecution": 2726},
    }
    assert job.describe_progress(progress) == (
        "micro-batch 4: 5 clicks in 2.7 s (latestOffset 0.0 s, addBatch 2.2 s)"
    )
