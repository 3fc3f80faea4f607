"""``odradek dump-log``: batches, records and index entries of segment files, and corruption."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from kafka.record.default_records import DefaultRecordBatchBuilder
from log_helpers import BASE_TIME_MS, open_log
from serve_process import ServeProcess
from server_helpers import RawClient

from odradek.cli.main import cli
from odradek.config.log_config import LogConfig
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.produce import ProducePartitionData
from odradek.record.compression import CompressionType
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TimestampType,
    set_base_offset,
    write_crc,
)
from odradek.record.record_batch_builder import build_batch
from odradek.storage import log_file_names as names

CODECS = list(CompressionType)
INDEXED = LogConfig(index_interval_bytes=64)


def dump(*args: object) -> Result:
    return CliRunner().invoke(cli, ["dump-log", *map(str, args)])


def json_lines(result: Result, kind: str) -> list[dict]:
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    return [item for item in objects if item["type"] == kind]


def records_for(n: int) -> list[tuple]:
    """Two records: a keyed one with headers, and one with a null key and a null value."""
    return [
        (BASE_TIME_MS + n, f"key-{n}".encode(), f"value-{n}-".encode() * 8, [("trace", b"t")]),
        (BASE_TIME_MS, None, None, ()),
    ]


def batch_positions(log_file: Path) -> list[int]:
    return [batch.position for batch in MemoryRecords(log_file.read_bytes()).batches()]


def patch(path: Path, position: int, fmt: str, value: int) -> None:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, position, value)
    path.write_bytes(data)


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    """A closed partition written by UnifiedLog: two batches per codec, each one indexed."""
    directory = tmp_path / "orders-0"
    with open_log(directory, INDEXED) as log:
        for n, codec in enumerate(CODECS * 2):
            log.append(build_batch(records_for(n), compression=codec))
    return directory


@pytest.fixture
def log_file(segment: Path) -> Path:
    return names.log_file(segment, 0)


def test_every_codec_is_dumped_batch_by_batch(log_file: Path) -> None:
    result = dump("--json", log_file)

    assert result.exit_code == 0, result.stderr
    batches = json_lines(result, "batch")
    assert [b["compression"] for b in batches] == [codec.label for codec in CODECS * 2]
    assert [(b["baseOffset"], b["lastOffset"], b["count"]) for b in batches] == [
        (2 * n, 2 * n + 1, 2) for n in range(len(CODECS) * 2)
    ]
    assert [b["position"] for b in batches] == batch_positions(log_file)
    assert all(b["crcValid"] and "computedCrc" not in b for b in batches)
    assert batches[3]["maxTimestamp"] == BASE_TIME_MS + 3
    assert batches[3]["timestampType"] == "CreateTime"
    [summary] = json_lines(result, "summary")
    size = log_file.stat().st_size
    assert summary == {
        "type": "summary",
        "batches": 10,
        "records": 20,
        "validBytes": size,
        "fileSize": size,
    }
    assert result.stderr == ""


def test_text_output_has_one_line_per_batch_and_a_summary(log_file: Path) -> None:
    result = dump(log_file)

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {log_file}"
    assert lines[1].startswith("baseOffset: 0 lastOffset: 1 count: 2 position: 0 size: ")
    assert "compression: none timestampType: CreateTime" in lines[1]
    assert "producerId: -1 producerEpoch: -1 baseSequence: -1 lastSequence: -1" in lines[1]
    assert "partitionLeaderEpoch: 0" in lines[1]
    assert "crcValid: yes" in lines[1]
    assert "compression: gzip" in lines[2]
    assert not any(line.startswith("|") for line in lines)
    assert lines[-1] == (
        f"Summary: batches: 10 records: 20 validBytes: {log_file.stat().st_size} "
        f"fileSize: {log_file.stat().st_size}"
    )


def test_print_records_shows_keys_values_headers_and_nulls(log_file: Path) -> None:
    result = dump("--print-records", log_file)

    assert result.exit_code == 0
    record_lines = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(record_lines) == 20
    assert record_lines[2] == (
        f"| offset: 2 timestamp: {BASE_TIME_MS + 1} key: key-1 value: {'value-1-' * 8} "
        "headers: [trace=t]"
    )
    assert record_lines[3] == (
        f"| offset: 3 timestamp: {BASE_TIME_MS} key: null value: null headers: []"
    )


def test_json_nests_records_in_their_batch(log_file: Path) -> None:
    result = dump("--json", "--print-records", log_file)

    assert result.exit_code == 0
    batches = json_lines(result, "batch")
    lz4_batch = batches[CODECS.index(CompressionType.LZ4)]
    assert lz4_batch["records"] == [
        {
            "offset": 6,
            "timestamp": BASE_TIME_MS + 3,
            "key": "key-3",
            "value": "value-3-" * 8,
            "headers": [{"key": "trace", "value": "t"}],
        },
        {"offset": 7, "timestamp": BASE_TIME_MS, "key": None, "value": None, "headers": []},
    ]


def test_bytes_that_are_not_printable_text_are_escaped(tmp_path: Path) -> None:
    log_file = names.log_file(tmp_path, 0)
    records = [(BASE_TIME_MS, b"\xff\x00", "grüße".encode(), [("bin", b"a\nb"), ("none", None)])]
    log_file.write_bytes(build_batch(records))

    result = dump("--json", "--print-records", log_file)

    [record] = json_lines(result, "batch")[0]["records"]
    assert record["key"] == {"base64": "/wA="}  # as consume --format json shows it
    assert record["value"] == "grüße"
    assert record["headers"] == [{"key": "bin", "value": "a\nb"}, {"key": "none", "value": None}]


def test_batch_header_fields_come_from_the_file(tmp_path: Path) -> None:
    log_file = names.log_file(tmp_path, 0)
    log_file.write_bytes(
        build_batch(
            [(BASE_TIME_MS + 5, b"k", b"v", ()), (BASE_TIME_MS + 9, b"k", b"w", ())],
            base_offset=40,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            producer_id=42,
            producer_epoch=3,
            base_sequence=2**31 - 1,
            partition_leader_epoch=7,
            is_transactional=True,
        )
    )

    [batch] = json_lines(dump("--json", log_file), "batch")

    assert {key: batch[key] for key in batch if key not in ("crc", "size")} == {
        "type": "batch",
        "baseOffset": 40,
        "lastOffset": 41,
        "count": 2,
        "position": 0,
        "compression": "none",
        "timestampType": "LogAppendTime",
        "baseTimestamp": BASE_TIME_MS + 5,
        "maxTimestamp": BASE_TIME_MS + 9,
        "producerId": 42,
        "producerEpoch": 3,
        "baseSequence": 2**31 - 1,
        "lastSequence": 0,  # sequences wrap
        "partitionLeaderEpoch": 7,
        "isTransactional": True,
        "isControl": False,
        "crcValid": True,
    }


def test_a_delete_horizon_set_by_kafkas_cleaner_is_shown(tmp_path: Path) -> None:
    """Kafka's cleaner flags a batch holding a kept tombstone (attribute bit 6) and stores the
    delete horizon in its base timestamp field; Kafka's dump tool shows it as deleteHorizonMs
    (tests/test_kafka_reference_files.py reads such batches from Kafka itself)."""
    horizon = BASE_TIME_MS + 86_400_000
    data = bytearray(build_batch([(horizon, b"k", None, ())]))
    attributes = struct.unpack_from(">h", data, ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", data, ATTRIBUTES_OFFSET, attributes | DELETE_HORIZON_FLAG_MASK)
    write_crc(data, 0)
    log_file = tmp_path / "00000000000000000000.log"
    log_file.write_bytes(bytes(data))

    result = dump("--json", log_file)

    assert result.exit_code == 0, result.stderr
    [batch] = json_lines(result, "batch")
    assert batch["deleteHorizonMs"] == batch["baseTimestamp"] == horizon
    log_file.write_bytes(build_batch([(horizon, b"k", None, ())]))
    [plain] = json_lines(dump("--json", log_file), "batch")
    assert "deleteHorizonMs" not in plain


def kafka_python_batch(base_offset: int, codec: CompressionType, n: int) -> bytes:
    """A batch as kafka-python's producer builds it, given offsets as a broker would."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for delta, (timestamp, key, value, headers) in enumerate(records_for(n)):
        builder.append(delta, timestamp=timestamp, key=key, value=value, headers=list(headers))
    data = bytearray(builder.build())
    set_base_offset(data, 0, base_offset)
    return bytes(data)


