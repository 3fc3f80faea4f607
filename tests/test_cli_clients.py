"""``odradek topics``, ``produce`` and ``consume`` against a real broker in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from serve_process import ServeProcess, free_port

from odradek.cli.main import cli
from odradek.client import Producer
from odradek.client.partitioner import partition_for_key

ODRADEK = Path(sys.executable).with_name("odradek")
WITH_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
IDLE_MS = "5000"  # a loaded 2-core machine can take over a second to answer a first poll


@dataclass(frozen=True)
class Broker:
    bootstrap: str
    data_dir: Path


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    data_dir = tmp_path_factory.mktemp("broker") / "data"
    with ServeProcess(data_dir) as process:
        yield Broker(process.bootstrap, data_dir)


def odradek(broker: Broker, *args: object, input: str | bytes | None = None) -> Result:
    """Run ``odradek ARGS --bootstrap <broker>`` in-process."""
    return CliRunner().invoke(cli, [*map(str, args), "--bootstrap", broker.bootstrap], input=input)


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def failed(result: Result, error_name: str) -> str:
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"{error_name}: "), result.stderr
    return result.stderr


def described(broker: Broker, topic: str) -> tuple[list[dict[str, str]], dict[str, tuple]]:
    """``topics describe``: the partition lines as dicts, configs as name -> (value, source)."""
    lines = ok(odradek(broker, "topics", "describe", topic)).splitlines()
    assert lines[0].startswith(f"Topic: {topic}\tPartitionCount: ")
    configs_at = lines.index("Configs:")
    partitions = [
        dict(field.split(": ", 1) for field in line.strip("\t").split("\t"))
        for line in lines[1:configs_at]
    ]
    configs = {}
    for line in lines[configs_at + 1 :]:
        setting, source = line.strip("\t").split("\t")
        name, value = setting.split("=", 1)
        configs[name] = (value, source.removeprefix("source="))
    assert lines[0].endswith(f"PartitionCount: {len(partitions)}")
    return partitions, configs


def consumed(broker: Broker, topic: str, *options: object, count: int | None = None) -> list[dict]:
    """The records ``consume --format json`` prints until it has been idle for IDLE_MS; or,
    given the ``count`` of records the test expects, the first ``count`` (it stops at once),
    checked to be the last records of their partitions, so that none follows them."""
    limit = () if count is None else ("--max-messages", count)
    result = odradek(
        broker, "consume", topic, "--format", "json", "--timeout-ms", IDLE_MS, *limit, *options
    )
    records = [json.loads(line) for line in ok(result).splitlines()]
    if count is not None:
        assert len(records) == count, records
        assert_nothing_follows(broker, topic, records, every_partition="--partition" not in options)
    return records


def assert_nothing_follows(
    broker: Broker, topic: str, records: list[dict], every_partition: bool
) -> None:
    """Each partition ``records`` came from ends at its last record read; with
    ``every_partition``, the partitions none came from hold no record either."""
    partitions, _ = described(broker, topic)
    for partition in partitions:
        offsets = [r["offset"] for r in records if r["partition"] == int(partition["Partition"])]
        if offsets:
            assert int(partition["HighWatermark"]) == offsets[-1] + 1, (partition, offsets)
        elif every_partition:
            assert partition["HighWatermark"] == partition["LogStartOffset"], partition


def produce_records(broker: Broker, topic: str, records: list[dict]) -> None:
    """Send ``records`` (Producer.send keyword arguments) with the client library."""
    with Producer(bootstrap_servers=broker.bootstrap) as producer:
        futures = [producer.send(topic, **record) for record in records]
    for future in futures:
        future.result()


def test_topic_create_list_describe_alter_delete(broker: Broker) -> None:
    create = ["topics", "create", "orders", "--partitions", 3]
    assert ok(odradek(broker, *create, "--config", "retention.ms=3600000")) == (
        "Created topic orders.\n"
    )
    assert "orders" in ok(odradek(broker, "topics", "list")).splitlines()
    partitions, configs = described(broker, "orders")
    assert [p["Partition"] for p in partitions] == ["0", "1", "2"]
    for partition in partitions:
        assert partition["LogStartOffset"] == partition["HighWatermark"] == "0"
        assert partition["LogEndOffset"] == partition["Size"] == "0"
        assert partition["Segments"] == "1"
        assert Path(partition["LogDir"]) == broker.data_dir
    assert configs["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["cleanup.policy"] == ("delete", "DEFAULT_CONFIG")
    failed(odradek(broker, *create), "TOPIC_ALREADY_EXISTS")

    alter = ["topics", "alter", "orders", "--config", "segment.bytes=2000000"]
    assert ok(odradek(broker, *alter, "--delete-config", "retention.ms")) == (
        "Altered configs of topic orders.\n"
    )
    _, configs = described(broker, "orders")
    assert configs["segment.bytes"] == ("2000000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["retention.ms"] == ("604800000", "DEFAULT_CONFIG")

    assert ok(odradek(broker, "topics", "delete", "orders")) == "Deleted topic orders.\n"
    assert "orders" not in ok(odradek(broker, "topics", "list")).splitlines()
    failed(odradek(broker, "topics", "describe", "orders"), "UNKNOWN_TOPIC_OR_PARTITION")


def test_create_takes_the_broker_default_partition_count(broker: Broker) -> None:
    ok(odradek(broker, "topics", "create", "defaults"))
    partitions, configs = described(broker, "defaults")
    assert len(partitions) == 1
    assert all(source != "DYNAMIC_TOPIC_CONFIG" for _, source in configs.values())


def test_bad_config_values_are_refused(broker: Broker) -> None:
    create = ["topics", "create", "bad-config", "--config", "retention.ms=soon"]
    assert "retention.ms" in failed(odradek(broker, *create), "INVALID_CONFIG")
    assert "bad-config" not in ok(odradek(broker, "topics", "list")).splitlines()

    ok(odradek(broker, "topics", "create", "altered", "--config", "retention.ms=1000"))
    for setting in ("retention.ms=soon", "retention.ms=", "no.such.config=1"):
        failed(odradek(broker, "topics", "alter", "altered", "--config", setting), "INVALID_CONFIG")
    assert described(broker, "altered")[1]["retention.ms"] == ("1000", "DYNAMIC_TOPIC_CONFIG")


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "create", "x", "--config", "retention.ms"],
        ["topics", "alter", "x"],
        ["topics", "alter", "x", "--config", "retention.ms=1", "--delete-config", "retention.ms"],
        ["consume", "x", "--from-beginning", "--offset", 0],
        ["produce", "x", "--key-separator", ""],
    ],
    ids=["config-without-value", "alter-nothing", "set-and-delete", "two-starts", "empty-sep"],
)
def test_usage_errors_exit_2_before_asking_the_broker(args: list) -> None:
    down = Broker(f"127.0.0.1:{free_port()}", Path())
    result = odradek(down, *args)
    assert result.exit_code == 2, result.output
    assert "NETWORK_EXCEPTION" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "describe", "missing"],
        ["topics", "delete", "missing"],
        ["topics", "alter", "missing", "--config", "retention.ms=1"],
        ["consume", "missing", "--timeout-ms", 100],
    ],
)
def test_an_unknown_topic_is_an_error(broker: Broker, args: list) -> None:
    assert "missing" in failed(odradek(broker, *args), "UNKNOWN_TOPIC_OR_PARTITION")


def test_produce_keys_and_nulls_then_consume_every_field(broker: Broker) -> None:
    ok(odradek(broker, "topics", "create", "keyed", "--partitions", 3))
    lines = ["k1:v1", "k2:NULL", "k1:a:b", ":empty key", "k3:", "k2:v2\r"]
    before = int(time.time() * 1000)
    produce = ["produce", "keyed", "--key-separator", ":", "--null-value", "NULL"]
    assert ok(odradek(broker, *produce, input="\n".join(lines) + "\n")) == ""
    after = int(time.time() * 1000)

    records = consumed(broker, "keyed", "--from-beginning", count=6)
    sent = [("k1", "v1"), ("k2", None), ("k1", "a:b"), ("", "empty key"), ("k3", ""), ("k2", "v2")]
    counts: Counter[int] = Counter()
    expected = {}
    for key, value in sent:
        partition = partition_for_key(key.encode(), 3)
        expected[(partition, counts[partition])] = (key, value)
        counts[partition] += 1
    assert {(r["partition"], r["offset"]): (r["key"], r["value"]) for r in records} == expected
    assert len(records) == len(sent)
    for record in records:
        assert set(record) == {"partition", "offset", "timestamp", "key", "value", "headers"}
        assert before <= record["timestamp"] <= after
        assert record["headers"] == []


def test_json_and_text_show_headers_nulls_and_binary(broker: Broker) -> None:
    ok(odradek(broker, "topics", "create", "binary"))
    produce_records(
        broker,
        "binary",
        [
            {"key": b"k\xff", "value": "héllo".encode(), "headers": [("h", b"1"), ("n", None)]},
            {"key": None, "value": b"\x00\xfe", "headers": [("b", b"\xfe")]},
            {"key": "ключ".encode(), "value": None},
        ],
    )
    records = consumed(broker, "binary", "--from-beginning", count=3)
    assert [(r["key"], r["value"], r["headers"]) for r in records] == [
        (
            {"base64": "a/8="},
            "héllo",
            [{"key": "h", "value": "1"}, {"key": "n", "value": None}],
        ),
        (None, {"base64": "AP4="}, [{"key": "b", "value": {"base64": "/g=="}}]),
        ("ключ", None, []),
    ]
    text_consume = ["consume", "binary", "--from-beginning", "--timeout-ms", IDLE_MS]
    text = odradek(broker, *text_consume, "--max-messages", 3)
    assert ok(text) == "k\\xff\théllo\n\x00\\xfe\nключ\tnull\n"


@pytest.mark.parametrize(
    ("codec", "acks"),
    [("none", "0"), ("gzip", "1"), ("snappy", "all"), ("lz4", "1"), ("zstd", "all")],
)
def test_produce_with_each_codec_and_acks(broker: Broker, codec: str, acks: str) -> None:
    topic = f"codec-{codec}-acks-{acks}"
    values = [f"{codec} {n}" for n in range(50)]
    produce = ["produce", topic, "--compression", codec, "--acks", acks]
    ok(odradek(broker, *produce, input="".join(f"{v}\n" for v in values)))
    records = consumed(broker, topic, "--from-beginning", count=len(values))
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (n, None, v) for n, v in enumerate(values)
    ]


def test_produce_to_a_partition_and_consume_one_partition(broker: Broker) -> None:
    ok(odradek(broker, "topics", "create", "parted", "--partitions", 2))
    ok(odradek(broker, "produce", "parted", "--partition", 1, input="a\nb\n"))
    ok(odradek(broker, "produce", "parted", "--partition", 0, input="c\n"))
    records = consumed(broker, "parted", "--partition", 1, "--from-beginning", count=2)
    assert [(r["partition"], r["offset"], r["value"]) for r in records] == [
        (1, 0, "a"),
        (1, 1, "b"),
    ]
    assert len(consumed(broker, "parted", "--from-beginning", count=3)) == 3

    produce = odradek(broker, "produce", "parted", "--partition", 2, input="d\n")
    assert "no partition 2" in failed(
        odradek(broker, "consume", "parted", "--partition", 2), "UNKNOWN_TOPIC_OR_PARTITION"
    )
    assert "not 2" in failed(produce, "UNKNOWN_TOPIC_OR_PARTITION")


def test_produce_creates_a_missing_topic(broker: Broker) -> None:
    ok(odradek(broker, "produce", "auto-created", input="x\n"))
    records = consumed(broker, "auto-created", "--from-beginning", count=1)
    assert [r["value"] for r in records] == ["x"]


def test_a_line_without_the_key_separator_stops_after_the_lines_before(broker: Broker) -> None:
    produce = ["produce", "separated", "--key-separator", "="]
    result = odradek(broker, *produce, input="a=1\nb=2\nno separator\nc=3\n")
    assert result.exit_code == 1
    assert "line 3 has no key separator '='" in result.stderr
    records = consumed(broker, "separated", "--from-beginning", count=2)
    assert [(r["key"], r["value"]) for r in records] == [("a", "1"), ("b", "2")]


def test_records_the_broker_refuses_are_counted_and_named(broker: Broker) -> None:
    ok(odradek(broker, "topics", "create", "tiny", "--config", "max.message.bytes=200"))
    result = odradek(broker, "produce", "tiny", input=("x" * 300 + "\n") * 3)
    assert "(3 of 3 records not delivered)" in failed(result, "MESSAGE_TOO_LARGE")
    assert [p["LogEndOffset"] for p in described(broker, "tiny")[0]] == ["0"]  # none stored


def test_a_backlog_larger_than_a_segment_is_delivered_whole(broker: Broker) -> None:
    """A partition's pending batches together exceed ``segment.bytes``: sent one batch per
    partition per request, every record is stored (all together, the broker refused them with
    RECORD_LIST_TOO_LARGE and 78,736 of 200,000 records were lost)."""
    segment_bytes = 1024 * 1024
    config = ["--config", f"segment.bytes={segment_bytes}"]
    ok(odradek(broker, "topics", "create", "small-segments", *config))
    values = [b"%06d" % n + b"." * 994 for n in range(6000)]  # 6 MB: about 6 segments
    with Producer(
        bootstrap_servers=broker.bootstrap,
        batch_size=segment_bytes // 4,
        max_request_size=8 * segment_bytes,  # room for the whole backlog in one request
        linger_ms=60_000,
    ) as producer:
        futures = [producer.send("small-segments", value) for value in values]
        producer.flush()  # every batch is ready at once
    offsets = [future.result().offset for future in futures]
    assert offsets == list(range(len(values)))
    records = consumed(broker, "small-segments", "--from-beginning", count=len(values))
    assert [r["value"].encode() for r in records] == values
    partitions, _ = described(broker, "small-segments")
    assert int(partitions[0]["Segments"]) >= 6


@pytest.fixture(scope="module")
def timed(broker: Broker) -> tuple[str, int]:
    """A one-partition topic of 10 records, value "v<n>" at timestamp base + 1000 * n."""
    base = int(time.time() * 1000) - 60_000
    produce_records(
        broker,
        "timed",
        [{"value": f"v{n}".encode(), "timestamp_ms": base + 1000 * n} for n in range(10)],
    )
    return "timed", base


def test_consume_from_an_offset(broker: Broker, timed: tuple[str, int]) -> None:
    topic, _ = timed
    assert [r["offset"] for r in consumed(broker, topic, "--offset", 7, count=3)] == [7, 8, 9]
    assert consumed(broker, topic, "--offset", 10) == []
    result = odradek(broker, "consume", topic, "--offset", 11, "--timeout-ms", IDLE_MS)
    error = failed(result, "OFFSET_OUT_OF_RANGE")
    assert error == f"OFFSET_OUT_OF_RANGE: offset 11 of {topic}-0 is out of range [0, 10]\n"


def test_consume_from_a_timestamp(broker: Broker, timed: tuple[str, int]) -> None:
    topic, base = timed
    records = consumed(broker, topic, "--timestamp", base + 6500, count=3)
    assert [(r["offset"], r["timestamp"], r["value"]) for r in records] == [
        (n, base + 1000 * n, f"v{n}") for n in (7, 8, 9)
    ]
    assert len(consumed(broker, topic, "--timestamp", 0, count=10)) == 10
    assert consumed(broker, topic, "--timestamp", base + 10_000) == []


def test_max_messages_stops_without_waiting_for_a_timeout(
    broker: Broker, timed: tuple[str, int]
) -> None:
    topic, _ = timed
    started = time.monotonic()
    result = odradek(broker, "consume", topic, "--from-beginning", "--max-messages", 3)
    assert ok(result) == "v0\nv1\nv2\n"
    assert time.monotonic() - started < 10


def test_without_a_start_option_only_records_sent_later_are_read(broker: Broker) -> None:
    produce_records(broker, "tail", [{"value": b"old"}] * 3)
    command = [ODRADEK, "consume", "tail", "--max-messages", "1", "--format", "json"]
    command += ["--bootstrap", broker.bootstrap]
    deadline = time.monotonic() + 30
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as reader:
        while reader.poll() is None and time.monotonic() < deadline:
            produce_records(broker, "tail", [{"value": b"new"}])
            time.sleep(0.1)
        reader.kill()
        stdout, stderr = reader.communicate()
    assert reader.returncode == 0, stderr
    record = json.loads(stdout)
    assert (record["value"], record["offset"] >= 3) == ("new", True)


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "list"],
        ["topics", "create", "t"],
        ["topics", "describe", "t"],
        ["topics", "alter", "t", "--config", "retention.ms=1"],
        ["topics", "delete", "t"],
        ["produce", "t"],
        ["consume", "t", "--timeout-ms", 100],
    ],
)
def test_a_broker_that_is_down_is_named(args: list) -> None:
    down = Broker(f"127.0.0.1:{free_port()}", Path())
    stderr = failed(odradek(down, *args, input="x\n"), "NETWORK_EXCEPTION")
    assert f"cannot connect to {down.bootstrap}" in stderr


def test_the_console_script_with_the_bootstrap_from_the_environment(broker: Broker) -> None:
    env = {**os.environ, "ODRADEK_BOOTSTRAP": broker.bootstrap}

    def run(*args: object, stdin: bytes = b"") -> subprocess.CompletedProcess:
        command = [str(ODRADEK), *map(str, args)]
        return subprocess.run(command, input=stdin, capture_output=True, env=env, timeout=60)

    produced = run("produce", "scripted", "--key-separator", ",", stdin=b"k,v\n")
    assert (produced.returncode, produced.stderr) == (0, b"")
    read = run("consume", "scripted", "--from-beginning", "--max-messages", 1, "--format", "json")
    assert read.returncode == 0, read.stderr
    record = json.loads(read.stdout)
    assert (record["partition"], record["offset"], record["key"], record["value"]) == (
        0,
        0,
        "k",
        "v",
    )
    down = run("topics", "list", "--bootstrap", f"localhost:{free_port()}")
    assert down.returncode == 1
    assert b"NETWORK_EXCEPTION: " in down.stderr
    assert b"cannot connect to localhost:" in down.stderr
    missing = run("topics", "describe", "no-such-topic")
    assert missing.returncode == 1
    assert missing.stderr.decode().startswith("UNKNOWN_TOPIC_OR_PARTITION: ")
    assert missing.stdout == b""


def _batches(broker: Broker, topic: str) -> int:
    """How many batches partition 0 of ``topic`` holds, by ``dump-log --json`` of its files."""
    segments = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    result = CliRunner().invoke(cli, ["dump-log", "--json", *map(str, segments)])
    return sum(json.loads(line)["type"] == "batch" for line in ok(result).splitlines())


def test_producer_settings_come_from_a_file_properties_and_options(
    broker: Broker, tmp_path: Path
) -> None:
    lines = "".join(f"{'x' * 60}{n}\n" for n in range(20))
    config = tmp_path / "client.properties"
    config.write_text("# as for kafka-console-producer\nbatch.size=100\nlinger.ms = 0\n")
    cases = [
        ("one-batch", ["--linger-ms", 1000], 1),
        ("from-file", ["--command-config", config], 20),
        ("property", ["--producer-property", "batch.size=100"], 20),
        (
            "option-wins",
            ["--command-config", config, "--batch-size", 100_000, "--linger-ms", 1000],
            1,
        ),
    ]
    for topic, options, batches in cases:
        ok(odradek(broker, "produce", topic, *options, input=lines))
        assert _batches(broker, topic) == batches, topic
        assert len(consumed(broker, topic, "--from-beginning", count=20)) == 20


def _producer_ids(broker: Broker, topic: str) -> set[int]:
    """The producer ids of partition 0's batches (-1: no producer), by ``dump-log --json``."""
    segments = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    result = CliRunner().invoke(cli, ["dump-log", "--json", *map(str, segments)])
    lines = [json.loads(line) for line in ok(result).splitlines()]
    return {line["producerId"] for line in lines if line["type"] == "batch"}


