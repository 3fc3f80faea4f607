"""Spark's own Kafka source and sink against a broker: run as its own process by
tests/test_spark_kafka.py, since the connector's jars must be on the JVM's class path from its
start (a Spark session already started in the test process could not load them).

Usage: spark_kafka_job.py CONNECTOR_VERSION IVY_SETTINGS BOOTSTRAP TOPIC OUT_TOPIC RESULT_JSON

Reads TOPIC with ``spark.read.format("kafka")`` (whole, and a range of each partition by
``assign``) and with ``readStream.format("kafka")`` (several micro-batches), writes rows to
OUT_TOPIC with ``write.format("kafka")``, and writes what it read to RESULT_JSON.
"""

from __future__ import annotations

import json
import sys
import tempfile

from pyspark.sql import DataFrame, SparkSession

COLUMNS = [
    "topic",
    "partition",
    "offset",
    "hex(key) AS key",
    "hex(value) AS value",
    "unix_millis(timestamp) AS timestamp",
    "timestampType",
    "transform(headers, h -> struct(h.key AS key, hex(h.value) AS value)) AS headers",
]
# Spark ships these itself; the copies the connector's kafka-clients asks for would sit beside
# them on the class path.
EXCLUDES = "at.yawk.lz4:lz4-java,org.lz4:lz4-java,org.xerial.snappy:snappy-java"


def rows(frame: DataFrame) -> list[dict]:
    return [row.asDict(recursive=True) for row in frame.selectExpr(*COLUMNS).collect()]


def main(version: str, ivy_settings: str, bootstrap: str, topic: str, out_topic: str) -> dict:
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-spark-kafka")
        .config("spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}")
        .config("spark.jars.ivySettings", ivy_settings)
        .config("spark.jars.excludes", EXCLUDES)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    source = {"kafka.bootstrap.servers": bootstrap, "includeHeaders": "true"}
    whole = rows(
        spark.read.format("kafka")
        .options(**source)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    ranges = rows(
        spark.read.format("kafka")
        .options(**source)
        .option("assign", json.dumps({topic: [0, 1]}))
        .option("startingOffsets", json.dumps({topic: {"0": 10, "1": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 20, "1": -1}}))
        .load()
    )
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            spark.readStream.format("kafka")
            .options(**source)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "64")
            .load()
            .selectExpr(*COLUMNS)
            .writeStream.format("memory")
            .queryName("streamed")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        batches = len(query.recentProgress)
        streamed = [row.asDict(recursive=True) for row in spark.table("streamed").collect()]
    written = spark.createDataFrame(
        [(f"w{i}", f"written-{i}", i % 2) for i in range(50)],
        "key string, value string, partition int",
    )
    # The connector's producer is idempotent by default (kafka-clients 3.0+): left so.
    (
        written.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out_topic)
        .save()
    )
    spark_version = spark.version
    spark.stop()
    return {
        "whole": whole,
        "ranges": ranges,
        "streamed": streamed,
        "stream_batches": batches,
        "spark_version": spark_version,
    }


if __name__ == "__main__":
    version, ivy_settings, bootstrap, topic, out_topic, result = sys.argv[1:]
    with open(result, "w") as out:
        json.dump(main(version, ivy_settings, bootstrap, topic, out_topic), out)