def test_reads_a_segment_built_by_another_kafka_writer(tmp_path: Path) -> None:
    log_file = names.log_file(tmp_path, 100)
    log_file.write_bytes(
        b"".join(kafka_python_batch(100 + 2 * n, codec, n) for n, codec in enumerate(CODECS))
    )

    result = dump("--json", "--print-records", log_file)

    assert result.exit_code == 0, result.stderr
    batches = json_lines(result, "batch")
    assert [b["compression"] for b in batches] == [codec.label for codec in CODECS]
    assert all(b["crcValid"] for b in batches)
    assert [r["offset"] for b in batches for r in b["records"]] == list(range(100, 110))
    assert [r["key"] for r in batches[2]["records"]] == ["key-2", None]
    assert batches[4]["records"][0]["value"] == "value-4-" * 8
    assert batches[4]["records"][0]["headers"] == [{"key": "trace", "value": "t"}]


def test_crc_mismatch_is_reported_with_its_position_and_the_dump_goes_on(log_file: Path) -> None:
    positions = batch_positions(log_file)
    corrupt_at = positions[2]
    data = bytearray(log_file.read_bytes())
    data[positions[3] - 1] ^= 0xFF  # the last byte of batch 2's records
    log_file.write_bytes(data)

    result = dump("--json", log_file)

    assert result.exit_code == 1
    batches = json_lines(result, "batch")
    assert len(batches) == 10
    assert [b["crcValid"] for b in batches] == [True, True, False] + [True] * 7
    assert batches[2]["computedCrc"] != batches[2]["crc"]
    assert json_lines(result, "summary")[0]["validBytes"] == corrupt_at
    assert f"{log_file}: batch at offset 4 (byte {corrupt_at}): CRC mismatch" in result.stderr


