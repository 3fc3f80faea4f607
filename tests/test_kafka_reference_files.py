"""Apache Kafka and odradek read each other's files.

Kafka writes, odradek reads: Kafka's Java producer writes to the reference broker (every codec,
headers, null keys and values, idempotent, plain and transactional producers, LogAppendTime,
several segments and partitions, a compacted topic after Kafka's cleaner ran). Its log
directory is copied while it runs (as a crash leaves it) and after it stops. ``odradek
dump-log`` reads every segment and index of both; odradek's UnifiedLog and ``odradek serve`` on the
copies serve every record with the offsets, timestamps, keys, values and headers Kafka
acknowledged; odradek finds offsets by timestamp as Kafka's broker did; odradek's cleaner keeps
what Kafka's kept.

odradek writes, Kafka reads: Kafka's own DumpLogSegments reads the segments, offset and time
indexes odradek's UnifiedLog and odradek's cleaner wrote, with no error and the same records; Kafka
restarted on its log directory after odradek appended to it serves what odradek wrote.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cleaner_helpers import CLEANER, clean_fully
from kafka_helpers import kafka_call
from kafka_reference import (
    HARNESS_MAIN,
    JavaClient,
    ProducedRecord,
    ProducerRun,
    ReferenceBroker,
    StoredRecord,
    TopicSpec,
    _record_line,
    harness_classpath,
    kafka_classpath,
    run_java,
)
from log_helpers import open_log, read_committed
from serve_process import ServeProcess

from odradek.cli.bytes_display import json_bytes, json_headers
from odradek.client import Consumer
from odradek.client.producer import Producer
from odradek.clock import MockClock
from odradek.config.broker_config import BrokerConfig
from odradek.config.log_config import LogConfig
from odradek.record.compression import CompressionType
from odradek.record.control_record import EndTransactionMarker
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import TimestampType
from odradek.record.record_batch_builder import build_batch
from odradek.server.transaction.transaction_log import TransactionLogValue
from odradek.server.transaction.transaction_log import key_to_bytes as key_to_transaction_bytes
from odradek.server.transaction.transaction_log import read_key as read_transaction_key
from odradek.server.transaction.transaction_log import read_value as read_transaction_value
from odradek.server.transaction.transaction_metadata import TransactionMetadata
from odradek.server.transaction.transaction_state import TransactionState
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_file_names import offset_from_file_name, transaction_index_file
from odradek.storage.log_manager import LogManager
from odradek.storage.offset_checkpoint_file import parse_checkpoint
from odradek.storage.topic_config_store import CURRENT_VERSION, TOPIC_CONFIGS_FILE_NAME
from odradek.storage.transaction_index import AbortedTxn, TransactionIndex
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

# slow too: a Kafka broker and several JVMs, kept out of the quick suite.
pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow, pytest.mark.timeout(900)]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Kafka refuses segment.bytes under 1 MiB; a 64-byte index (5 time-index entries) with an entry
# per batch rolls the segment every few batches instead.
SMALL_SEGMENTS = {"segment.index.bytes": "64", "index.interval.bytes": "1"}
# Recent: odradek applies the default retention.ms (7 days) to the copy.
BASE_TIMESTAMP = int(time.time() * 1000) - 3_600_000
SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex")


def sample_batches(seed: int, batches: int = 30, per_batch: int = 3) -> list[list[ProducedRecord]]:
    """Records covering what a record can hold: null and empty keys and values, binary and
    compressible values, headers with null and empty values, timestamps out of order, and the
    producer's own clock."""
    out = []
    for b in range(batches):
        batch = []
        for r in range(per_batch):
            i = b * per_batch + r
            key = None if i % 4 == 1 else b"" if i % 9 == 0 else f"key-{seed}-{i % 7}".encode()
            if i % 6 == 5:
                value = None
            elif i % 11 == 3:
                value = bytes(range(256)) * 3
            else:
                value = f"value {seed} {i} ".encode() * (1 + i % 13)
            headers: tuple[tuple[str, bytes | None], ...] = ()
            if i % 3 == 0:
                headers = (("trace", f"t{i}".encode()), ("empty", b""), ("gone", None))
            elif i % 3 == 1:
                headers = (("ünï-cødé", b"\x00\xff"),)
            timestamp = None if i % 10 == 7 else BASE_TIMESTAMP + (i * 7919) % 5000
            batch.append(ProducedRecord(key, value, headers, timestamp))
        out.append(batch)
    return out


