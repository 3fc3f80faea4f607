"""The start-up log states the descriptor limit and the broker's estimated need; log lines
about many partitions name a count and the first few."""

from __future__ import annotations

import errno
import logging
import os
import resource

import pytest
from log_helpers import append, batch
from log_manager_helpers import broker_config, running, topic_admin, wait_until

from odradek.storage.descriptor_budget import RESERVED_DESCRIPTORS, DescriptorBudget
from odradek.storage.idle_file_cache import IDLE_FILES
from odradek.topic_partition import TopicPartition, describe_partitions


def budget_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "file descriptor limit" in r.getMessage()]


def test_startup_states_the_limit_and_the_need(tmp_path, caplog):
    config = broker_config(tmp_path, dirs=1, max_connections=100)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 3)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with caplog.at_level(logging.INFO), running(config):
        pass
    (line,) = budget_lines(caplog)
    assert line.levelno == logging.INFO
    message = line.getMessage()
    assert f"file descriptor limit {soft} (soft; hard {hard})" in message
    need = 3 + min(IDLE_FILES.capacity, 9) + 100 + RESERVED_DESCRIPTORS
    assert f"estimated need {need}: 3 partitions' active segments" in message
    assert "3 segments" in message and "100 connections (max.connections)" in message


def test_startup_warns_when_the_need_exceeds_the_limit(tmp_path, caplog):
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    config = broker_config(tmp_path, dirs=1, max_connections=soft)
    with caplog.at_level(logging.INFO), running(config):
        pass
    (line,) = budget_lines(caplog)
    assert line.levelno == logging.WARNING
    assert "raise the limit (ulimit -n, LimitNOFILE) or lower max.connections" in line.getMessage()


def test_the_need_counts_partitions_idle_files_and_connections():
    budget = DescriptorBudget(
        1024, 4096, partitions=100, segments=900, idle_files=128, connections=500
    )
    assert budget.need == 100 + 128 + 500 + RESERVED_DESCRIPTORS
    assert not budget.exceeds_limit
    assert DescriptorBudget(1024, 4096, 1000, 1000, 128, 10000).exceeds_limit
    assert not DescriptorBudget(-1, -1, 1000, 1000, 128, 10000).exceeds_limit


def test_many_partitions_are_a_count_and_the_first_few_names():
    partitions = [TopicPartition("orders", number) for number in range(7000)]
    text = describe_partitions(partitions)
    assert (
        text == "7000 partitions (orders-0, orders-1, orders-2, orders-3, orders-4 and 6995 more)"
    )
    assert describe_partitions(partitions[:1]) == "1 partition (orders-0)"
    assert describe_partitions([]) == "no partitions"


def test_a_directory_going_offline_names_a_count_not_every_partition(tmp_path, caplog, monkeypatch):
    with running(broker_config(tmp_path, dirs=1)) as manager:
        topic_admin(manager).create_topic("orders", 40)
        log = manager.get_log(TopicPartition("orders", 0))

        def failing(*args, **kwargs):
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        with caplog.at_level(logging.ERROR):
            monkeypatch.setattr(os, "fdatasync", failing)
            append(log, batch(1))
            with pytest.raises(Exception, match="Input/output error"):
                log.flush()
            monkeypatch.undo()
            wait_until(lambda: any("unavailable" in r.getMessage() for r in caplog.records))
    (line,) = [r.getMessage() for r in caplog.records if "unavailable" in r.getMessage()]
    assert "40 partitions (orders-0, orders-1, orders-2, orders-3, orders-4 and 35 more)" in line
    assert "orders-39" not in line