@pytest.mark.parametrize("keep", [30, 100], ids=["inside-header", "inside-records"])
def test_truncated_last_batch_fails_after_dumping_the_whole_ones(log_file: Path, keep: int) -> None:
    last = batch_positions(log_file)[-1]
    log_file.write_bytes(log_file.read_bytes()[: last + keep])

    result = dump("--json", log_file)

    assert result.exit_code == 1
    assert len(json_lines(result, "batch")) == 9
    assert json_lines(result, "summary")[0]["validBytes"] == last
    assert f"{log_file}: truncated" in result.stderr
    assert f"at byte {last}" in result.stderr


@pytest.mark.parametrize(
    ("field", "fmt", "value", "complaint"),
    [
        (BATCH_LENGTH_OFFSET, ">i", 3, "declares batchLength 3"),
        (MAGIC_OFFSET, ">b", 1, "has magic 1"),
    ],
)
def test_a_batch_that_cannot_be_framed_stops_the_dump(
    log_file: Path, field: int, fmt: str, value: int, complaint: str
) -> None:
    bad = batch_positions(log_file)[3]
    patch(log_file, bad + field, fmt, value)

    result = dump("--json", log_file)

    assert result.exit_code == 1
    assert len(json_lines(result, "batch")) == 3
    assert json_lines(result, "summary")[0]["validBytes"] == bad
    assert f"{log_file}: batch at byte {bad} {complaint}" in result.stderr


def test_undecodable_records_are_reported_with_print_records(tmp_path: Path) -> None:
    log_file = names.log_file(tmp_path, 0)
    good = build_batch(records_for(0))
    cut = bytearray(build_batch(records_for(1), compression=CompressionType.GZIP)[:-8])
    struct.pack_into(">i", cut, BATCH_LENGTH_OFFSET, len(cut) - LOG_OVERHEAD)
    write_crc(cut, 0)  # a gzip stream cut short, under a CRC that matches it
    log_file.write_bytes(good + cut)

    assert dump(log_file).exit_code == 0
    result = dump("--print-records", log_file)

    assert result.exit_code == 1
    assert f"(byte {len(good)}): gzip decompression failed" in result.stderr


def test_an_unknown_codec_is_reported_and_its_records_not_decoded(tmp_path: Path) -> None:
    log_file = names.log_file(tmp_path, 0)
    batch = bytearray(build_batch(records_for(0)))
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, 5)
    write_crc(batch, 0)
    log_file.write_bytes(batch)

    result = dump("--json", "--print-records", log_file)

    assert result.exit_code == 1
    [dumped] = json_lines(result, "batch")
    assert dumped["compression"] == "unknown"
    assert dumped["crcValid"] is True
    assert "records" not in dumped
    assert result.stderr == (
        f"{log_file}: batch at offset 0 (byte 0) has unknown compression codec id 5\n"
    )


