"""bench/vs_kafka.py --quick against odradek alone: the bench runs end to end (Kafka's
ProducerPerformance and ConsumerPerformance, librdkafka, the latency consumer, the restart) and
prints every section. Its figures are printed, never checked, but for one that is not a speed:
acks=all Produce requests flush the log, so odradek's fsyncs per Produce request are above 0
(a renamed metric would print none)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_reference import kafka_classpath

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

BENCH = Path(__file__).parents[1] / "bench" / "vs_kafka.py"


def test_quick_run_against_odradek_prints_every_section(tmp_path: Path) -> None:
    kafka_classpath()  # skips (fails in CI) when Kafka's tools cannot be resolved
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--targets", "odradek", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    output = done.stdout
    assert " failed: " not in output, output
    for section in (
        "ProducerPerformance 100 B (Java client defaults",
        "ProducerPerformance 1024 B (Java client defaults",
        "librdkafka produce 1024 B, acks=all",
        "ConsumerPerformance 100 B",
        "end-to-end latency, 100 B acks=all, librdkafka, 1,000/s",
        "end-to-end latency, 100 B acks=all, librdkafka, half the slowest",
        "resident at peak, MB",
    ):
        assert section in output, f"no {section!r} in:\n{output}"
    headline = output.split("ProducerPerformance 100 B (Java client defaults", 1)[1]
    syncs = re.search(r"fsyncs per Produce request\s+([\d.]+)", headline)
    assert syncs is not None and float(syncs.group(1)) > 0, headline
    assert re.search(r"start-up, restarted, s\s+[\d.]+\n", output), output
