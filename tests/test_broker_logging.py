"""The broker's own log as ``odradek serve`` writes it: one line per event naming the partition
and the reason (segment roll, cleaner run, rejected produce), as text or JSON lines
(``log.format``), at the level of ``--log-level`` or ``log.level``."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from serve_process import ServeProcess

from odradek.client import Admin, NewTopic, Producer
from odradek.errors import KafkaError

pytestmark = pytest.mark.slow

TEXT_LINE = re.compile(
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<message>.*)\n"
)
TOPIC = "events"
# Segments of the smallest size allowed (1 MiB), rolled by records a third of that size.
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": str(1024 * 1024),
    "max.message.bytes": str(400 * 1024),
}
CLEANER_SETTINGS = ("--set", "log.cleaner.backoff.ms=50")


def text_entry(line: str) -> dict[str, str]:
    match = TEXT_LINE.fullmatch(line)
    assert match, f"not one text log line: {line!r}"
    return match.groupdict()


def json_entry(line: str) -> dict[str, str]:
    entry = json.loads(line)
    assert {"time", "level", "logger", "message"} <= entry.keys(), line
    return entry


def roll_compact_and_reject(broker: ServeProcess) -> None:
    """Roll segments of a compacted partition, let the cleaner clean it, have a produce
    rejected; return once the cleaner has logged its run."""
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, TOPIC_CONFIGS)])
    producer = Producer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0)
    try:
        for number in range(12):
            value = b"v" * (300 * 1024)
            producer.send(TOPIC, value, key=b"key-%d" % (number % 3)).result(timeout=30)
        with pytest.raises(KafkaError, match="MESSAGE_TOO_LARGE|RECORD_LIST_TOO_LARGE"):
            producer.send(TOPIC, b"x" * (500 * 1024), key=b"big").result(timeout=30)
    finally:
        producer.close()
    deadline = time.monotonic() + 30
    while not any("cleaned offsets" in line for line in broker.lines):
        assert time.monotonic() < deadline, "the cleaner did not run:\n" + "".join(broker.lines)
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("log_format", "parse"), [("text", text_entry), ("json", json_entry)], ids=["text", "json"]
)
def test_each_event_is_one_line_naming_its_partition_and_reason(
    tmp_path: Path, log_format: str, parse: Callable[[str], dict[str, str]]
) -> None:
    with ServeProcess(
        tmp_path / "data", "--set", f"log.format={log_format}", *CLEANER_SETTINGS
    ) as broker:
        roll_compact_and_reject(broker)
    assert broker.process.returncode == 0
    entries = [parse(line) for line in broker.lines]
    messages = {entry["message"] for entry in entries}

    def logged(pattern: str) -> bool:
        return any(re.match(pattern, message) for message in messages)

    partition = re.escape(f"[{TOPIC}-0]")
    assert logged(rf"{partition} rolled new log segment at offset \d+$")
    assert logged(rf"{partition} cleaned offsets \[0, \d+\): .* size reduction")
    assert logged(rf"{partition} produce from \S+ rejected: (MESSAGE|RECORD_LIST)_TOO_LARGE")
    assert {"INFO", "WARNING"} <= {entry["level"] for entry in entries}


def test_level_comes_from_the_config_file(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("log.level=WARNING\n")
    with ServeProcess(tmp_path / "data", "--config", str(properties)) as broker:
        pass
    assert broker.lines == []  # a clean start and stop logs nothing at WARNING or above


def test_the_level_flag_wins_over_the_config_file(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("log.level=WARNING\n")
    with ServeProcess(
        tmp_path / "data", "--config", str(properties), "--log-level", "info"
    ) as broker:
        pass
    assert any("serving on" in text_entry(line)["message"] for line in broker.lines)


def test_a_new_data_directory_starts_with_one_line_saying_so_and_nothing_about_checkpoints(
    tmp_path: Path,
) -> None:
    """A first start has no checkpoint files to read; that is not news worth a line each."""
    with ServeProcess(tmp_path / "data", "--log-level", "info") as broker:
        pass
    messages = [text_entry(line)["message"] for line in broker.lines]
    assert [m for m in messages if "checkpoint" in m] == [], messages
    assert len([m for m in messages if "a new log directory" in m]) == 1, messages