@pytest.mark.parametrize("suffix", [names.INDEX_FILE_SUFFIX, names.TIME_INDEX_FILE_SUFFIX])
def test_verify_index_passes_on_a_good_segment(segment: Path, suffix: str) -> None:
    index_file = segment / f"{names.filename_prefix_from_offset(0)}{suffix}"

    result = dump("--json", "--verify-index", index_file)

    assert result.exit_code == 0, result.stderr
    entries = json_lines(result, "entry")
    assert len(entries) >= 5
    [summary] = json_lines(result, "summary")
    assert summary["entries"] == len(entries)
    assert summary["unusedEntries"] == 0


def test_offset_index_entries_name_a_batch_position_by_its_last_offset(segment: Path) -> None:
    result = dump("--json", names.offset_index_file(segment, 0))

    positions = dict(zip(batch_positions(names.log_file(segment, 0)), range(1, 20, 2), strict=True))
    entries = json_lines(result, "entry")
    assert entries
    assert all(positions[entry["position"]] == entry["offset"] for entry in entries)


@pytest.mark.parametrize(
    ("field", "delta", "complaint"),
    [
        (4, 1, "no batch of the log starts at position"),
        (0, -1, "has last offset"),
    ],
    ids=["position", "offset"],
)
def test_verify_index_catches_a_tampered_offset_index_entry(
    segment: Path, field: int, delta: int, complaint: str
) -> None:
    index_file = names.offset_index_file(segment, 0)
    entry_at = 2 * 8
    (stored,) = struct.unpack_from(">i", index_file.read_bytes(), entry_at + field)
    patch(index_file, entry_at + field, ">i", stored + delta)

    assert dump(index_file).exit_code == 0  # still in order: only the log can tell
    result = dump("--verify-index", index_file)

    assert result.exit_code == 1
    assert f"{index_file}: entry 2 at byte 16 (" in result.stderr
    assert complaint in result.stderr
    assert result.stderr.count("\n") == 1


def test_verify_index_catches_a_time_index_timestamp_the_log_does_not_have(segment: Path) -> None:
    index_file = names.time_index_file(segment, 0)
    last_entry_at = index_file.stat().st_size - 12
    (timestamp,) = struct.unpack_from(">q", index_file.read_bytes(), last_entry_at)
    patch(index_file, last_entry_at, ">q", timestamp + 1000)

    result = dump("--verify-index", index_file)

    assert result.exit_code == 1
    assert f"(timestamp {timestamp + 1000}, offset " in result.stderr
    assert f"is {timestamp}" in result.stderr


def test_verify_index_reports_every_mismatch(segment: Path) -> None:
    index_file = names.offset_index_file(segment, 0)
    entries = index_file.stat().st_size // 8
    for n in range(entries):
        patch(index_file, n * 8 + 4, ">i", 1_000_000 + n)

    result = dump("--verify-index", index_file)

    assert result.exit_code == 1
    assert result.stderr.count("no batch of the log starts at position") == entries


def test_entries_out_of_order_fail_without_verify(segment: Path) -> None:
    index_file = names.offset_index_file(segment, 0)
    data = bytearray(index_file.read_bytes())
    data[8:16], data[16:24] = data[16:24], data[8:16]
    index_file.write_bytes(data)

    result = dump(index_file)

    assert result.exit_code == 1
    assert "entry 2 at byte 16" in result.stderr
    assert "offset is not above the previous entry's" in result.stderr


def test_a_partial_index_entry_is_reported_and_left_alone(segment: Path) -> None:
    index_file = names.offset_index_file(segment, 0)
    with index_file.open("ab") as file:
        file.write(b"\x00\x01\x02")
    before = index_file.read_bytes()

    result = dump("--verify-index", index_file)

    assert result.exit_code == 1
    assert "is not a whole number of 8-byte entries" in result.stderr
    assert index_file.read_bytes() == before


def test_the_preallocated_indexes_of_an_active_segment(tmp_path: Path) -> None:
    with open_log(tmp_path / "orders-0", INDEXED) as log:
        for n in range(6):
            log.append(build_batch(records_for(n)))
        index_file = names.offset_index_file(log.dir, 0)

        result = dump("--json", "--verify-index", index_file)

        assert result.exit_code == 0, result.stderr
        [summary] = json_lines(result, "summary")
        assert summary["entries"] == len(json_lines(result, "entry")) > 0
        assert summary["unusedEntries"] > 1000
        assert summary["fileSize"] == INDEXED.segment_index_bytes


