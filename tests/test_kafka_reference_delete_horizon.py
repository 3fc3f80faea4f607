"""Tombstones removed as Kafka 4 removes them (KIP-534), on Apache Kafka and odradek side by side.

A compacted topic with a short ``delete.retention.ms`` gets values, then tombstones (written while
the topic is not compacted, so that one cleaning cleans them on both brokers), each batch
in its own segment (``segment.ms`` is shorter than the time between their records' timestamps). The
first cleaning keeps the tombstones and rewrites each batch holding one with a delete horizon
(attribute bit 6; the base timestamp is the cleaning's time plus ``delete.retention.ms``, the
records keep their timestamps). Nothing cleans the log again when the horizon passes: a log that
is not dirty keeps its tombstones. Raising ``delete.retention.ms`` then does not move a horizon
already written. A write that makes the log dirty again brings a cleaning past the horizon,
which drops those tombstones and keeps the horizon of a batch it rebuilds; a new tombstone gets
a horizon from the new ``delete.retention.ms``. Both brokers must agree at every step on the
records a consumer reads and on the batches their dump tools list (the horizon values are
each broker's cleaning time, so they are checked against when the cleaning ran).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from kafka_reference import (
    JavaClient,
    ProducedRecord,
    ProducerRun,
    ReferenceBroker,
    StoredRecord,
    TopicSpec,
    harness_classpath,
)
from serve_process import ServeProcess
from test_kafka_reference_files import (
    _as_kafka_prints_it,
    _batch_as_kafka_printed_it,
    _cleaned_up_to_active_segment,
    _dump_log,
    _kafka_dump,
    assert_kafka_reads_segments,
    assert_kafka_verifies_indexes,
)

from odradek.topic_partition import TopicPartition

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow, pytest.mark.timeout(900)]

TOPIC = "delete-horizon"
TP = TopicPartition(TOPIC, 0)
RETENTION_MS = 4_000
LATER_RETENTION_MS = 86_400_000
BASE_TIMESTAMP = int(time.time() * 1000) - 3_600_000
GAP = 120_000  # between the timestamps of consecutive batches
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": str(GAP // 2),  # each batch's records are GAP after the last's: it rolls
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": str(RETENTION_MS),
}
CLEANER_BACKOFF = "log.cleaner.backoff.ms=100"
PRODUCER = {"enable.idempotence": "false", "acks": "all", "linger.ms": "1000"}


def _record(key: str, value: str | None, timestamp: int) -> ProducedRecord:
    return ProducedRecord(key.encode(), None if value is None else value.encode(), (), timestamp)


FIRST_BATCHES = [
    [_record(f"k{n}", f"v0-{n}", BASE_TIMESTAMP + n) for n in range(10)],
    [_record(f"k{n}", None, BASE_TIMESTAMP + GAP + n) for n in range(4)],
    [
        _record("k4", "v2", BASE_TIMESTAMP + 2 * GAP),
        _record("k5", None, BASE_TIMESTAMP + 2 * GAP + 1),
        _record("k6", None, BASE_TIMESTAMP + 2 * GAP + 2),  # superseded by the next record
        _record("k6", "v2", BASE_TIMESTAMP + 2 * GAP + 3),
        _record("k7", None, BASE_TIMESTAMP + 2 * GAP + 4),
    ],
    [_record("roller", "1", BASE_TIMESTAMP + 3 * GAP)],  # rolls the segment: the rest is cleanable
]
SECOND_BATCHES = [
    [
        _record("k8", "v4", BASE_TIMESTAMP + 4 * GAP),
        _record("k9", None, BASE_TIMESTAMP + 4 * GAP + 1),
    ],
    [_record("roller", "2", BASE_TIMESTAMP + 5 * GAP)],
]


def _now_ms() -> int:
    return int(time.time() * 1000)


class Side:
    """One broker of the comparison: its client, partition directory and cleaning times."""

    def __init__(self, bootstrap: str, log_dir: Path) -> None:
        self.client = JavaClient(harness_classpath(), bootstrap)
        self.log_dir = log_dir
        self.partition = log_dir / TP.dir_name

    def produce_and_wait_for_cleaning(self, batches: list[list[ProducedRecord]]) -> range:
        """Produce ``batches`` (one batch each) while the topic is not compacted, so that one
        cleaning cleans them all, then compact it and wait until the cleaner cleaned up to the
        active segment; the times (ms) the cleaning began between."""
        self.set_configs(**{"cleanup.policy": "delete"})
        self.client.produce(ProducerRun(TOPIC, batches, PRODUCER))
        before = _now_ms()
        self.set_configs(**{"cleanup.policy": "compact"})
        deadline = time.monotonic() + 120
        while not _cleaned_up_to_active_segment(self.log_dir, TP):
            assert time.monotonic() < deadline, f"{self.log_dir}: not cleaned in 2 minutes"
            time.sleep(0.1)
        return range(before, _now_ms() + 1)

    def read(self) -> list[StoredRecord]:
        return self.client.consume(TOPIC)[TOPIC]

    def set_configs(self, **configs: str) -> None:
        self.client.admin(("set-configs", TOPIC, *(f"{k}={v}" for k, v in configs.items())))


def kafka_listing(directory: Path) -> list[dict[str, str]]:
    """The batches of the partition as Kafka's DumpLogSegments lists them."""
    logs = sorted(directory.glob("*.log"))
    return [
        _batch_as_kafka_printed_it(dict(re.findall(r"(\w+): (\S+)", line)))
        for line in _kafka_dump("--files", ",".join(map(str, logs))).splitlines()
        if line.startswith("baseOffset:")
    ]