@pytest.mark.parametrize(
    ("properties", "idempotent"),
    [
        ((), True),  # Kafka's default since 3.0
        (("enable.idempotence=false",), False),
        (("enable.idempotence=FALSE",), False),
        (("enable.idempotence=true",), True),
        (("acks=1",), False),  # the default gives way to acks=1, as Kafka's does
        (("enable.idempotence=false", "acks=all"), False),
    ],
)
def test_the_producer_properties_decide_idempotence(
    broker: Broker, properties: tuple[str, ...], idempotent: bool
) -> None:
    topic = f"idempotence-{abs(hash(properties))}"
    flags = [arg for setting in properties for arg in ("--producer-property", setting)]
    ok(odradek(broker, "produce", topic, *flags, input="a\nb\n"))
    producer_ids = _producer_ids(broker, topic)
    assert len(producer_ids) == 1
    assert (producer_ids.pop() >= 0) is idempotent


def test_an_idempotent_producer_with_acks_1_is_refused_saying_why(broker: Broker) -> None:
    flags = ["--producer-property", "enable.idempotence=true", "--acks", "1"]
    result = odradek(broker, "produce", "refused-idempotence", *flags, input="a\n")
    message = failed(result, "INVALID_CONFIG")
    assert "acks must be 'all' for the idempotent producer" in message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["produce", "t", "--producer-property", "enable.idempotence=no"],
            "must be true or false",
        ),
        (["produce", "t", "--producer-property", "no.such=1"], "unknown property 'no.such'"),
        (["produce", "t", "--producer-property", "batch.size"], "expected NAME=VALUE"),
        (["produce", "t", "--producer-property", "batch.size=big"], "must be an integer"),
        (["consume", "t", "--consumer-property", "max.poll.records=x"], "must be an integer"),
        (["consume", "t", "--property", "print.colour=true"], "unknown property"),
        (["consume", "t", "--property", "print.key=maybe"], "must be true or false"),
    ],
)
def test_bad_client_properties_are_usage_errors(args: list, message: str) -> None:
    result = CliRunner().invoke(cli, [*args, "--bootstrap", f"127.0.0.1:{free_port()}"])
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_consume_properties_shape_the_text_lines(broker: Broker, tmp_path: Path) -> None:
    produce_records(
        broker,
        "shaped",
        [
            {"value": b"v0", "key": b"k0", "timestamp_ms": 1000, "headers": [("h", b"1")]},
            {"value": None, "timestamp_ms": 2000},
        ],
    )
    config = tmp_path / "consumer.properties"
    config.write_text("max.poll.records=1\n")
    assert [p["HighWatermark"] for p in described(broker, "shaped")[0]] == ["2"]
    base = ["consume", "shaped", "--from-beginning", "--timeout-ms", IDLE_MS, "--max-messages", 2]
    assert ok(odradek(broker, *base)) == "k0\tv0\nnull\n"
    shaped = ["--property", "print.key=true", "--property", "print.timestamp=true"]
    shaped += ["--property", "key.separator=|", "--property", "null.literal=-"]
    assert ok(odradek(broker, *base, *shaped)) == "CreateTime:1000|k0|v0\nCreateTime:2000|-|-\n"
    everything = ["--property", "print.partition=true", "--property", "print.offset=true"]
    everything += ["--property", "print.headers=true", "--property", "print.value=false"]
    everything += ["--command-config", config, "--consumer-property", "max.poll.records=2"]
    assert ok(odradek(broker, *base, *everything)) == (
        "Partition:0\tOffset:0\th:1\tk0\nPartition:0\tOffset:1\tNO_HEADERS\n"
    )