def test_verify_index_on_an_active_segment_with_no_entry_yet(tmp_path: Path) -> None:
    """Its preallocated indexes hold only zeros: no entry, nothing to report."""
    with open_log(tmp_path / "orders-0", INDEXED) as log:
        log.append(build_batch(records_for(0) * 2))  # one batch, too small for an entry
        for index_file in (names.offset_index_file(log.dir, 0), names.time_index_file(log.dir, 0)):
            result = dump("--json", "--verify-index", index_file)
            assert result.exit_code == 0, result.stderr
            [summary] = json_lines(result, "summary")
            assert summary["entries"] == 0 and summary["unusedEntries"] > 0


@pytest.mark.parametrize("index_file_of", [names.offset_index_file, names.time_index_file])
def test_verify_index_on_an_active_segment_truncated_live(tmp_path: Path, index_file_of) -> None:
    """Entries dropped by a truncation are zeroed, so none is taken for one in use."""
    with open_log(tmp_path / "orders-0", INDEXED) as log:
        for n in range(8):
            log.append(build_batch(records_for(n)))
        log.truncate_to(7)
        log.append(build_batch(records_for(9)))
        result = dump("--json", "--verify-index", index_file_of(log.dir, 0))
        assert result.exit_code == 0, result.stderr
        entries = json_lines(result, "entry")
        assert 0 < len(entries) < 8 and all(entry["offset"] < 9 for entry in entries)


def test_the_preallocated_indexes_of_a_segment_with_no_entries_yet(tmp_path: Path) -> None:
    """A segment holding one batch has no index entry yet (the first batch of a segment is
    never indexed), only zeros: not an entry for offset 0 at position 0, which would not
    match the batch there. Found on Kafka's files copied from a running broker
    (tests/test_kafka_reference_files.py); Kafka's own dump tool reports a mismatch there."""
    with open_log(tmp_path / "orders-0", INDEXED) as log:
        log.append(build_batch(records_for(0)))
        indexes = [names.offset_index_file(log.dir, 0), names.time_index_file(log.dir, 0)]

        result = dump("--json", "--verify-index", *indexes)

        assert result.exit_code == 0, result.stderr
        assert json_lines(result, "entry") == []
        assert [summary["entries"] for summary in json_lines(result, "summary")] == [0, 0]


def test_dumping_changes_no_file(segment: Path) -> None:
    files = sorted(segment.iterdir())
    with names.offset_index_file(segment, 0).open("ab") as file:
        file.write(b"\x07")
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in files}

    for flags in ([], ["--print-records", "--json"], ["--verify-index"]):
        dump(*flags, *files)

    assert {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in files} == before


def test_verify_without_the_segment_log_fails(segment: Path, tmp_path: Path) -> None:
    lonely = tmp_path / names.offset_index_file(segment, 0).name
    lonely.write_bytes(names.offset_index_file(segment, 0).read_bytes())

    result = dump("--verify-index", lonely)

    assert result.exit_code == 1
    assert f"cannot verify against {names.log_file(tmp_path, 0)}" in result.stderr


@pytest.mark.parametrize(
    ("name", "complaint"),
    [
        ("00000000000000000000.log", "cannot read: No such file or directory"),
        ("notes.txt", "not a segment file"),
        ("orders.index", "'orders.index' is not named by a 20-digit base offset"),
    ],
)
def test_files_that_cannot_be_dumped(tmp_path: Path, name: str, complaint: str) -> None:
    path = tmp_path / name
    if name != "00000000000000000000.log":
        path.write_bytes(b"")

    result = dump(path)

    assert result.exit_code == 1
    assert f"{path}: {complaint}" in result.stderr


def test_empty_log_file_is_an_empty_segment(tmp_path: Path) -> None:
    log_file = names.log_file(tmp_path, 0)
    log_file.write_bytes(b"")

    result = dump(log_file)

    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == (
        "Summary: batches: 0 records: 0 validBytes: 0 fileSize: 0"
    )


def test_console_script_dumps_every_file_and_fails_for_the_bad_one(
    segment: Path, tmp_path: Path
) -> None:
    good = names.log_file(segment, 0)
    bad = names.log_file(tmp_path, 0)
    bad.write_bytes(good.read_bytes()[:-1])
    script = Path(sys.executable).with_name("odradek")

    completed = subprocess.run(
        [script, "dump-log", good, bad], capture_output=True, text=True, timeout=60, check=False
    )

    assert completed.returncode == 1
    assert completed.stdout.count("Summary: batches: 10 records: 20") == 1
    assert completed.stdout.count("Summary: batches: 9 records: 18") == 1
    assert completed.stderr.startswith(f"{bad}: truncated batch at byte ")
    assert str(good) not in completed.stderr