def odradek_listing(directory: Path) -> list[dict[str, str]]:
    """The same, as odradek dump-log lists them, in Kafka's spelling."""
    done = _dump_log(sorted(directory.glob("*.log")))
    assert done.returncode == 0, done.stderr
    lines = map(json.loads, done.stdout.splitlines())
    return [_as_kafka_prints_it(line) for line in lines if line["type"] == "batch"]


def horizons(listing: list[dict[str, str]]) -> list[int | None]:
    """Each batch's delete horizon (None: none)."""
    found = [re.fullmatch(r"OptionalLong\[(\d+)\]", b["deleteHorizonMs"]) for b in listing]
    return [int(match[1]) if match else None for match in found]


def structure(listing: list[dict[str, str]]) -> list[dict[str, str]]:
    """The listing without what depends on the cleaning's time: the horizon's value (whether
    there is one stays) and the CRC, which covers it."""
    return [
        {
            **{name: value for name, value in batch.items() if name != "crc"},
            "deleteHorizonMs": str(batch["deleteHorizonMs"] != "OptionalLong.empty"),
        }
        for batch in listing
    ]


def test_tombstones_get_a_delete_horizon_and_go_after_it_as_on_kafka(tmp_path: Path) -> None:
    kafka = ReferenceBroker.start(tmp_path / "kafka", CLEANER_BACKOFF)
    try:
        with ServeProcess(tmp_path / "odradek", "--set", CLEANER_BACKOFF) as odradek:
            sides = {
                "kafka": Side(kafka.bootstrap, kafka.log_dir),
                "odradek": Side(odradek.bootstrap, tmp_path / "odradek"),
            }
            _compare(sides)
    finally:
        kafka.stop()


def _compare(sides: dict[str, Side]) -> None:
    for side in sides.values():
        side.client.create_topics(TopicSpec(TOPIC, configs=TOPIC_CONFIGS))

    # The first cleaning keeps every tombstone and gives the batches holding one a horizon.
    first = {
        name: side.produce_and_wait_for_cleaning(FIRST_BATCHES) for name, side in sides.items()
    }
    read = {name: side.read() for name, side in sides.items()}
    assert read["odradek"] == read["kafka"]
    assert [(r.key, r.value, r.timestamp) for r in read["kafka"]] == [
        (r.key, r.value, r.timestamp)
        for r in [FIRST_BATCHES[0][8], FIRST_BATCHES[0][9], *FIRST_BATCHES[1]]
        + [FIRST_BATCHES[2][n] for n in (0, 1, 3, 4)]
        + FIRST_BATCHES[3]
    ]
    listings = {name: kafka_listing(side.partition) for name, side in sides.items()}
    assert structure(listings["odradek"]) == structure(listings["kafka"])
    assert structure(odradek_listing(sides["odradek"].partition)) == structure(listings["kafka"])
    first_horizons = {}
    for name, listing in listings.items():
        found = horizons(listing)
        # The value batch keeps no horizon; both tombstone batches get the cleaning's; the
        # roller is in the active segment.
        stamped = found[1]
        assert found == [None, stamped, stamped, None], name
        assert stamped - RETENTION_MS in first[name], name
        first_horizons[name] = stamped
    assert_kafka_reads_segments(sides["odradek"].partition)
    assert_kafka_verifies_indexes(sides["odradek"].partition)

    # A longer delete.retention.ms does not move a horizon already written; past the horizon,
    # the log, not dirty, is not cleaned again: its tombstones are still there.
    for side in sides.values():
        side.set_configs(**{"delete.retention.ms": str(LATER_RETENTION_MS)})
    while _now_ms() <= max(first_horizons.values()):
        time.sleep(0.05)
    for name, side in sides.items():
        assert side.read() == read[name], name

    # A write makes the log dirty; its cleaning, past the horizon, drops the tombstones.
    second = {
        name: side.produce_and_wait_for_cleaning(SECOND_BATCHES) for name, side in sides.items()
    }
    read = {name: side.read() for name, side in sides.items()}
    assert read["odradek"] == read["kafka"]
    assert [(r.key, r.value, r.timestamp) for r in read["kafka"]] == [
        (r.key, r.value, r.timestamp)
        for r in [FIRST_BATCHES[2][0], FIRST_BATCHES[2][3], *FIRST_BATCHES[3]]
        + SECOND_BATCHES[0]
        + SECOND_BATCHES[1]
    ]
    listings = {name: kafka_listing(side.partition) for name, side in sides.items()}
    assert structure(listings["odradek"]) == structure(listings["kafka"])
    assert structure(odradek_listing(sides["odradek"].partition)) == structure(listings["kafka"])
    for name, listing in listings.items():
        found = horizons(listing)
        # The rebuilt batch keeps its horizon though its tombstones went (the first two batches
        # went whole); the new tombstone's batch gets one from the new delete.retention.ms.
        stamped = found[2]
        assert found == [first_horizons[name], None, stamped, None], name
        assert stamped - LATER_RETENTION_MS in second[name], name
    assert_kafka_reads_segments(sides["odradek"].partition)
    assert_kafka_verifies_indexes(sides["odradek"].partition)