def test_ctrl_c_stops_consume_with_exit_0_and_no_error(broker: Broker) -> None:
    produce_records(broker, "interrupted", [{"value": b"v"}])
    # A process started from a shell's background job inherits SIGINT ignored, and Python
    # then leaves it ignored: the command runs with the default disposition, as from a terminal.
    command = [sys.executable, "-c", WITH_DEFAULT_SIGINT, ODRADEK]
    command += ["consume", "interrupted", "--from-beginning", "--bootstrap", broker.bootstrap]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as reader:
        try:
            assert reader.stdout.readline() == b"v\n"  # it is reading, waiting for more
            reader.send_signal(signal.SIGINT)
            stdout, stderr = reader.communicate(timeout=30)
        finally:
            if reader.poll() is None:  # still running after SIGINT: a failure, not a hang
                reader.kill()
    assert (reader.returncode, stdout, stderr) == (0, b"", b"")


def test_produce_prints_a_summary_on_a_terminal_only(broker: Broker) -> None:
    command = [ODRADEK, "produce", "summarised", "--bootstrap", broker.bootstrap]
    primary, secondary = pty.openpty()
    try:
        on_terminal = subprocess.run(
            command, input=b"a\nb\nc\n", stdout=secondary, stderr=subprocess.PIPE, timeout=60
        )
        os.close(secondary)
        secondary = -1
        output = b""
        with contextlib.suppress(OSError):  # EIO once the terminal's other end is closed
            while chunk := os.read(primary, 1024):
                output += chunk
    finally:
        os.close(primary)
        if secondary >= 0:
            os.close(secondary)
    assert on_terminal.returncode == 0, on_terminal.stderr
    assert re.fullmatch(
        rb"Sent 3 records to summarised in [0-9.,]+ s \([0-9,]+ records/s\)\.\r\n", output
    ), output
    piped = subprocess.run(command, input=b"d\n", capture_output=True, timeout=60)
    assert (piped.returncode, piped.stdout) == (0, b"")