@pytest.mark.slow
def test_verify_index_on_a_live_and_then_a_killed_broker(tmp_path: Path) -> None:
    """README: dump-log is safe on a live broker. Its active segments' indexes are preallocated
    and partly written; after a SIGKILL they are left so."""
    script = Path(sys.executable).with_name("odradek")
    with ServeProcess(tmp_path / "data") as broker:
        with RawClient(socket.create_connection(("127.0.0.1", broker.port), timeout=10)) as client:
            topics = (CreatableTopic("busy", 1), CreatableTopic("quiet", 1))
            client.call(CreateTopicsRequest(topics))
            for n in range(40):  # several index entries (one per 4 KiB of records)
                records = build_batch(records_for(n) * 20)
                client.call(ProduceRequest((ProducePartitionData("busy", 0, records),)))
            records = build_batch(records_for(0) * 2)  # a batch, no index entry
            client.call(ProduceRequest((ProducePartitionData("quiet", 0, records),)))
        indexes = sorted((tmp_path / "data").glob("*-0/*index"))
        assert len(indexes) == 4

        def verify() -> subprocess.CompletedProcess[str]:
            command = [script, "dump-log", "--verify-index", *indexes]
            return subprocess.run(command, capture_output=True, text=True, timeout=60)

        live = verify()
        assert live.returncode == 0, live.stderr
        summaries = [line for line in live.stdout.splitlines() if line.startswith("Summary")]
        assert [line.split()[2] for line in summaries] == ["17", "17", "0", "0"]
        broker.stop(signal.SIGKILL)
    crashed = verify()
    assert crashed.returncode == 0, crashed.stderr
    assert crashed.stdout == live.stdout


def test_producer_snapshots_and_the_leader_epoch_checkpoint_are_dumped(tmp_path: Path) -> None:
    from odradek.storage.leader_epoch_file_cache import EpochEntry, encode_checkpoint
    from odradek.storage.producer_snapshot_file import (
        SnapshotEntry,
        snapshot_file,
        write_snapshot,
    )

    snapshot = snapshot_file(tmp_path, 12)
    write_snapshot(snapshot, [SnapshotEntry(7, 1, 9, 11, 2, BASE_TIME_MS)])
    checkpoint = tmp_path / "leader-epoch-checkpoint"
    checkpoint.write_bytes(encode_checkpoint([EpochEntry(0, 0), EpochEntry(3, 40)]))

    result = dump(str(snapshot), str(checkpoint))
    assert result.exit_code == 0, result.output
    assert (
        "producerId: 7 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: -1 "
        f"lastTimestamp: {BASE_TIME_MS} firstSequence: 7 lastSequence: 9 lastOffset: 11 "
        "offsetDelta: 2"
    ) in result.stdout
    assert "epoch: 3 startOffset: 40" in result.stdout

    snapshot.write_bytes(snapshot.read_bytes()[:-1] + b"\x00")
    result = dump(str(snapshot))
    assert result.exit_code == 1 and "CRC mismatch" in result.stderr


def test_a_transaction_index_is_dumped_as_kafka_prints_it_and_a_torn_tail_reported(
    tmp_path: Path,
) -> None:
    from odradek.storage.transaction_index import AbortedTxn, TransactionIndex

    path = names.transaction_index_file(tmp_path, 100)
    index = TransactionIndex(100, path)
    index.append(AbortedTxn(7, 100, 109, 110))
    index.append(AbortedTxn(2**40, 105, 130, 106))

    result = dump(str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:3] == [
        "version: 0 producerId: 7 firstOffset: 100 lastOffset: 109 lastStableOffset: 110",
        f"version: 0 producerId: {2**40} firstOffset: 105 lastOffset: 130 lastStableOffset: 106",
    ]

    path.write_bytes(path.read_bytes()[:-3])
    result = dump("--json", str(path))
    assert result.exit_code == 1
    assert [e["producerId"] for e in json_lines(result, "entry")] == [7]
    assert "31 trailing bytes at byte 34 are not a whole entry" in result.stderr
