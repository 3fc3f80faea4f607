"""Spark format benchmark: a Spark batch read against the project's consumer, and a Spark write.

Runs ``odradek serve`` as its own process on a temporary data directory, produces
``--records`` records of 100 B to a topic of ``--partitions`` partitions, then measures in one
run, each ``--repeat`` times (the best is reported, the others only measure noise):

- the consumer: one Consumer reads every partition, with the settings the Spark reader uses;
- the Spark read: ``spark.read.format("odradek")`` into Spark's ``noop`` sink, so every row is
  read and converted but nothing else is done (the session is warm: one small read first);
- the Spark write: a DataFrame of as many 100 B values appended to a new topic.

Prints rows/s and the read ratio (target: Spark >= 50% of the consumer); asserts nothing.
Usage: ``PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/spark.py [--records 1000000]
[--partitions 4] [--master local[2]] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import odradek.spark
from odradek.client import Admin, Consumer, NewTopic, Producer
from odradek.spark.range_reader import READ_DEFAULTS
from odradek.topic_partition import TopicPartition

VALUE_BYTES = 100
ODRADEK = Path(sys.executable).with_name("odradek")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def broker(data_dir: Path) -> Iterator[str]:
    """``odradek serve`` on free ports; yields its bootstrap address."""
    port = free_port()
    command = [ODRADEK, "serve", "--data-dir", data_dir, "--port", port]
    command += ["--metrics-port", free_port()]
    with open(data_dir.parent / "serve.log", "w") as log:
        process = subprocess.Popen(list(map(str, command)), stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("odradek serve did not start") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(30)


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Create ``topic`` and produce ``records`` values of VALUE_BYTES; the produce rate."""
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    value = b"v" * VALUE_BYTES
    started = time.perf_counter()
    with Producer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024) as producer:
        for i in range(records):
            producer.send(topic, value, partition=i % partitions)
        producer.flush()
    return records / (time.perf_counter() - started)


def consumer_read(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Rows/s of one Consumer reading the whole topic."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **READ_DEFAULTS) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        started = time.perf_counter()
        seen = 0
        while seen < records:
            seen += len(c.poll(1000))
        return records / (time.perf_counter() - started)


def spark_read(spark: SparkSession, bootstrap: str, topic: str, records: int) -> float:
    """Rows/s of a Spark batch read of the whole topic into the noop sink."""
    df = spark.read.format("odradek").option("bootstrap", bootstrap).option("topic", topic).load()
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return records / (time.perf_counter() - started)


def spark_write(spark: SparkSession, bootstrap: str, topic: str, records: int) -> float:
    """Rows/s of a Spark write of ``records`` values of VALUE_BYTES to ``topic``."""
    value = F.lpad(F.col("id").cast("string"), VALUE_BYTES, "v").cast("binary")
    df = spark.range(records).select(value.alias("value"))
    writer = df.write.format("odradek").mode("append").option("bootstrap", bootstrap)
    started = time.perf_counter()
    writer.option("topic", topic).save()
    return records / (time.perf_counter() - started)


def session(master: str) -> SparkSession:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(master)
        .appName("bench-spark")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)  # for an editable install (make install): see docs/spark.md
    return spark


def best(repeat: int, measure: Callable[[int], float]) -> float:
    """The highest of ``repeat`` rates; ``measure`` gets the attempt's number."""
    return max(measure(attempt) for attempt in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    records, partitions = args.records, args.partitions
    with tempfile.TemporaryDirectory() as tmp, broker(Path(tmp) / "data") as bootstrap:
        produced = fill(bootstrap, "bench", partitions, records)
        fill(bootstrap, "warm-up", 1, 1000)
        spark = session(args.master)
        try:
            spark_read(spark, bootstrap, "warm-up", 1000)
            direct = best(
                args.repeat, lambda _: consumer_read(bootstrap, "bench", partitions, records)
            )
            read = best(args.repeat, lambda _: spark_read(spark, bootstrap, "bench", records))
            write = best(
                args.repeat, lambda i: spark_write(spark, bootstrap, f"written-{i}", records)
            )
        finally:
            spark.stop()
    print(f"{records:,} records of {VALUE_BYTES} B, {partitions} partitions, Spark {args.master}")
    print(f"produce (Producer, to fill):   {produced:12,.0f} rows/s")
    print(f"read    (one Consumer):        {direct:12,.0f} rows/s")
    print(
        f"read    (Spark, noop sink):    {read:12,.0f} rows/s  {read / direct:.0%} of the consumer"
    )
    print(f"write   (Spark, odradek sink): {write:12,.0f} rows/s")


if __name__ == "__main__":
    main()
