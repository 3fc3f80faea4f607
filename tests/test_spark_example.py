"""The Spark example runs with its one documented command, ``make spark-example``, as a user
runs it from the repository root: it starts a broker, sends clicks, counts them with Spark and
checks the counts (examples/spark_example.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_make_spark_example_counts_every_click() -> None:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        reason = "the Spark example needs Java 17 (no java on PATH and no JAVA_HOME)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    if shutil.which("make") is None:
        pytest.skip("no make")
    done = subprocess.run(
        ["make", "--no-print-directory", "spark-example", "SPARK_EXAMPLE_ARGS=--count 500"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (
        "Spark counted all 500 clicks per page, as they were sent"
    ), done.stdout
    assert "$ python examples/count_clicks.py batch --bootstrap 127.0.0.1:" in done.stdout
