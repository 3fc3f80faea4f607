"""bench/transactions.py --quick against odradek alone: the bench runs end to end (the Java
client's transactions of 1, 10 and 100 records and the non-transactional produce beside
them) and prints every case with figures; none of them is checked but that each case ran."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kafka_reference import harness_classpath

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

BENCH = Path(__file__).parents[1] / "bench" / "transactions.py"


def test_quick_run_against_odradek_prints_every_case(tmp_path: Path) -> None:
    harness_classpath()  # skips (fails in CI) when the Java client cannot be built
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--targets", "odradek", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    output = done.stdout
    assert " failed: " not in output, output
    for case in (
        "transactions of 1 x 100 B",
        "transactions of 10 x 100 B",
        "transactions of 100 x 100 B",
        "no transaction, idempotent producer, flush every 1 x 100 B",
        "no transaction, idempotent producer, flush every 100 x 100 B",
    ):
        assert case in output, f"no {case!r} in:\n{output}"
        figures = output.split(case, 1)[1].split("\n\n", 1)[0]
        assert "records/s" in figures and " - " not in f"{figures} ", figures
