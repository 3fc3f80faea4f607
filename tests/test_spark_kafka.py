"""Spark's own Kafka source and sink (the spark-sql-kafka-0-10 connector, Apache Kafka's Java
client inside) through odradek's listener: what librdkafka wrote, ``spark.read.format("kafka")``
and ``readStream.format("kafka")`` read identically, and what ``write.format("kafka")`` wrote,
librdkafka reads. The connector's producer keeps its default, idempotence on: its batches are
stored with the producer id InitProducerId gave it and sequences from 0, each record once.

The connector matching the installed PySpark is resolved from Maven Central at test time (Ivy,
into ~/.ivy2) and used in a Spark job in its own process (tests/spark_kafka_job.py). Without
Java, or without Maven Central, the test skips outside CI and fails under CI=true.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from kafka_helpers import consume, create_topic
from serve_process import ServeProcess

from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import RecordBatch

if os.environ.get("CI") != "true":
    pytest.importorskip("pyspark", reason="the Spark tests need pip install -e '.[spark]'")

import pyspark  # noqa: E402

TESTS = Path(__file__).parent
JOB = TESTS / "spark_kafka_job.py"
IVY_SETTINGS = TESTS / "ivysettings-central.xml"
NEWEST_CONNECTOR = "4.2.0"
"""The newest connector on Maven Central when this was written: PySpark 4.3.0 is on PyPI, but
``spark-sql-kafka-0-10_2.13:4.3.0`` is not on Maven Central ("unresolved dependency ... not
found"). When the connector matching PySpark is missing, the job runs with this one, and the
test says so in a warning."""
RECORDS = 200
BASE_TIMESTAMP = int(time.time() * 1000) - 60_000


def require(condition: bool, reason: str) -> None:
    """Skip without ``condition``, except in CI (CI=true), where its absence is a failure."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("broker") / "data"


@pytest.fixture(scope="module")
def broker(data_dir: Path) -> Iterator[ServeProcess]:
    with ServeProcess(data_dir) as broker:
        yield broker


def stored_batches(data_dir: Path, topic: str, partition: int) -> list[RecordBatch]:
    """The batches in the partition's segment files, oldest first."""
    segments = sorted((data_dir / f"{topic}-{partition}").glob("*.log"))
    return list(MemoryRecords(b"".join(s.read_bytes() for s in segments)).batches())


def sample(i: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
    """Record ``i``: some null keys and values, some headers."""
    key = None if i % 11 == 0 else f"key-{i % 7}".encode()
    value = None if i % 13 == 0 else f"value-{i}".encode() * (1 + i % 5)
    headers = [("n", str(i).encode()), ("empty", b"")] if i % 3 == 0 else []
    return key, value, headers


def produce_with_librdkafka(bootstrap: str, topic: str) -> list[dict]:
    """RECORDS records over two partitions, lz4; the rows Spark should read for them."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5}
    )
    expected = []

    errors = []

    def delivered(i: int, error: object, message: confluent_kafka.Message) -> None:
        if error is not None:
            errors.append(error)
            return
        key, value, headers = sample(i)
        expected.append(
            {
                "topic": topic,
                "partition": message.partition(),
                "offset": message.offset(),
                "key": key.hex().upper() if key is not None else None,
                "value": value.hex().upper() if value is not None else None,
                "timestamp": message.timestamp()[1],
                "timestampType": 0,  # CreateTime
                "headers": [{"key": k, "value": v.hex().upper()} for k, v in headers],
            }
        )

    for i in range(RECORDS):
        key, value, headers = sample(i)
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=i % 2,
            timestamp=BASE_TIMESTAMP + i,
            headers=headers,
            on_delivery=functools.partial(delivered, i),
        )
    assert producer.flush(30) == 0
    assert errors == []
    return sorted(expected, key=position)


def position(row: dict) -> tuple[int, int]:
    return row["partition"], row["offset"]


def in_order(rows: list[dict]) -> list[dict]:
    """Rows by partition and offset, a record without headers with an empty list of them."""
    for row in rows:
        row["headers"] = row["headers"] or []
    return sorted(rows, key=position)


def run_job(version: str, bootstrap: str, topic: str, out_topic: str, result: Path) -> str:
    """The job's output; raises with it if the job failed."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [sys.executable, str(JOB), version, str(IVY_SETTINGS), bootstrap, topic]
    done = subprocess.run(
        command + [out_topic, str(result)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise JobFailed(output)
    return output


class JobFailed(Exception):
    pass


def unresolved(output: str) -> str | None:
    """Ivy's error when the connector could not be resolved, else None."""
    found = re.search(
        r"java\.lang\.RuntimeException: \[(unresolved dependency|download failed)[^\n]*", output
    )
    return found.group(0) if found else None


@pytest.mark.spark
def test_spark_reads_and_writes_through_its_own_kafka_connector(
    broker: ServeProcess, data_dir: Path, tmp_path: Path
) -> None:
    bootstrap = broker.bootstrap
    require(bool(shutil.which("java") or os.environ.get("JAVA_HOME")), "needs Java 17")
    topic, out_topic = "spark-kafka-in", "spark-kafka-out"
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, out_topic, 2)
    expected = produce_with_librdkafka(bootstrap, topic)
    result = tmp_path / "result.json"
    version = pyspark.__version__
    try:
        run_job(version, bootstrap, topic, out_topic, result)
    except JobFailed as failed:
        error = unresolved(str(failed))
        if error is None:
            raise
        if f"spark-sql-kafka-0-10_2.13;{version}: not found" not in error:
            require(False, f"Maven Central not reachable for the connector: {error}")
        warnings.warn(
            f"Maven Central has no spark-sql-kafka-0-10_2.13 {version} for PySpark {version} "
            f"({error}); the job ran with {NEWEST_CONNECTOR}",
            stacklevel=1,
        )
        version = NEWEST_CONNECTOR
        try:
            run_job(version, bootstrap, topic, out_topic, result)
        except JobFailed as failed_again:
            error = unresolved(str(failed_again))
            require(error is None, f"the connector could not be resolved: {error}")
            raise
    read = json.loads(result.read_text())

    assert in_order(read["whole"]) == expected
    assert in_order(read["streamed"]) == expected
    assert read["stream_batches"] >= RECORDS // 64  # maxOffsetsPerTrigger split it
    in_range = [
        row
        for row in expected
        if (row["partition"] == 0 and 10 <= row["offset"] < 20) or row["partition"] == 1
    ]
    assert in_order(read["ranges"]) == in_range

    written = consume(bootstrap, out_topic, 0, 25, partition=0)
    written += consume(bootstrap, out_topic, 0, 25, partition=1)
    assert sorted((m.key(), m.value(), m.partition()) for m in written) == sorted(
        (f"w{i}".encode(), f"written-{i}".encode(), i % 2) for i in range(50)
    )
    # Written idempotently, each record once: every batch carries a producer id and epoch, and
    # each producer's sequences in a partition run from 0 without a gap or a repeat.
    for partition in (0, 1):
        batches = stored_batches(data_dir, out_topic, partition)
        assert sum(batch.records_count for batch in batches) == 25
        assert all(batch.producer_id >= 0 and batch.producer_epoch >= 0 for batch in batches)
        next_sequence: dict[int, int] = {}
        for batch in batches:
            assert batch.base_sequence == next_sequence.get(batch.producer_id, 0)
            next_sequence[batch.producer_id] = batch.base_sequence + batch.records_count
    # The Java client asked for nothing the broker refuses (an API or version not served).
    refused = [line for line in broker.lines if "closing Kafka connection" in line]
    assert refused == []