def large_batch(seed: int) -> list[ProducedRecord]:
    """Records of 64-200 KB, half-compressible, sent as one batch: the codecs' framing then has
    many blocks (snappy-java 32 KB chunks, Kafka's LZ4 64 KB blocks, zstd and gzip streams)."""
    rng = random.Random(seed)
    return [
        ProducedRecord(
            f"large-{n}".encode(), rng.randbytes(size // 2).hex().encode(), (), BASE_TIMESTAMP + n
        )
        for n, size in enumerate((64_000, 100_000, 200_000, 150_000))
    ]


@dataclass(frozen=True)
class KafkaWritten:
    """A copy of the log directory of a stopped reference broker, and what each topic holds."""

    log_dir: Path
    live_log_dir: Path  # copied while Kafka was running, as a crash leaves it
    expected: dict[str, list[StoredRecord]]
    sent: dict[str, list[StoredRecord]]
    # Kafka's answers to ListOffsets by timestamp: (topic, partition, target) to
    # (timestamp, offset), None when no record is that new.
    offsets_for_times: dict[tuple[str, int, int], tuple[int, int] | None]


def _cleaned_up_to_active_segment(log_dir: Path, tp: TopicPartition) -> bool:
    """Whether Kafka's cleaner has cleaned the partition up to its active segment."""
    try:  # Kafka creates the file empty and writes it after each cleaning
        checkpoint = parse_checkpoint((log_dir / "cleaner-offset-checkpoint").read_text())
    except (OSError, ValueError):
        return False
    segments = [int(p.stem) for p in (log_dir / tp.dir_name).glob("*.log")]
    return bool(segments) and checkpoint.get(tp, -1) == max(segments)


@pytest.fixture(scope="module")
def kafka_written(tmp_path_factory: pytest.TempPathFactory) -> KafkaWritten:
    """The reference broker after producers wrote every kind of topic, stopped, its log
    directory copied."""
    classpath = harness_classpath()
    broker = ReferenceBroker.start(
        tmp_path_factory.mktemp("reference-kafka"), "log.cleaner.backoff.ms=100"
    )
    compacted_configs = {
        **SMALL_SEGMENTS,
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0",
    }
    # Each batch of the partitioned topic goes to the three partitions in turn.
    spread = [
        [dataclasses.replace(record, partition=n % 3) for n, record in enumerate(batch)]
        for batch in sample_batches(12)
    ]
    updates = [
        [
            ProducedRecord(
                f"k{(b * 5 + r) % 6}".encode(),
                None if r == 4 and b % 3 == 0 else f"v{b}-{r}".encode(),
                (("n", f"{b}".encode()),),
                BASE_TIMESTAMP + 10 * b + r,  # the same in both topics fed these
            )
            for r in range(5)
        ]
        for b in range(16)
    ]
    # A key deleted early: Kafka keeps its tombstone in a cleaned batch carrying the delete
    # horizon (attribute bit 6; the base timestamp field then holds the horizon).
    updates[2].append(ProducedRecord(b"doomed", b"soon gone", (), BASE_TIMESTAMP + 25))
    updates[5].append(ProducedRecord(b"doomed", None, (), BASE_TIMESTAMP + 55))
    runs = [
        # Kafka's producer is idempotent by default (acks=all, a producer id per batch).
        *(
            ProducerRun(
                f"codec-{codec}",
                [*sample_batches(seed), large_batch(seed)],
                {"compression.type": codec, "linger.ms": "50", "batch.size": "1048576"},
            )
            for seed, codec in enumerate(CODECS)
        ),
        ProducerRun(
            "plain-producer",
            sample_batches(10),
            {"enable.idempotence": "false", "acks": "1", "compression.type": "lz4"},
        ),
        ProducerRun("log-append-time", sample_batches(11)),
        ProducerRun("partitioned", spread, {"compression.type": "zstd"}),
        # Committed and aborted transactions: transactional batches and control batches.
        ProducerRun(
            "transactional",
            sample_batches(13, batches=12),
            {"transactional.id": "reference-tx", "compression.type": "snappy"},
            ["commit", "abort", "commit"] * 4,
        ),
        ProducerRun("compacted", updates, {"compression.type": "gzip"}),
        # The same records in a topic Kafka does not compact: odradek's cleaner compacts a copy.
        ProducerRun("compaction-input", updates, {"compression.type": "gzip"}),
    ]
    try:
        client = JavaClient(classpath, broker.bootstrap)
        client.create_topics(
            *(TopicSpec(run.topic, configs=SMALL_SEGMENTS) for run in runs[:-4]),
            TopicSpec(
                "log-append-time",
                configs={**SMALL_SEGMENTS, "message.timestamp.type": "LogAppendTime"},
            ),
            TopicSpec("partitioned", 3, SMALL_SEGMENTS),
            TopicSpec("transactional", configs=SMALL_SEGMENTS),
            TopicSpec("compacted", configs=compacted_configs),
            TopicSpec("compaction-input", configs=SMALL_SEGMENTS),
        )
        sent = {run.topic: acked for run, acked in zip(runs, client.produce(*runs), strict=True)}
        tp = TopicPartition("compacted", 0)
        deadline = time.monotonic() + 120
        while not _cleaned_up_to_active_segment(broker.log_dir, tp):
            assert time.monotonic() < deadline, "Kafka's cleaner did not clean in 2 minutes"
            time.sleep(0.2)
        # What Kafka's consumer reads: of the compacted topic, what the cleaner kept; of the
        # transactional one, the aborted records too (read_uncommitted), never the markers.
        expected = {
            **sent,
            **client.consume("compacted", "transactional", isolation_level="read_uncommitted"),
        }
        offsets_for_times = client.offsets_for_times(expected, _timestamp_targets(sent))
        # The files as a crash would leave them: no clean shutdown, preallocated indexes.
        live_copy = tmp_path_factory.mktemp("kafka-live-copy") / "data"
        _copy_while_running(broker.log_dir, live_copy)
    finally:
        broker.stop()
    copy = tmp_path_factory.mktemp("kafka-log-copy") / "data"
    shutil.copytree(broker.log_dir, copy)
    return KafkaWritten(copy, live_copy, expected, sent, offsets_for_times)


def _copy_while_running(source: Path, destination: Path) -> None:
    """Copy a running broker's log directory; a file it deletes meanwhile (a cleaned
    segment's .deleted files, a checkpoint's temporary file) is left out, as from a crash."""
    try:
        shutil.copytree(source, destination)
    except shutil.Error as error:
        failures = error.args[0]
        assert all("No such file" in str(why) for _, _, why in failures), failures


def _timestamp_targets(sent: dict[str, list[StoredRecord]]) -> list[int]:
    """Timestamps to look offsets up by: before, at and after the records' timestamps, and
    a spread of the timestamps in between (which the samples have out of order)."""
    stamps = sorted({record.timestamp for records in sent.values() for record in records})
    return sorted({stamps[0] - 1, *stamps[:: max(1, len(stamps) // 24)], stamps[-1] + 1})


def _partition_dirs(log_dir: Path, topic: str) -> list[Path]:
    return sorted(log_dir.glob(f"{topic}-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))


def _segment_files(directory: Path) -> list[Path]:
    return [p for p in sorted(directory.iterdir()) if p.suffix in SEGMENT_FILE_SUFFIXES]


def _dump_log(files: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek.cli.main",
            "dump-log",
            "--print-records",
            "--verify-index",
            "--json",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_producers_wrote_what_the_tests_rely_on(kafka_written: KafkaWritten) -> None:
    """Several segments per partition, and a compacted topic Kafka really compacted."""
    for topic in kafka_written.expected:
        for directory in _partition_dirs(kafka_written.log_dir, topic):
            # The cleaner merges the segments it cleans: one cleaned, one active.
            assert len(list(directory.glob("*.log"))) >= (2 if topic == "compacted" else 3)
    transactional = kafka_written.expected["transactional"]
    assert [r.offset for r in transactional] != list(range(len(transactional))), "no markers"
    assert sorted(transactional, key=_position) == sorted(
        kafka_written.sent["transactional"], key=_position
    )
    compacted, sent = kafka_written.expected["compacted"], kafka_written.sent["compacted"]
    assert len(compacted) < len(sent)
    cleaned_batches = [
        batch
        for log_file in (kafka_written.log_dir / "compacted-0").glob("*.log")
        for batch in MemoryRecords(log_file.read_bytes()).batches()
    ]
    assert any(batch.header().attributes & DELETE_HORIZON_FLAG for batch in cleaned_batches)
    latest = {record.key: record for record in sent}
    assert {r.key: r.value for r in compacted if r.offset == latest[r.key].offset} == {
        key: record.value for key, record in latest.items()
    }


COPIES = ["stopped", "crashed"]
DELETE_HORIZON_FLAG = 0x40  # Kafka's batch attribute: baseTimestamp holds the delete horizon


def _copy(kafka_written: KafkaWritten, which: str) -> Path:
    """Kafka's log directory after a clean stop, or as copied while Kafka ran."""
    return kafka_written.log_dir if which == "stopped" else kafka_written.live_log_dir


@pytest.mark.parametrize("which", COPIES)
def test_dump_log_reads_every_segment_kafka_wrote(kafka_written: KafkaWritten, which: str) -> None:
    """``odradek dump-log --print-records --verify-index`` exits 0 on every segment, offset
    index and time index (preallocated ones too), and lists the records the broker
    acknowledged."""
    files = [
        path
        for topic in kafka_written.expected
        for directory in _partition_dirs(_copy(kafka_written, which), topic)
        for path in _segment_files(directory)
    ]
    done = _dump_log(files)
    assert done.returncode == 0, done.stderr
    listed: dict[str, list[tuple]] = {topic: [] for topic in kafka_written.expected}
    for line in map(json.loads, done.stdout.splitlines()):
        if line["type"] == "file":
            tp = TopicPartition.from_dir_name(Path(line["path"]).parent.name)
        elif line["type"] == "batch" and not line["isControl"]:
            idempotent = tp.topic != "plain-producer"
            assert (line["producerId"] >= 0) == idempotent, (tp, line)
            assert line["isTransactional"] == (tp.topic == "transactional"), (tp, line)
            listed[tp.topic] += [
                (
                    tp.partition,
                    r["offset"],
                    r["timestamp"],
                    json.dumps(r["key"]),
                    json.dumps(r["value"]),
                    json.dumps(r["headers"]),
                )
                for r in line["records"]
            ]
    for topic, expected in kafka_written.expected.items():
        assert sorted(listed[topic]) == sorted(
            (
                r.partition,
                r.offset,
                r.timestamp,
                json.dumps(json_bytes(r.key)),
                json.dumps(json_bytes(r.value)),
                json.dumps(json_headers(r.headers)),
            )
            for r in expected
        ), topic


def test_dump_log_agrees_with_kafkas_dump_log_segments(kafka_written: KafkaWritten) -> None:
    """On Kafka's own files, odradek dump-log and Kafka's DumpLogSegments list the same batch
    headers (offsets, count, producer, epochs, flags, delete horizon, position, max timestamp
    and its type, size, codec, CRC and its validity) and the same index entries."""
    files = [
        path
        for topic in [*kafka_written.expected, "__cluster_metadata"]
        for directory in _partition_dirs(kafka_written.log_dir, topic)
        for path in _segment_files(directory)
    ]
    kafka: dict[str, list[dict[str, str]]] = {}
    for line in _kafka_dump("--files", ",".join(map(str, files))).splitlines():
        if line.startswith("Dumping "):
            listed = kafka.setdefault(line.removeprefix("Dumping "), [])
        elif not line.startswith("Log starting offset") and not line.endswith(" is empty."):
            listed.append(dict(re.findall(r"(\w+): (\S+)", line)))
    done = _dump_log(files)
    assert done.returncode == 0, done.stderr
    odradek: dict[str, list[dict[str, str]]] = {}
    for line in map(json.loads, done.stdout.splitlines()):
        if line["type"] == "file":
            listed = odradek.setdefault(line["path"], [])
        elif line["type"] == "batch":
            listed.append(_as_kafka_prints_it(line))
        elif line["type"] == "entry":
            listed.append({name: str(value) for name, value in line.items() if name != "type"})
    assert kafka.keys() == odradek.keys()
    for path, entries in kafka.items():
        if path.endswith(".log"):
            entries = [_batch_as_kafka_printed_it(entry) for entry in entries]
        assert odradek[path] == entries, path


# The batch fields both tools print, under Kafka's names.
_KAFKA_BATCH_FIELDS = (
    "baseOffset", "lastOffset", "count", "producerId", "producerEpoch", "partitionLeaderEpoch",
    "isTransactional", "isControl", "deleteHorizonMs", "position", "timestampType",
    "maxTimestamp", "size", "compresscodec", "crc", "isvalid",
)  # fmt: skip


def _batch_as_kafka_printed_it(fields: dict[str, str]) -> dict[str, str]:
    """The fields of a DumpLogSegments batch line that odradek prints too (Kafka prints the
    max timestamp under the name of its type)."""
    kind = "LogAppendTime" if "LogAppendTime" in fields else "CreateTime"
    fields = {**fields, "timestampType": kind, "maxTimestamp": fields[kind]}
    return {name: fields[name] for name in _KAFKA_BATCH_FIELDS}


def _as_kafka_prints_it(batch: dict[str, object]) -> dict[str, str]:
    """A batch of odradek dump-log's JSON with Kafka's DumpLogSegments' names and spelling."""
    shown = {
        "baseOffset": batch["baseOffset"],
        "lastOffset": batch["lastOffset"],
        "count": batch["count"],
        "producerId": batch["producerId"],
        "producerEpoch": batch["producerEpoch"],
        "partitionLeaderEpoch": batch["partitionLeaderEpoch"],
        "isTransactional": str(batch["isTransactional"]).lower(),
        "isControl": str(batch["isControl"]).lower(),
        "deleteHorizonMs": f"OptionalLong[{batch['deleteHorizonMs']}]"
        if "deleteHorizonMs" in batch
        else "OptionalLong.empty",
        "position": batch["position"],
        "timestampType": batch["timestampType"],
        "maxTimestamp": batch["maxTimestamp"],
        "size": batch["size"],
        "compresscodec": batch["compression"],
        "crc": batch["crc"],
        "isvalid": str(batch["crcValid"]).lower(),
    }
    return {name: str(value) for name, value in shown.items()}


def test_dump_log_reads_kafkas_metadata_log(kafka_written: KafkaWritten) -> None:
    """Kafka's KRaft metadata log is in the same batch format, control batches included."""
    files = _segment_files(kafka_written.log_dir / "__cluster_metadata-0")
    done = _dump_log(files)
    assert done.returncode == 0, done.stderr


def _served(log: UnifiedLog) -> list[StoredRecord]:
    """Every data record of ``log`` up to its high watermark, as a fetch returns them."""
    records: list[StoredRecord] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        info = log.read(offset, 1 << 20, FetchIsolation.HIGH_WATERMARK)
        assert info.records is not None
        batches = list(MemoryRecords(info.records.read_bytes()).batches())
        assert batches, f"no whole batch at offset {offset} of {log}"
        for batch in batches:
            if not batch.is_control:
                records += [
                    StoredRecord(
                        log.topic_partition.partition,
                        r.offset,
                        r.timestamp,
                        r.key,
                        r.value,
                        tuple(r.headers),
                    )
                    for r in batch.records()
                    if r.offset >= offset
                ]
            offset = batch.last_offset + 1
    return records


@pytest.fixture
def odradek_on_kafka_files(kafka_written: KafkaWritten, tmp_path: Path) -> Iterator[LogManager]:
    """odradek's LogManager started on a fresh copy of Kafka's log directory."""
    copy = tmp_path / "data"
    shutil.copytree(kafka_written.log_dir, copy)
    manager = LogManager(BrokerConfig(log_dirs=(str(copy),), broker_id=1))
    manager.startup()
    try:
        yield manager
    finally:
        manager.shutdown()


def test_odradek_serves_every_record_kafka_wrote(
    kafka_written: KafkaWritten, odradek_on_kafka_files: LogManager
) -> None:
    """Same offsets, timestamps, keys, values and headers as Kafka acknowledged (compacted:
    as Kafka's consumer read them after cleaning)."""
    for topic, expected in kafka_written.expected.items():
        served = [
            record
            for tp in sorted(odradek_on_kafka_files.partitions(topic))
            for record in _served(odradek_on_kafka_files.get_log(tp))
        ]
        assert sorted(served, key=_position) == sorted(expected, key=_position), topic


def _position(record: StoredRecord) -> tuple[int, int]:
    return record.partition, record.offset


def test_odradek_finds_offsets_by_timestamp_as_kafka_does(
    kafka_written: KafkaWritten, odradek_on_kafka_files: LogManager
) -> None:
    """ListOffsets by timestamp on Kafka's files: odradek's UnifiedLog answers what Kafka's broker
    answered (out-of-order timestamps, LogAppendTime, transaction markers, cleaned segments).
    As Kafka, it searches only the first segment whose largest timestamp (an empty segment's:
    its modification time) reaches the target, so a segment the cleaner emptied hides the
    records after it: no offset, where a scan of every record would find one."""
    assert kafka_written.offsets_for_times
    odradek_answers = {}
    for topic, partition, target in kafka_written.offsets_for_times:
        log = odradek_on_kafka_files.get_log(TopicPartition(topic, partition))
        found = log.fetch_offset_by_timestamp(target, FetchIsolation.HIGH_WATERMARK)
        odradek_answers[topic, partition, target] = (
            None if found is None else (found.timestamp, found.offset)
        )
    assert odradek_answers == kafka_written.offsets_for_times
    assert kafka_written.offsets_for_times == {
        (topic, partition, target): _kafkas_answer(
            kafka_written.log_dir / TopicPartition(topic, partition).dir_name, target
        )
        for topic, partition, target in kafka_written.offsets_for_times
    }


def _kafkas_answer(directory: Path, target: int) -> tuple[int, int] | None:
    """What Kafka's broker answers: the first record at or after ``target`` in the first
    segment whose largest timestamp (its modification time when empty) reaches it."""
    for segment_file in sorted(directory.glob("*.log")):
        batches = list(MemoryRecords(segment_file.read_bytes()).batches())
        largest = (
            max(batch.max_timestamp for batch in batches)
            if batches
            else segment_file.stat().st_mtime_ns // 1_000_000
        )
        if largest >= target:
            for batch in batches:
                for record in batch.records():
                    if record.timestamp >= target:
                        return record.timestamp, record.offset
            return None
    return None


@pytest.mark.parametrize("which", COPIES)
def test_odradek_serve_on_kafkas_files_serves_every_record(
    kafka_written: KafkaWritten, tmp_path: Path, which: str
) -> None:
    """``odradek serve`` on a copy of Kafka's log directory, after a clean stop or as a crash
    leaves it (recovered, its stale checkpoints ignored or caught up), serves every record to
    odradek's consumer as Kafka acknowledged it."""
    copy = tmp_path / "data"
    shutil.copytree(_copy(kafka_written, which), copy)
    # Kafka keeps topic configs in its metadata log, which odradek does not read: a topic
    # Kafka compacted is declared compacted here, as a user moving it over would, or recovery
    # takes compaction's gaps above the recovery point for a power cut's hole
    # (docs/durability.md) and cuts the log there.
    configs = {"version": CURRENT_VERSION, "topics": {"compacted": {"cleanup.policy": "compact"}}}
    (copy / TOPIC_CONFIGS_FILE_NAME).write_text(json.dumps(configs))
    with ServeProcess(copy, "--set", "broker.id=1") as broker:
        for topic, expected in kafka_written.expected.items():
            partitions = {r.partition for r in kafka_written.sent[topic]}
            served = _consume(broker.bootstrap, [TopicPartition(topic, p) for p in partitions])
            assert sorted(served, key=_position) == sorted(expected, key=_position), topic


def _consume(bootstrap: str, partitions: list[TopicPartition]) -> list[StoredRecord]:
    """Every record of ``partitions`` up to their end offsets, through odradek's consumer."""
    records: list[StoredRecord] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions)
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < offset for tp, offset in end.items()):
            assert time.monotonic() < deadline, f"did not reach {end}"
            records += [
                StoredRecord(r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
                for r in consumer.poll(timeout_ms=500)
            ]
    return records


def test_odradeks_cleaner_keeps_what_kafkas_cleaner_kept(
    kafka_written: KafkaWritten, tmp_path: Path
) -> None:
    """The same records, compacted by Kafka on one topic and by odradek's cleaner on a copy of
    another topic Kafka did not compact, leave the same records (tombstones within
    delete.retention.ms kept, the active segment untouched)."""
    source = kafka_written.log_dir / "compaction-input-0"
    compacted = kafka_written.log_dir / "compacted-0"
    active_base = max(int(p.stem) for p in compacted.glob("*.log"))
    if max(int(p.stem) for p in source.glob("*.log")) != active_base:
        # Kafka rolls these topics when their 64-byte time index fills, which depends on when
        # its batches arrived; the comparison needs the same active segment on both.
        pytest.skip("Kafka rolled the two topics differently this run")
    directory = tmp_path / source.name
    shutil.copytree(source, directory)
    config = LogConfig(cleanup_policy=("compact",), min_compaction_lag_ms=0)
    with open_log(directory, config) as log:
        clean_fully(log, CLEANER)
        kept = _served(log)
    kafka_kept = kafka_written.expected["compacted"]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in kept] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in kafka_kept
    ]
    # And Kafka's own tool reads what odradek's cleaner wrote.
    assert_kafka_reads_segments(directory)
    assert_kafka_verifies_indexes(directory)


# --- odradek writes, Kafka reads -------------------------------------------------------------

_DUMPED_BATCH = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*"
    r"producerId: (-?\d+) .*isControl: (\w+) .*position: (\d+) "
    r"(CreateTime|LogAppendTime): (-?\d+) size: (\d+) magic: 2 "
    r"compresscodec: (\w+) crc: (\d+) isvalid: (\w+)$"
)
_DUMPED_RECORD = re.compile(
    r"^\| offset: (\d+) (CreateTime|LogAppendTime): (-?\d+) "
    r"keySize: (-?\d+) valueSize: (-?\d+) sequence: (-?\d+) "
    r"headerKeys: \[(.*)\](?: key: (.*?))?(?: payload: (.*))?$"
)


def _odradek_batches() -> list[bytes]:
    """Batches an odradek producer can send: every codec, headers, null keys and values,
    producer ids, a LogAppendTime batch."""
    batches = []
    for number, codec in enumerate(CompressionType):
        records = [
            (
                BASE_TIMESTAMP + 10 * number + (i * 31) % 7,
                None if i % 4 == 1 else f"key-{i}".encode(),
                None if i % 5 == 4 else f"value {number} {i} ".encode() * (1 + i % 9),
                (("h1", b"x"), ("h2", None)) if i % 2 else (),
            )
            for i in range(7)
        ]
        batches.append(build_batch(records, compression=codec))
        batches.append(
            build_batch(
                records[:3],
                compression=codec,
                producer_id=4000 + number,
                producer_epoch=0,
                base_sequence=0,
            )
        )
    batches.append(
        build_batch(
            [(BASE_TIMESTAMP, b"k", b"appended", ())], timestamp_type=TimestampType.LOG_APPEND_TIME
        )
    )
    return batches


def test_kafka_serves_what_odradek_appended_to_its_log_directory(
    kafka_written: KafkaWritten, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """odradek started on Kafka's stopped log directory appends batches (every codec,
    producer ids, LogAppendTime) in a new segment of its own and shuts down cleanly; Kafka
    restarted on that directory serves the partition to its Java consumer exactly as odradek
    reads it: Kafka loads odradek's segments, indexes, checkpoints and clean-shutdown marker."""
    state = tmp_path_factory.mktemp("kafka-after-odradek")
    shutil.copytree(kafka_written.log_dir, state / "data")
    tp = TopicPartition("codec-none", 0)
    manager = LogManager(BrokerConfig(log_dirs=(str(state / "data"),), broker_id=1))
    manager.startup()
    try:
        log = manager.get_log(tp)
        log.roll()
        for batch in _odradek_batches():
            log.append(batch)
        log.maybe_increment_high_watermark(log.log_end_offset_metadata)
        odradek_reads = _served(log)
    finally:
        manager.shutdown()
    assert len(odradek_reads) > len(kafka_written.expected["codec-none"])

    broker = ReferenceBroker.start(state)
    try:
        kafka_reads = JavaClient(harness_classpath(), broker.bootstrap).consume(tp.topic)
    finally:
        broker.stop()
    assert kafka_reads[tp.topic] == odradek_reads


@pytest.fixture
def odradek_written(tmp_path: Path) -> Path:
    """A partition directory written by odradek's UnifiedLog, rolled into several segments."""
    directory = tmp_path / "written-0"
    # The log's mock clock stands in 2023, the batches carry today's times (as Kafka's do):
    # accept them however far ahead they look (Kafka 4's default allows an hour).
    config = LogConfig(
        segment_bytes=1000, index_interval_bytes=1, message_timestamp_after_max_ms=2**63 - 1
    )
    with open_log(directory, config) as log:
        for batch in _odradek_batches():
            log.append(batch)
        log.update_high_watermark(log.log_end_offset)
        log.flush()
    assert len(list(directory.glob("*.log"))) >= 3
    return directory


def _kafka_dump(*args: str) -> str:
    done = run_java(kafka_classpath(), "org.apache.kafka.tools.DumpLogSegments", list(args))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rror" not in done.stderr, done.stderr
    return done.stdout


def test_kafkas_dump_log_segments_reads_odradeks_segments(odradek_written: Path) -> None:
    """DumpLogSegments --deep-iteration --print-data-log lists every batch and record odradek
    wrote, valid, with the offsets, timestamps, keys and values odradek reads back."""
    assert_kafka_reads_segments(odradek_written)


def test_kafkas_dump_log_segments_verifies_odradeks_indexes(odradek_written: Path) -> None:
    """--verify-index-only and --index-sanity-check find nothing wrong with odradek's offset
    and time indexes."""
    assert_kafka_verifies_indexes(odradek_written)


def assert_kafka_reads_segments(directory: Path) -> None:
    """Kafka's DumpLogSegments lists the batches and records of every segment in
    ``directory`` as odradek reads them, all valid."""
    logs = sorted(directory.glob("*.log"))
    output = _kafka_dump(
        "--deep-iteration", "--print-data-log", "--files", ",".join(map(str, logs))
    )
    batches, records = [], []
    for line in output.splitlines():
        if line.startswith(("Dumping ", "Log starting offset")):
            continue
        if batch := _DUMPED_BATCH.match(line):
            batches.append(batch.groups())
        elif record := _DUMPED_RECORD.match(line):
            records.append(record.groups())
        else:
            pytest.fail(f"DumpLogSegments printed an unexpected line: {line!r}\n{output}")

    expected_batches, expected_records = [], []
    for log_file in logs:
        for batch in MemoryRecords(log_file.read_bytes()).batches():
            kind = "LogAppendTime" if batch.timestamp_type else "CreateTime"
            expected_batches.append(
                (
                    str(batch.base_offset),
                    str(batch.last_offset),
                    str(batch.records_count),
                    str(batch.producer_id),
                    "false",
                    str(batch.position),
                    kind,
                    str(batch.max_timestamp),
                    str(batch.size_in_bytes),
                    batch.compression_type.label,
                    str(batch.crc),
                    "true",
                )
            )
            for r in batch.records():
                expected_records.append(
                    (
                        str(r.offset),
                        kind,
                        str(r.timestamp),
                        str(-1 if r.key is None else len(r.key)),
                        str(-1 if r.value is None else len(r.value)),
                        str(
                            -1
                            if batch.producer_id < 0
                            else batch.base_sequence + r.offset - batch.base_offset
                        ),
                        ",".join(name for name, _ in r.headers),
                        None if r.key is None else r.key.decode(),
                        None if r.value is None else r.value.decode(),
                    )
                )
    assert batches == expected_batches
    assert records == expected_records


def assert_kafka_verifies_indexes(directory: Path) -> None:
    """Kafka's DumpLogSegments finds nothing wrong with the indexes in ``directory``."""
    indexes = sorted([*directory.glob("*.index"), *directory.glob("*.timeindex")])
    files = ",".join(map(str, indexes))
    verified = _kafka_dump("--verify-index-only", "--deep-iteration", "--files", files)
    for word in ("ismatch", "out of order", "Non-consecutive", "not found", "corrupt"):
        assert word not in verified, verified
    sane = _kafka_dump("--index-sanity-check", "--files", files)
    checked = sane.count("passed sanity check") + sane.count(" is empty.")
    assert checked == len(indexes), sane


# --- producer snapshots ------------------------------------------------------------------------

_DUMPED_SNAPSHOT_ENTRY = re.compile(
    r"producerId: (-?\d+) producerEpoch: (-?\d+) coordinatorEpoch: (-?\d+) "
    r"currentTxnFirstOffset: (?:OptionalLong\.empty|OptionalLong\[(-?\d+)\]) "
    r"lastTimestamp: (-?\d+) firstSequence: (-?\d+) lastSequence: (-?\d+) "
    r"lastOffset: (-?\d+) offsetDelta: (-?\d+) timestamp: (-?\d+)$"
)
SNAPSHOT_FIELDS = (
    "producerId",
    "producerEpoch",
    "coordinatorEpoch",
    "lastTimestamp",
    "firstSequence",
    "lastSequence",
    "lastOffset",
    "offsetDelta",
)


@pytest.fixture
def odradek_snapshots(tmp_path: Path) -> Path:
    """A partition directory of ``odradek serve`` fed by two idempotent producers (odradek's
    own and librdkafka) across several 1 MiB segments, then stopped cleanly: a snapshot at
    every roll and one at the log end."""
    import confluent_kafka

    data = tmp_path / "data"
    settings = ["--set", "log.segment.bytes=1048576", "--set", "num.partitions=1"]
    with ServeProcess(data, *settings) as broker:
        own = Producer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        assert own.config.idempotent
        rdkafka = confluent_kafka.Producer(
            {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        for n in range(300):  # 10 KB each: about three rolls
            value = f"{n}:".encode().ljust(10_000, b"s")
            own.send("snapshots", value, partition=0)
            rdkafka.produce("snapshots", value=value, partition=0)
            if n % 50 == 49:
                own.flush()
                assert rdkafka.flush(60) == 0
        own.close(30)
        assert rdkafka.flush(60) == 0
        assert broker.stop() == 0
    directory = data / "snapshots-0"
    assert len(list(directory.glob("*.log"))) >= 3
    return directory


def _expected_snapshot_entries(directory: Path, snapshot_offset: int) -> set[tuple[int, ...]]:
    """What a snapshot at ``snapshot_offset`` must hold, read from the log itself: a row for
    each of the last five batches of each producer below that offset (Kafka's row, the last
    one, among them; see producer_snapshot_file)."""
    last: dict[int, list[tuple[int, ...]]] = {}
    for log_file in sorted(directory.glob("*.log")):
        for batch in MemoryRecords(log_file.read_bytes()).batches():
            if batch.producer_id < 0 or batch.last_offset >= snapshot_offset:
                continue
            delta = batch.last_offset - batch.base_offset
            rows = last.setdefault(batch.producer_id, [])
            rows.append(
                (
                    batch.producer_id,
                    batch.producer_epoch,
                    -1,  # no transaction coordinator
                    batch.max_timestamp,
                    batch.base_sequence,
                    batch.base_sequence + delta,
                    batch.last_offset,
                    delta,
                )
            )
    return {row for rows in last.values() for row in rows[-5:]}


def test_kafkas_dump_log_segments_reads_odradeks_producer_snapshots(
    odradek_snapshots: Path,
) -> None:
    """Kafka's DumpLogSegments reads every ``.snapshot`` odradek wrote with no error, and finds
    the producer ids, epochs, sequences, offsets and timestamps odradek's dump-log prints,
    which are each producer's last batches below the snapshot's offset in the log."""
    snapshots = sorted(odradek_snapshots.glob("*.snapshot"))
    assert len(snapshots) >= 3, snapshots  # the rolls' and the clean shutdown's
    output = _kafka_dump("--files", ",".join(map(str, snapshots)))
    kafka_reads: dict[str, set[tuple[int, ...]]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith("Dumping "):
            current = Path(line.removeprefix("Dumping ").strip()).name
            kafka_reads[current] = set()
        elif entry := _DUMPED_SNAPSHOT_ENTRY.match(line):
            assert current is not None, output
            fields = [int(v) for v in entry.groups(default="-1")]
            (pid, epoch, coordinator, txn_first, last_ts, first, last, offset, delta, ts) = fields
            assert txn_first == -1 and ts == last_ts, line  # no transactions; one timestamp
            kafka_reads[current].add((pid, epoch, coordinator, last_ts, first, last, offset, delta))
        else:
            pytest.fail(f"DumpLogSegments printed an unexpected line: {line!r}\n{output}")

    done = subprocess.run(
        [sys.executable, "-m", "odradek.cli.main", "dump-log", "--json", *map(str, snapshots)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    odradek_reads: dict[str, set[tuple[int, ...]]] = {}
    for line in map(json.loads, done.stdout.splitlines()):
        if line["type"] == "file":
            current = Path(line["path"]).name
            odradek_reads[current] = set()
        elif line["type"] == "entry":
            odradek_reads[current].add(tuple(line[name] for name in SNAPSHOT_FIELDS))

    expected = {
        path.name: _expected_snapshot_entries(odradek_snapshots, int(path.stem))
        for path in snapshots
    }
    assert all(expected.values()), expected
    assert kafka_reads == odradek_reads == expected
    producers = {entry[0] for entries in expected.values() for entry in entries}
    assert len(producers) == 2, producers


def test_odradek_reads_kafkas_transaction_indexes(kafka_written: KafkaWritten) -> None:
    """Kafka's .txnindex files of the transactional topic list one entry per aborted
    transaction (every third of twelve: the second of each commit, abort, commit), each from
    the transaction's first record to its ABORT marker; odradek's TransactionIndex reads the
    same entries DumpLogSegments prints."""
    directory = kafka_written.log_dir / "transactional-0"
    indexes = sorted(directory.glob("*.txnindex"))
    assert indexes, f"Kafka wrote no .txnindex in {sorted(p.name for p in directory.iterdir())}"
    read = {
        str(path): TransactionIndex(offset_from_file_name(path.name), path).all_aborted_txns()
        for path in indexes
    }

    printed: dict[str, list[AbortedTxn]] = {}
    for line in _kafka_dump("--files", ",".join(map(str, indexes))).splitlines():
        if line.startswith("Dumping "):
            listed = printed.setdefault(line.removeprefix("Dumping "), [])
        elif fields := dict(re.findall(r"(\w+): (-?\d+)", line)):
            listed.append(
                AbortedTxn(
                    int(fields["producerId"]),
                    int(fields["firstOffset"]),
                    int(fields["lastOffset"]),
                    int(fields["lastStableOffset"]),
                    int(fields["version"]),
                )
            )
    assert read == printed

    sent = kafka_written.sent["transactional"]
    batch_sizes = [len(batch) for batch in sample_batches(13, batches=12)]
    starts = [sum(batch_sizes[:n]) for n in range(len(batch_sizes))]
    aborted = [entry for entries in read.values() for entry in entries]
    assert len(aborted) == 4
    for entry, batch in zip(aborted, range(1, 12, 3), strict=True):
        first = sent[starts[batch]].offset
        last_record = sent[starts[batch] + batch_sizes[batch] - 1].offset
        assert entry.first_offset == first, entry
        assert last_record < entry.last_offset < last_record + 3, entry  # the ABORT marker
        assert entry.last_stable_offset >= entry.last_offset + 1, entry
    assert len({entry.producer_id for entry in aborted}) == 1


def test_kafkas_dump_log_segments_reads_odradeks_transaction_index(tmp_path: Path) -> None:
    directory = tmp_path / "written-0"
    directory.mkdir()
    index = TransactionIndex(100, transaction_index_file(directory, 100))
    entries = [AbortedTxn(7, 100, 109, 110), AbortedTxn(2**40, 105, 130, 106)]
    for entry in entries:
        index.append(entry)
    index.flush()

    output = _kafka_dump("--files", str(index.path))

    assert output.splitlines()[1:] == [
        f"version: 0 producerId: {e.producer_id} firstOffset: {e.first_offset} "
        f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}"
        for e in entries
    ]


def test_odradek_reads_and_rewrites_kafkas_transaction_state_records(
    kafka_written: KafkaWritten,
) -> None:
    """Every record Kafka's transaction coordinator wrote decodes, and encodes again to the same
    bytes (Kafka 4 writes value version 1 for transaction version 2 clients); the transactional
    producer's twelve transactions show as Kafka's state sequence, each ending in the outcome
    the producer asked for."""
    records = [
        record
        for path in sorted((kafka_written.log_dir / "__transaction_state-0").glob("*.log"))
        for batch in MemoryRecords(path.read_bytes()).batches()
        for record in batch.records()
    ]
    assert records, "Kafka's transaction coordinator wrote nothing"
    states = []
    for record in records:
        transactional_id = read_transaction_key(record.key)
        value = read_transaction_value(record.value)
        assert transactional_id == "reference-tx"
        assert value is not None
        assert key_to_transaction_bytes(transactional_id) == bytes(record.key)
        assert value.to_bytes(int.from_bytes(record.value[:2], "big")) == bytes(record.value)
        states.append(value.state.state_name)
    outcomes = [s for s in states if s in ("CompleteCommit", "CompleteAbort")]
    assert outcomes == ["CompleteCommit", "CompleteAbort", "CompleteCommit"] * 4, states
    assert states[0] == "Empty"


def test_kafkas_transaction_log_decoder_reads_odradeks_records(tmp_path: Path) -> None:
    """Records odradek writes to __transaction_state, value versions 0 and 1 and a tombstone,
    are what Kafka's DumpLogSegments --transaction-log-decoder prints back."""
    values = [
        TransactionLogValue(7, 0, 60000, TransactionState.EMPTY, frozenset(), 1000, -1),
        TransactionLogValue(
            7,
            1,
            30000,
            TransactionState.PREPARE_COMMIT,
            frozenset({TopicPartition("orders", 1), TopicPartition("orders", 0)}),
            2000,
            1500,
            previous_producer_id=7,
            client_transaction_version=2,
        ),
    ]
    records = [
        (BASE_TIMESTAMP, key_to_transaction_bytes("app-1"), values[0].to_bytes(0), ()),
        (BASE_TIMESTAMP, key_to_transaction_bytes("app-2"), values[1].to_bytes(1), ()),
        (BASE_TIMESTAMP, key_to_transaction_bytes("app-1"), None, ()),
    ]
    directory = tmp_path / "__transaction_state-0"
    directory.mkdir()
    (directory / "00000000000000000000.log").write_bytes(build_batch(records))

    output = _kafka_dump(
        "--transaction-log-decoder", "--files", str(directory / "00000000000000000000.log")
    )

    printed = [
        (json.loads(key), None if payload == "<DELETE>" else json.loads(payload))
        for key, payload in re.findall(r"key: (\{.*?\}) payload: (\S+)", output)
    ]
    assert [key["data"]["transactionalId"] for key, _ in printed] == ["app-1", "app-2", "app-1"]
    assert printed[2][1] is None
    assert printed[0][1] == {
        "version": "0",
        "data": {
            "producerId": 7,
            "producerEpoch": 0,
            "transactionTimeoutMs": 60000,
            "transactionStatus": "Empty",
            "transactionPartitions": None,
            "transactionLastUpdateTimestampMs": 1000,
            "transactionStartTimestampMs": -1,
        },
    }
    assert printed[1][1] == {
        "version": "1",
        "data": {
            "producerId": 7,
            "previousProducerId": 7,
            "producerEpoch": 1,
            "transactionTimeoutMs": 30000,
            "transactionStatus": "PrepareCommit",
            "transactionPartitions": [{"topic": "orders", "partitionIds": [0, 1]}],
            "transactionLastUpdateTimestampMs": 2000,
            "transactionStartTimestampMs": 1500,
            "clientTransactionVersion": 2,
        },
    }


def test_odradeks_transaction_metadata_makes_kafkas_transaction_state_records(
    kafka_written: KafkaWritten,
) -> None:
    """Replaying the transactional producer's calls (InitProducerId, then per transaction:
    the first partition added, EndTxn, the markers written) through TransactionMetadata, at
    the times Kafka recorded, makes Kafka's own records byte for byte: epochs bumped per
    transaction (transaction version 2), previous producer id, partitions, timestamps."""
    records = [
        record
        for path in sorted((kafka_written.log_dir / "__transaction_state-0").glob("*.log"))
        for batch in MemoryRecords(path.read_bytes()).batches()
        for record in batch.records()
    ]
    values = [read_transaction_value(record.value) for record in records]
    first = values[0]
    assert first is not None and first.state is TransactionState.EMPTY
    metadata = TransactionMetadata(
        "reference-tx", first.producer_id, -1, first.transaction_timeout_ms
    )
    for record, value in zip(records, values, strict=True):
        assert value is not None
        now = value.last_update_timestamp_ms
        if value.state is TransactionState.EMPTY:
            transit = metadata.prepare_increment_producer_epoch(
                value.transaction_timeout_ms, None, now
            )
        elif value.state is TransactionState.ONGOING:
            transit = metadata.prepare_add_partitions(
                value.partitions, now, value.client_transaction_version
            )
        elif value.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            transit = metadata.prepare_abort_or_commit(
                value.state, value.client_transaction_version, -1, now, False
            )
        else:
            transit = metadata.prepare_complete(now)
        version = int.from_bytes(record.value[:2], "big")
        assert transit.to_log_value().to_bytes(version) == bytes(record.value), value
        metadata.complete_transition(transit)


def test_odradek_reads_and_rebuilds_kafkas_transaction_markers(
    kafka_written: KafkaWritten,
) -> None:
    """Every control batch Kafka wrote to the transactional topic is one COMMIT or ABORT
    marker, in the order the producer ended its transactions, and EndTransactionMarker builds
    the same batch byte for byte from its fields."""
    markers = []
    for path in sorted((kafka_written.log_dir / "transactional-0").glob("*.log")):
        for batch in MemoryRecords(path.read_bytes()).batches():
            if not batch.is_control:
                continue
            (record,) = list(batch.records())
            marker = EndTransactionMarker.from_record(record)
            markers.append("commit" if marker.committed else "abort")
            rebuilt = marker.to_batch(
                batch.producer_id,
                batch.producer_epoch,
                record.timestamp,
                base_offset=batch.base_offset,
                partition_leader_epoch=batch.partition_leader_epoch,
            )
            assert rebuilt == batch.to_bytes()
    assert markers == ["commit", "abort", "commit"] * 4


def test_kafkas_dump_log_segments_reads_odradeks_transaction_markers(tmp_path: Path) -> None:
    directory = tmp_path / "markers-0"
    directory.mkdir()
    log_file = directory / "00000000000000000000.log"
    log_file.write_bytes(
        EndTransactionMarker(True, 5).to_batch(42, 3, BASE_TIMESTAMP, base_offset=0)
        + EndTransactionMarker(False, 6).to_batch(43, 0, BASE_TIMESTAMP, base_offset=1)
    )

    output = _kafka_dump("--deep-iteration", "--files", str(log_file))

    assert re.findall(r"producerId: (\d+) producerEpoch: (\d+)", output) == [
        ("42", "3"),
        ("43", "0"),
    ]
    assert re.findall(r"isTransactional: (\w+) isControl: (\w+)", output) == [("true", "true")] * 2
    assert re.findall(r"endTxnMarker: (\w+) coordinatorEpoch: (\d+)", output) == [
        ("COMMIT", "5"),
        ("ABORT", "6"),
    ]
    assert "isvalid: false" not in output


# --- transactions: read_committed, the LSO, .txnindex and snapshots, both ways ------------------


def _committed_sent(kafka_written: KafkaWritten) -> list[tuple[int, bytes | None, bytes | None]]:
    """The transactional topic's records of committed transactions (batch i of the run is
    transaction i: commit, abort, commit, ...), as (offset, key, value)."""
    sent = kafka_written.sent["transactional"]
    sizes = [len(batch) for batch in sample_batches(13, batches=12)]
    kept = []
    for number, size in enumerate(sizes):
        start = sum(sizes[:number])
        if number % 3 != 1:
            kept += [(r.offset, r.key, r.value) for r in sent[start : start + size]]
    return kept


@pytest.mark.parametrize("which", COPIES)
def test_odradek_serves_read_committed_on_kafkas_files(
    kafka_written: KafkaWritten, which: str, tmp_path: Path
) -> None:
    """On Kafka's transactional partition (stopped cleanly, or copied while it ran: then
    recovered), a read_committed reader of odradek gets the committed transactions' records
    and none of the aborted ones, from Kafka's own .txnindex files; every transaction ended,
    so the LSO is the log end."""
    copy = tmp_path / "data"
    shutil.copytree(_copy(kafka_written, which), copy)
    manager = LogManager(BrokerConfig(log_dirs=(str(copy),), broker_id=1))
    manager.startup()
    try:
        log = manager.get_log(TopicPartition("transactional", 0))
        log.update_high_watermark(log.log_end_offset)
        assert log.first_unstable_offset is None
        assert log.last_stable_offset == log.high_watermark == log.log_end_offset
        served = [(r.offset, r.key, r.value) for r in read_committed(log)]
        assert served == _committed_sent(kafka_written)
        assert len(log.local_log.collect_aborted_transactions(0, log.log_end_offset)) == 4
    finally:
        manager.shutdown()


def test_odradek_rebuilds_kafkas_transaction_indexes_byte_for_byte(
    kafka_written: KafkaWritten, tmp_path: Path
) -> None:
    """Kafka's transactional partition without its .txnindex files and producer snapshots
    (a crash before they were written): odradek's recovery rebuilds every .txnindex from the
    markers in the log, the same files with the same bytes."""
    source = kafka_written.log_dir / "transactional-0"
    kafkas = {path.name: path.read_bytes() for path in source.glob("*.txnindex")}
    assert kafkas
    directory = tmp_path / "transactional-0"
    shutil.copytree(source, directory)
    for path in [*directory.glob("*.txnindex"), *directory.glob("*.snapshot")]:
        path.unlink()
    with open_log(directory, recovery_point=0) as log:
        assert log.first_unstable_offset is None
    rebuilt = {path.name: path.read_bytes() for path in directory.glob("*.txnindex")}
    assert rebuilt == kafkas


def test_odradek_appending_kafkas_transactions_writes_kafkas_txnindex_entries(
    kafka_written: KafkaWritten, tmp_path: Path
) -> None:
    """Kafka's transactional batches appended to an odradek log as a producer sends them, and
    its markers as the coordinator writes them (same producer and coordinator epochs): the
    aborted transactions odradek's .txnindex records are Kafka's, entry for entry, and the LSO
    follows each transaction."""
    source = kafka_written.log_dir / "transactional-0"
    kafkas = [
        entry
        for path in sorted(source.glob("*.txnindex"))
        for entry in TransactionIndex(offset_from_file_name(path.name), path).all_aborted_txns()
    ]
    directory = tmp_path / "replayed-0"
    directory.mkdir()
    batches = [
        batch
        for path in sorted(source.glob("*.log"))
        for batch in MemoryRecords(path.read_bytes()).batches()
    ]
    clock = MockClock(batches[0].max_timestamp)
    any_time = LogConfig(
        message_timestamp_before_max_ms=2**62, message_timestamp_after_max_ms=2**62
    )
    with open_log(directory, any_time, clock=clock) as log:
        for batch in batches:
            assert log.log_end_offset == batch.base_offset
            if batch.is_control:
                marker = EndTransactionMarker.from_record(next(iter(batch.records())))
                assert log.first_unstable_offset is not None
                log.append_end_txn_marker(
                    batch.producer_id,
                    batch.producer_epoch,
                    marker.coordinator_epoch,
                    marker.committed,
                )
            else:
                assert batch.is_transactional
                log.append(batch.to_bytes())
                assert log.first_unstable_offset is not None
            log.update_high_watermark(log.log_end_offset)
        assert log.first_unstable_offset is None
        replayed = [
            entry for s in log.segments.values() for entry in s.txn_index.all_aborted_txns()
        ]
    assert replayed == kafkas


def test_kafkas_dump_log_segments_reads_an_open_transaction_in_odradeks_snapshot(
    tmp_path: Path,
) -> None:
    """A snapshot odradek wrote with one producer's transaction open and another's ended by a
    marker: Kafka reads the first one's currentTxnFirstOffset and the other's coordinator
    epoch, as its own snapshots carry them."""
    directory = tmp_path / "open-0"
    directory.mkdir()

    def transactional(pid: int, seq: int) -> bytes:
        return build_batch(
            [(BASE_TIMESTAMP, b"k", b"v", ())],
            producer_id=pid,
            producer_epoch=2,
            base_sequence=seq,
            is_transactional=True,
        )

    with open_log(directory, clock=MockClock(BASE_TIMESTAMP)) as log:
        log.append(build_batch([(BASE_TIMESTAMP, b"k", b"plain", ())]))
        log.append(transactional(7, 0))  # 1: stays open
        log.append(transactional(8, 0))  # 2
        log.append_end_txn_marker(8, 2, 5, committed=True)  # 3
        log.append(transactional(7, 1))  # 4
        log.update_high_watermark(log.log_end_offset)
        assert log.last_stable_offset == 1
    (snapshot,) = directory.glob("*.snapshot")
    rows = {}
    for line in _kafka_dump("--files", str(snapshot)).splitlines()[1:]:
        entry = _DUMPED_SNAPSHOT_ENTRY.match(line)
        assert entry is not None, line
        pid, epoch, coordinator, txn_first = (int(v) for v in entry.groups(default="-1")[:4])
        rows[pid] = (epoch, coordinator, txn_first)
    assert rows == {7: (2, -1, 1), 8: (2, 5, -1)}


def _latest(bootstrap: str, isolation_level: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": "open-tx", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    answer = kafka_call(bootstrap, 2, 7, body)["topics"][0]["partitions"][0]
    assert answer["error_code"] == 0, answer
    return answer["offset"]


def test_odradek_on_kafkas_files_with_an_open_transaction_answers_kafkas_lso(
    tmp_path: Path,
) -> None:
    """A transaction left open on the reference Kafka (its producer gone, its timeout far):
    Kafka's LSO stays at its first offset. Loaded by odradek from Kafka's files, after a clean
    stop (the open transaction in Kafka's snapshot) and as copied while Kafka ran (rebuilt
    from the log), the partition answers the same LSO and high watermark, and DescribeProducers'
    rows name the open transaction's first offset."""
    broker = ReferenceBroker.start(tmp_path / "kafka")
    try:
        classpath = harness_classpath()
        client = JavaClient(classpath, broker.bootstrap)
        client.create_topics(TopicSpec("open-tx"))
        line = _record_line(ProducedRecord(b"k", b"v", partition=0))
        client.produce(
            ProducerRun("open-tx", [[ProducedRecord(b"k", b"v", partition=0)] * 3],
                        {"transactional.id": "committer"}, ["commit"]),
            ProducerRun("open-tx", [[ProducedRecord(b"k", b"p", partition=0)] * 2]),
        )  # fmt: skip
        # A producer that began a transaction and is still there: its JVM waits on stdin.
        left_open = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", classpath, HARNESS_MAIN, "produce",
             "--bootstrap", broker.bootstrap],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            left_open.stdin.write(
                "producer\topen-tx\ttransactional.id=left-open\ttransaction.timeout.ms=600000\n"
                f"begin\n{line}\n{line}\nflush\n"
            )
            left_open.stdin.flush()
            acks = [left_open.stdout.readline() for _ in range(2)]
            assert all(ack.startswith("{") for ack in acks), acks
            kafka_lso, kafka_hw = _latest(broker.bootstrap, 1), _latest(broker.bootstrap, 0)
            assert (kafka_lso, kafka_hw) == (6, 8)
            live = tmp_path / "live"
            _copy_while_running(broker.log_dir, live)
        finally:
            left_open.kill()  # gone without ending its transaction
            left_open.wait(timeout=30)
    finally:
        broker.stop()
    stopped = tmp_path / "stopped"
    shutil.copytree(broker.log_dir, stopped)
    for copy in (stopped, live):
        manager = LogManager(BrokerConfig(log_dirs=(str(copy),), broker_id=1))
        manager.startup()
        try:
            log = manager.get_log(TopicPartition("open-tx", 0))
            log.update_high_watermark(log.log_end_offset)
            assert (log.last_stable_offset, log.high_watermark) == (kafka_lso, kafka_hw), copy
            open_starts = [p.current_txn_start_offset for p in log.active_producers()]
            assert sorted(open_starts) == [-1, -1, kafka_lso], copy
        finally:
            manager.shutdown()
