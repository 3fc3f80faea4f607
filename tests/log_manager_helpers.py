"""Helpers shared by the LogManager tests: broker configs over temporary log dirs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.clock import Clock, MockClock
from odradek.config.broker_config import BrokerConfig
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.storage.log_manager import LogManager


def broker_config(root: Path, dirs: int = 2, **settings: object) -> BrokerConfig:
    """A broker config with ``dirs`` log directories ``d0``, ``d1``... under ``root``."""
    log_dirs = tuple(str(root / f"d{number}") for number in range(dirs))
    return BrokerConfig(log_dirs=log_dirs, **settings)


@contextmanager
def running(
    config: BrokerConfig, clock: Clock | None = None, initial_task_delay_ms: int = 60_000
) -> Iterator[LogManager]:
    """A started LogManager, shut down cleanly afterwards."""
    manager = LogManager(
        config, clock=clock or MockClock(), initial_task_delay_ms=initial_task_delay_ms
    )
    manager.startup()
    try:
        yield manager
    finally:
        manager.shutdown()


def topic_admin(manager: LogManager) -> TopicAdmin:
    """The topic administration of ``manager``'s logs."""
    return TopicAdmin(manager, manager.config)


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)
