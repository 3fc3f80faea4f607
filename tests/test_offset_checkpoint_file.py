"""OffsetCheckpointFile: Kafka's checkpoint text format, atomic writes, tolerant reads."""

from __future__ import annotations

import logging
import os

import pytest

from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile, parse_checkpoint
from odradek.topic_partition import TopicPartition

ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)
EVENTS_7 = TopicPartition("app.events_v2", 7)


def test_write_produces_kafkas_text_format(tmp_path):
    checkpoint = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    checkpoint.write({ORDERS_1: 1432, ORDERS_0: 1500, EVENTS_7: 0})
    assert checkpoint.path.read_text() == "0\n3\napp.events_v2 7 0\norders 0 1500\norders 1 1432\n"


def test_read_returns_what_was_written(tmp_path):
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    offsets = {ORDERS_0: 2**63 - 1, ORDERS_1: 0, EVENTS_7: 42}
    checkpoint.write(offsets)
    assert OffsetCheckpointFile(tmp_path / "cp").read() == offsets


def test_write_replaces_previous_entries_and_leaves_no_tmp_file(tmp_path):
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    checkpoint.write({ORDERS_0: 1, ORDERS_1: 2})
    checkpoint.write({EVENTS_7: 3})
    assert checkpoint.read() == {EVENTS_7: 3}
    assert sorted(os.listdir(tmp_path)) == ["cp"]


def test_empty_checkpoint_round_trips(tmp_path):
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    checkpoint.write({})
    assert checkpoint.path.read_text() == "0\n0\n"
    assert checkpoint.read() == {}


def test_missing_file_reads_as_empty(tmp_path):
    assert OffsetCheckpointFile(tmp_path / "absent").read() == {}


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "missing the version"),
        ("1\n0\n", "unsupported version"),
        ("0\n2\norders 0 5\n", "count line says 2"),
        ("0\n1\norders 0\n", "not 'topic partition offset'"),
        ("0\n1\norders x 5\n", "partition 'x'"),
        ("0\n1\norders 0 -5\n", "offset '-5'"),
        ("0\n1\n../etc 0 5\n", "characters other than"),
        ("0\nmany\n", "entry count"),
    ],
)
def test_malformed_text_is_rejected_with_the_reason(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_checkpoint(text)


def test_corrupt_file_is_logged_and_read_as_empty(tmp_path, caplog):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text("0\n3\norders 0 5\n")
    with caplog.at_level(logging.WARNING):
        assert OffsetCheckpointFile(path).read() == {}
    assert "malformed checkpoint" in caplog.text and str(path) in caplog.text


def test_undecodable_file_is_read_as_empty(tmp_path):
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff\xfe 0 5\n")
    assert OffsetCheckpointFile(path).read() == {}


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    checkpoint = OffsetCheckpointFile(tmp_path / "cp")
    checkpoint.write({ORDERS_0: 7})

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        checkpoint.write({ORDERS_0: 8})
    monkeypatch.undo()
    assert checkpoint.read() == {ORDERS_0: 7}
