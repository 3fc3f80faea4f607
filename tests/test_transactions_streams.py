"""Issue 31: Kafka Streams (4.4) WordCount with processing.guarantee=exactly_once_v2
(WordCount.java in the harness: the record cache off, so each input word gives one output
record) on the reference Kafka and on odradek, across a SIGKILL of the Streams process and
then a SIGKILL of the broker (restarted on the same data and address). Exactly once means the
committed output holds, for each word, the counts 1, 2, ..., n once each, n its occurrences in
the input: a count repeated is work redone and committed twice, a count missing is work lost.
"""

from __future__ import annotations

import json
import random
import signal
import struct
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka_helpers import create_topic
from kafka_reference import HARNESS_MAIN, harness_classpath
from transaction_targets import Target, read_all, started

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
PARTITIONS = 2
# Waiting for the counts: failed when nothing moved (no new committed count, no Streams state
# change) for STALLED_AFTER_S, or after AT_MOST_S in all. Under load (two suites on two cores)
# Streams' recovery is slow but moving: a JVM starting, a rebalance, a store restored from its
# changelog.
STALLED_AFTER_S = 120
AT_MOST_S = 300


class Streams:
    """The WordCount application in its own JVM; its state changes as they come, each with
    the seconds since it started; its standard error in ``log``."""

    def __init__(self, target: Target, state_dir: Path, log: Path) -> None:
        properties = {
            "application.id": "wordcount-eos",
            "wordcount.output": "wc-out",
            "processing.guarantee": "exactly_once_v2",
            "state.dir": str(state_dir),
            # A transaction a second, not ten (EOS's default 100 ms): under load each commit
            # (EndTxn, markers, offsets) costs the broker and Streams CPU the rest of the test
            # needs; a kill still lands mid-transaction, with uncommitted work to redo.
            "commit.interval.ms": "1000",
            "num.stream.threads": "1",
            # A killed instance's group membership ends in 10 s, not 45; ten heartbeats
            # missed, not six, before a live one starved of CPU is taken for dead.
            "consumer.session.timeout.ms": "10000",
            "consumer.heartbeat.interval.ms": "1000",
        }
        # C1 only and the serial collector: a JVM that starts sooner and competes with fewer
        # compiler and GC threads on a loaded machine (the workload is a few hundred words).
        command = ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                   "-cp", harness_classpath(), HARNESS_MAIN, "wordcount",
                   "--bootstrap", target.bootstrap, "--topic", "wc-in"]  # fmt: skip
        for name, value in properties.items():
            command += ["--property", f"{name}={value}"]
        self.log = log
        with log.open("a") as stderr:
            self.process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=stderr, text=True
            )
        self.started = time.monotonic()
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith("{"):
                at = round(time.monotonic() - self.started, 1)
                self.events.append({**json.loads(line), "at": at})

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self._reader.join(timeout=5)
        self.process.stdout.close()


def send_lines(target: Target, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": target.bootstrap})
    for number, line in enumerate(lines):
        producer.produce("wc-in", line.encode(), key=b"%d" % number)
    assert producer.flush(60) == 0


def counts_seen(target: Target) -> dict[str, list[int]]:
    """The committed output: each word's counts, in the order they were written."""
    seen: dict[str, list[int]] = {}
    for records in read_all(
        target.bootstrap, "wc-out", PARTITIONS, "read_committed", keyed=True
    ).values():
        for key, value in records:
            seen.setdefault(key.decode(), []).append(struct.unpack(">q", value)[0])
    return seen


def await_counts(target: Target, streams: Streams, expected: Counter) -> None:
    """Until the committed output's last count of every word is its expected total, as long
    as Streams moves (see STALLED_AFTER_S)."""
    start = moved = time.monotonic()
    progress = None
    while True:
        seen = counts_seen(target)
        if all(seen.get(word, [0])[-1] == n for word, n in expected.items()):
            return
        assert streams.process.poll() is None, (
            f"Streams exited: {streams.events}\n{streams.log_tail()}"
        )
        now = time.monotonic()
        if (now_progress := (sum(map(len, seen.values())), len(streams.events))) != progress:
            progress, moved = now_progress, now
        assert now - moved < STALLED_AFTER_S and now - start < AT_MOST_S, (
            f"after {now - start:.0f} s ({now - moved:.0f} s without a new count or state) "
            f"the last counts are { {w: c[-1] for w, c in seen.items()} }, expected "
            f"{dict(expected)}; Streams: {streams.events[-8:]}\n{streams.log_tail()}"
        )
        time.sleep(1)


@pytest.mark.timeout(3 * AT_MOST_S + 120)
@pytest.mark.parametrize("kind", ["kafka", "odradek"])
def test_wordcount_exactly_once_across_a_streams_kill_and_a_broker_kill(
    kind: str, tmp_path: Path
) -> None:
    harness_classpath()  # skips (fails in CI) when Java is missing
    rng = random.Random(31)
    phases = [[" ".join(rng.choices(WORDS, k=3)) for _ in range(60)] for _ in range(3)]
    expected = Counter()
    with started(kind, tmp_path / "broker") as target:
        create_topic(target.bootstrap, "wc-in", partitions=PARTITIONS)
        create_topic(target.bootstrap, "wc-out", partitions=PARTITIONS)
        streams = Streams(target, tmp_path / "streams", tmp_path / "streams.log")
        try:
            send_lines(target, phases[0])
            expected.update(word for line in phases[0] for word in line.split())
            await_counts(target, streams, expected)

            # Killed while it works through the second phase, then started again.
            send_lines(target, phases[1])
            expected.update(word for line in phases[1] for word in line.split())
            time.sleep(rng.uniform(0.2, 1.0))
            streams.kill()
            streams = Streams(target, tmp_path / "streams", tmp_path / "streams.log")
            await_counts(target, streams, expected)

            # The broker killed under it, restarted on the same data, then the last phase.
            target.restart(kill=True)
            send_lines(target, phases[2])
            expected.update(word for line in phases[2] for word in line.split())
            await_counts(target, streams, expected)
        finally:
            streams.kill()
        seen = counts_seen(target)
    assert {word: counts for word, counts in seen.items()} == {
        word: list(range(1, n + 1)) for word, n in expected.items()
    }
