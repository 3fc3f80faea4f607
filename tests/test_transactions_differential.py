"""Issue 31's differential: one seeded transactional workload (two transactional producers
whose transactions overlap, commits and aborts over three partitions, plain records between
their records) run step by step by Kafka's Java client on the reference Kafka 4.4 and on
odradek must give the same acknowledgements (partition and offset of every record), the same
last stable offsets while transactions are open and after they end (ListOffsets latest under
read_committed, as the consumer's endOffsets asks it), the same records for a read_committed
and a read_uncommitted consumer, and segment files Kafka's DumpLogSegments reads to the same
batches, control records (COMMIT/ABORT) and ``.txnindex`` entries (aborted transactions:
first offset, last offset, last stable offset) on both. Producer ids are the brokers' own
choice, so they are compared by order of appearance.

Then odradek started on a copy of Kafka's stopped log directory serves read_committed and
read_uncommitted exactly as Kafka did: it reads Kafka's ``.txnindex`` files and markers.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest
from kafka_reference import JavaClient, TopicSpec, harness_classpath, kafka_classpath, run_java
from serve_process import ServeProcess
from transaction_targets import Target, end_offsets, script, started

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

TOPIC = "txn-differential"
PARTITIONS = 3
SEED = 31


def workload(seed: int = SEED, steps: int = 70) -> list[tuple[str, ...]]:
    """The steps: two transactional producers and a plain one picked at random; an open
    transaction sends or ends (commit 3 in 5), a closed one begins; the LSO is read every
    seventh step; whatever is open at the end is ended."""
    rng = random.Random(seed)
    script_steps: list[tuple[str, ...]] = [
        ("open", "t1", "transactional.id=differential-1"),
        ("open", "t2", "transactional.id=differential-2"),
        ("open", "plain"),
    ]
    open_ = {"t1": False, "t2": False}
    for number in range(steps):
        who = rng.choice(["t1", "t2", "plain"])
        partition = str(rng.randrange(PARTITIONS))
        value = f"{who}-{number}"
        if who == "plain":
            script_steps.append(("send", who, TOPIC, partition, value))
        elif not open_[who]:
            script_steps += [("begin", who), ("send", who, TOPIC, partition, value)]
            open_[who] = True
        elif rng.random() < 0.3:
            # The markers are written after EndTxn is answered (on Kafka too): the next step
            # waits for them, or a record sent next may land before or after them.
            script_steps.append(("commit" if rng.random() < 0.6 else "abort", who))
            script_steps.append(("await-ended", who, "30000"))
            open_[who] = False
        else:
            script_steps.append(("send", who, TOPIC, partition, value))
        if number % 7 == 6:
            script_steps.append(("end-offsets", TOPIC, "read_committed"))
    script_steps += [("commit", who) for who, is_open in open_.items() if is_open]
    script_steps += [("end-offsets", TOPIC, "read_committed"),
                     ("end-offsets", TOPIC, "read_uncommitted")]  # fmt: skip
    return script_steps


def consumed(bootstrap: str, isolation: str) -> list[tuple[int, int, bytes]]:
    records = JavaClient(harness_classpath(), bootstrap).consume(TOPIC, isolation_level=isolation)
    return sorted((r.partition, r.offset, r.value) for r in records[TOPIC])


_PRODUCER_ID = re.compile(r"producerId: (-?\d+)")
_DROPPED = re.compile(r" (CreateTime|LogAppendTime): -?\d+| crc: \d+")


def dumped(log_dir: Path) -> dict[str, list[str]]:
    """DumpLogSegments --deep-iteration of every .log and .txnindex of the topic's
    partitions, per file name ("p/base.suffix"), the producer ids renumbered by order of
    appearance and the timestamps and CRCs (which cover the timestamps) left out."""
    files = sorted(
        path
        for partition in range(PARTITIONS)
        for suffix in ("log", "txnindex")
        for path in (log_dir / f"{TOPIC}-{partition}").glob(f"*.{suffix}")
    )
    assert files, f"no segments in {log_dir}"
    done = run_java(
        kafka_classpath(),
        "org.apache.kafka.tools.DumpLogSegments",
        ["--deep-iteration", "--files", ",".join(map(str, files))],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ids: dict[str, str] = {}
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in done.stdout.splitlines():
        if line.startswith("Dumping "):
            path = Path(line.removeprefix("Dumping "))
            current = found.setdefault(f"{path.parent.name[-1]}/{path.name}", [])
            continue
        if line.startswith(("Log starting offset", "SLF4J")):
            continue
        line = _PRODUCER_ID.sub(
            lambda m: "producerId: " + ids.setdefault(m.group(1), f"P{len(ids)}"), line
        )
        current.append(_DROPPED.sub("", line))
    return found


def run_workload(target: Target) -> dict:
    JavaClient(harness_classpath(), target.bootstrap).create_topics(TopicSpec(TOPIC, PARTITIONS))
    answers = script(target.bootstrap, workload())
    return {
        "acknowledged": [
            (a["step"], a["name"], a.get("partition"), a.get("offset"), a["error"])
            for a in answers
            if a["step"] != "end-offsets"
        ],
        "lso": end_offsets(answers),
        "read_committed": consumed(target.bootstrap, "read_committed"),
        "read_uncommitted": consumed(target.bootstrap, "read_uncommitted"),
    }


@pytest.fixture(scope="module")
def kafka_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, Path]:
    """The workload on Kafka: what the clients saw, what DumpLogSegments read, and a copy of
    its log directory after a clean stop."""
    state = tmp_path_factory.mktemp("txn-diff-kafka")
    with started("kafka", state) as kafka:
        seen = run_workload(kafka)
        files = dumped(kafka.log_dir)
        log_dir = kafka.log_dir
    copy = tmp_path_factory.mktemp("txn-diff-kafka-copy") / "data"
    shutil.copytree(log_dir, copy)
    return seen, files, copy


def test_the_workload_on_kafka_has_what_the_comparison_needs(kafka_run) -> None:
    """The seed gives commits and aborts on every partition, overlapping transactions and an
    LSO below the high watermark while they are open: a comparison that can fail."""
    seen, files, _ = kafka_run
    steps = [step for step, *_ in seen["acknowledged"]]
    assert steps.count("commit") >= 4 and steps.count("abort") >= 3, steps
    committed, uncommitted = set(seen["read_committed"]), set(seen["read_uncommitted"])
    assert committed < uncommitted, "aborted records are read_uncommitted only"
    assert all(error is None for *_, error in seen["acknowledged"])
    txnindex = [line for name, lines in files.items() if name.endswith(".txnindex")
                for line in lines]  # fmt: skip
    assert len(txnindex) >= 3 and all(line.startswith("version: 0 ") for line in txnindex)
    *during, final_committed, final_end = seen["lso"]
    assert final_committed == final_end, "nothing open at the end: LSO = high watermark"
    assert any(lso != final_end for lso in during)


def test_odradek_answers_the_workload_as_kafka_does(
    kafka_run, tmp_path_factory: pytest.TempPathFactory
) -> None:
    kafka_seen, kafka_files, _ = kafka_run
    with started("odradek", tmp_path_factory.mktemp("txn-diff-odradek")) as odradek:
        seen = run_workload(odradek)
        files = dumped(odradek.log_dir)
    differences = [
        f"{aspect}: {differ(seen[aspect], kafka_seen[aspect])}"
        for aspect in ("acknowledged", "lso", "read_committed", "read_uncommitted")
        if seen[aspect] != kafka_seen[aspect]
    ] + [
        f"DumpLogSegments {name}: {differ(files.get(name), kafka_files.get(name))}"
        for name in sorted(set(files) | set(kafka_files))
        if files.get(name) != kafka_files.get(name)
    ]
    assert not differences, "odradek vs Kafka:\n" + "\n".join(differences)


def differ(odradek: list | None, kafka: list | None) -> str:
    """The first difference of two lists, and what only one of them has."""
    if odradek is None or kafka is None:
        return f"odradek {odradek!r} / Kafka {kafka!r}"
    at = next((i for i, (a, b) in enumerate(zip(odradek, kafka, strict=False)) if a != b), None)
    first = "" if at is None else f"first at {at}: odradek {odradek[at]!r} / Kafka {kafka[at]!r}; "
    only_odradek = [x for x in odradek if x not in kafka][:4]
    only_kafka = [x for x in kafka if x not in odradek][:4]
    return f"{first}only odradek {only_odradek}; only Kafka {only_kafka}"


def test_odradek_serves_kafkas_log_directory_read_committed(kafka_run, tmp_path: Path) -> None:
    """odradek on a copy of Kafka's stopped log directory: Kafka's markers and .txnindex."""
    kafka_seen, _, copy = kafka_run
    data = tmp_path / "data"
    shutil.copytree(copy, data)
    with ServeProcess(data, "--set", "broker.id=1") as odradek:  # Kafka's node.id
        assert consumed(odradek.bootstrap, "read_committed") == kafka_seen["read_committed"]
        assert consumed(odradek.bootstrap, "read_uncommitted") == kafka_seen["read_uncommitted"]
        answers = script(odradek.bootstrap, [("end-offsets", TOPIC, "read_committed")])
        assert end_offsets(answers) == [kafka_seen["lso"][-1]]
