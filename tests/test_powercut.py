"""Power cuts at random instants, on a file system that keeps only what was made durable
(tests/powercut_fs.py): acknowledged records and completed administration survive, recovery
never serves garbage.

Each scenario drives a LogManager in this process against the FUSE mount, cuts the power at a
random moment of its work, opens the durable state again and checks it against what was
acknowledged. ``POWERCUT_CUTS`` scales the number of cuts (``make soak`` runs thousands).
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest

from odradek.config.broker_config import BrokerConfig
from odradek.record.record_batch_builder import build_batch
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition
from tests.powercut_fs import PowerCutFS
from tests.powercut_helpers import CutTimer, abandon, log_values, mounted

CUTS_SCALE = float(os.environ.get("POWERCUT_CUTS", "1"))


def cuts(count: int) -> int:
    return max(1, int(count * CUTS_SCALE))


@pytest.fixture
def fs(tmp_path: Path):
    powercut = mounted(tmp_path)
    try:
        yield powercut
    finally:
        powercut.stop()


def broker_config(fs: PowerCutFS, **settings: object) -> BrokerConfig:
    settings.setdefault("log_segment_bytes", 4096)
    settings.setdefault("log_dirs", (str(fs.mount / "data"),))
    return BrokerConfig(**settings)


def value_batch(values: list[int], key: bytes | None = None) -> bytes:
    """Records whose values are ``values`` (so a lost or repeated one is seen), stamped now
    (so time retention leaves them)."""
    now_ms = int(time.time() * 1000)
    return build_batch([(now_ms, key, str(v).encode(), ()) for v in values])


def started(config: BrokerConfig) -> LogManager:
    manager = LogManager(config, initial_task_delay_ms=10)
    manager.startup()
    return manager


def test_acks_all_records_survive_cuts_across_segment_rolls(fs: PowerCutFS) -> None:
    """acks=all: every acknowledged record survives, once, in order, with contiguous offsets;
    the log directory, the topic and its new segments survive the first cut after their
    creation. Each round starts a new log directory, so creation is cut often and the log
    each cut rebuilds stays small."""
    rng = random.Random(2501)
    rounds, cuts_per_round = cuts(8), 8
    for round_number in range(rounds):
        config = broker_config(fs, log_dirs=(str(fs.mount / f"data-{round_number}"),))
        acks_all_round(fs, config, rng, cuts_per_round)
        shutil.rmtree(fs.mount / f"data-{round_number}")


def acks_all_round(fs: PowerCutFS, config: BrokerConfig, rng: random.Random, count: int) -> None:
    tp = TopicPartition("pc", 0)
    survived: list[bytes] = []  # the log's values as the last recovery found them
    acked: list[bytes] = []
    next_value = 0
    for cut in range(count + 1):
        manager = started(config)
        if cut == 0:
            manager.create_topic("pc", 2)
        else:
            values = log_values(manager.get_log(tp))
            assert values[: len(survived)] == survived, f"cut {cut}: records vanished"
            present = set(values)
            missing = [v for v in acked if v not in present]
            assert not missing, f"cut {cut}: acknowledged records lost: {missing[:5]}"
            new = values[len(survived) :]
            assert all(int(a) < int(b) for a, b in zip(new, new[1:], strict=False)), (
                f"cut {cut}: records duplicated or out of order"
            )
            survived = values
        if cut == count:
            manager.shutdown()
            return
        log = manager.get_log(tp)
        produced_from = next_value

        def produce(stop, log=log, produced_from=produced_from) -> None:
            value = produced_from
            while not stop.is_set():
                batch_values = list(range(value, value + rng.randint(1, 5)))
                value += len(batch_values)
                info = log.append(value_batch(batch_values))
                log.flush(info.last_offset + 1)  # what acks=all waits for (GroupCommit)
                acked.extend(str(v).encode() for v in batch_values)

        with CutTimer(produce) as workload:
            time.sleep(rng.uniform(0, 0.04))
            fs.cut(abandon=lambda: (workload.join(), abandon(manager)))  # noqa: B023
        next_value = produced_from + 10_000
