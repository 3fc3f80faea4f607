"""Counts clicks per page with Spark and keeps the counts in the compacted ``click-counts`` topic.

    python examples/count_clicks.py batch      # count everything in clicks once
    python examples/count_clicks.py stream     # keep counting as clicks arrive (Ctrl-C stops)
    python examples/count_clicks.py show       # print the latest count per page

Each count is a record keyed by page with the count as its value; compaction keeps the last
one per page. The batch job writes every page's total once. The streaming job writes every
page's running total after each micro-batch (output mode complete: Spark's Python data sources
do not take update) and keeps the totals in its checkpoint, so a restart goes on where it
stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from click_topics import CLICK_COUNTS, CLICKS, ensure_pipeline_topics
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

import odradek.spark

CLICK = "user string, page string, at long"


def page_counts(clicks: DataFrame) -> DataFrame:
    """Click records (the odradek schema) -> (key: page, value: count), both strings."""
    events = clicks.select(F.from_json(F.col("value").cast("string"), CLICK).alias("click"))
    counts = events.groupBy(F.col("click.page").alias("key")).count()
    return counts.select("key", F.col("count").cast("string").alias("value"))


def count_batch(
    spark: SparkSession, bootstrap: str, clicks: str = CLICKS, counts: str = CLICK_COUNTS
) -> None:
    """Count every click in the topic now and write each page's total."""
    reader = spark.read.format("odradek").option("bootstrap", bootstrap)
    writer = page_counts(reader.option("topic", clicks).load()).write.format("odradek")
    writer.mode("append").option("bootstrap", bootstrap).option("topic", counts).save()


def count_stream(
    spark: SparkSession,
    bootstrap: str,
    checkpoint: str,
    available_now: bool = False,
    clicks: str = CLICKS,
    counts: str = CLICK_COUNTS,
) -> StreamingQuery:
    """Start counting clicks as they arrive; each micro-batch writes every page's total.

    ``available_now`` counts what the topic holds and stops; otherwise a micro-batch runs
    every five seconds.
    """
    reader = spark.readStream.format("odradek").option("bootstrap", bootstrap)
    reader = reader.option("subscribe", clicks).option("startingOffsets", "earliest")
    writer = page_counts(reader.load()).writeStream.format("odradek").outputMode("complete")
    writer = writer.option("bootstrap", bootstrap).option("topic", counts)
    writer = writer.option("checkpointLocation", checkpoint)
    trigger = {"availableNow": True} if available_now else {"processingTime": "5 seconds"}
    return writer.trigger(**trigger).start()


def latest_counts(
    spark: SparkSession, bootstrap: str, counts: str = CLICK_COUNTS
) -> dict[str, int]:
    """The last count written for each page (compaction keeps it; until then, take the last)."""
    reader = spark.read.format("odradek").option("bootstrap", bootstrap)
    records = reader.option("topic", counts).load()
    last_first = Window.partitionBy("key").orderBy(F.col("offset").desc())
    latest = records.withColumn("rank", F.row_number().over(last_first)).where("rank = 1")
    rows = latest.select(F.col("key").cast("string"), F.col("value").cast("string")).collect()
    return {row.key: int(row.value) for row in rows}


# Compile the JVM's hot code with the quick compiler only: on a trickle of clicks, the
# optimising compiler cost more CPU per micro-batch than it ever won back (docs/spark.md).
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def local_session(ui: bool = False) -> SparkSession:
    """A local Spark session on loopback whose Python workers run this interpreter.

    Without ``ui`` it starts no web UI: the job prints its own progress, and the UI's server
    is part of the session's start (``--ui`` serves it on http://127.0.0.1:4040)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("count-clicks")
        .config("spark.driver.extraJavaOptions", QUICK_JIT)
        .config("spark.pyspark.python", sys.executable)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # The counts' shuffle: one partition per core, not Spark's 200 (each a task).
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    odradek.spark.register(spark)  # needed only where odradek is installed in editable mode
    return spark


def run_until_interrupted(query: StreamingQuery) -> None:
    """Wait for ``query`` to end; Ctrl-C ends the wait, between two calls into Spark.

    PySpark's own Ctrl-C handler calls into the JVM while the main thread waits in such a
    call, which garbles the shutdown.
    """
    interrupted = threading.Event()
    signal.signal(signal.SIGINT, lambda signum, frame: interrupted.set())
    print(
        "counting; micro-batch 0 starts Spark's Python workers and takes longest...",
        file=sys.stderr,
        flush=True,
    )
    reported = -1
    while query.isActive and not interrupted.is_set():
        query.awaitTermination(0.2)  # a micro-batch's line shows at most 0.2 s after it ends
        progress = query.lastProgress
        if progress and progress["batchId"] != reported:
            reported = progress["batchId"]
            print(describe_progress(progress), file=sys.stderr, flush=True)


def describe_progress(progress: dict) -> str:
    """One line per micro-batch: its records and where its time went (Spark's durationMs)."""
    durations = progress.get("durationMs", {})
    phases = ", ".join(
        f"{phase} {durations[phase] / 1000:.1f} s"
        for phase in ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
        if phase in durations
    )
    total = durations.get("triggerExecution", 0) / 1000
    return (
        f"micro-batch {progress['batchId']}: {progress['numInputRows']} clicks in {total:.1f} s"
        + (f" ({phases})" if phases else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", choices=("batch", "stream", "show"))
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--checkpoint", default="./checkpoints/count-clicks")
    parser.add_argument("--available-now", action="store_true", help="stream: catch up, stop")
    parser.add_argument("--ui", action="store_true", help="serve Spark's web UI on port 4040")
    args = parser.parse_args()
    ensure_pipeline_topics(args.bootstrap)
    print("starting a local Spark session (the JVM takes a while)...", file=sys.stderr, flush=True)
    started = time.monotonic()
    spark = local_session(args.ui)
    print(f"Spark ready in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    try:
        if args.job == "batch":
            count_batch(spark, args.bootstrap)
        elif args.job == "stream":
            run_until_interrupted(
                count_stream(spark, args.bootstrap, args.checkpoint, args.available_now)
            )
        for page, clicks in sorted(latest_counts(spark, args.bootstrap).items()):
            print(f"{page}\t{clicks}")
    finally:
        for query in spark.streams.active:
            query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
