"""One start of the example's streaming job, timed up to its first counts.

Run by ``bench/spark.py --only first-results`` as a fresh process per run, so that every run
pays what a user's does: the interpreter, the imports, the JVM. Does what
``examples/count_clicks.py stream`` does (the example's own functions, from the checkout whose
``examples`` directory is given, with that checkout's ``odradek`` first on ``PYTHONPATH``) and
prints one JSON object: ``time.monotonic()`` at each step (CLOCK_MONOTONIC, comparable with the
parent's), and the first micro-batch's progress.

Usage: ``python bench/first_results_run.py EXAMPLES_DIR BOOTSTRAP CLICKS COUNTS CHECKPOINT``.
"""

from __future__ import annotations

import time

marks: dict[str, float] = {"interpreter": time.monotonic()}

import json  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from datetime import datetime  # noqa: E402
from typing import Any  # noqa: E402


def timed(owner: Any, name: str, label: str) -> None:
    """Record when ``owner.name`` was called and when it returned, as ``label``."""
    original: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        marks.setdefault(f"{label} called", time.monotonic())
        try:
            return original(*args, **kwargs)
        finally:
            marks.setdefault(f"{label} returned", time.monotonic())

    setattr(owner, name, wrapper)


def first_progress(query: Any, timeout_s: float = 600) -> dict:
    """The first progress of a micro-batch that read records, looked for every 20 ms."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        progress = query.lastProgress
        if progress is not None and progress["numInputRows"] > 0:
            return progress
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        time.sleep(0.02)
    raise TimeoutError(f"no micro-batch with records in {timeout_s} s")


def main() -> None:
    examples, bootstrap, clicks, counts, checkpoint = sys.argv[1:6]
    sys.path.insert(0, examples)
    import count_clicks

    marks["imported"] = time.monotonic()
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

    import odradek.spark

    timed(SparkSession.Builder, "getOrCreate", "session")
    timed(odradek.spark, "register", "register")
    timed(DataStreamReader, "load", "load")
    timed(DataStreamWriter, "start", "start")
    count_clicks.ensure_pipeline_topics(bootstrap, clicks, counts)
    marks["topics"] = time.monotonic()
    spark = count_clicks.local_session()
    marks["session ready"] = time.monotonic()
    query = count_clicks.count_stream(spark, bootstrap, checkpoint, clicks=clicks, counts=counts)
    try:
        progress = first_progress(query)
        marks["progress seen"] = time.monotonic()
        # Spark stamps a trigger's start in wall-clock milliseconds: map it onto the monotonic
        # clock through one reading of both.
        wall_minus_monotonic = time.time() - time.monotonic()
        started = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00"))
        marks["trigger started"] = started.timestamp() - wall_minus_monotonic
        print(json.dumps({"marks": marks, "durationMs": progress["durationMs"]}), flush=True)
    finally:
        query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
