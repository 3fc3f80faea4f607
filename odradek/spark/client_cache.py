"""Clients kept open between the Spark tasks one Python worker runs.

Spark reuses a Python worker for the tasks that follow (``spark.python.worker.reuse``, on by
default), so a client kept in the worker spares each micro-batch's tasks the connection, the
metadata lookup and, for an idempotent producer, InitProducerId. Spark's Kafka connector keeps
its producers and consumers in executor caches for the same reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from odradek.client.blocking_client import BlockingClient

logger = logging.getLogger(__name__)

C = TypeVar("C", bound=BlockingClient)

IDLE_TIMEOUT_S = 5 * 60.0
"""A client unused this long is closed (at the next use of its cache), before a broker with
Kafka's default ``connections.max.idle.ms`` (10 minutes) drops its connection."""
CAPACITY = 64
"""Clients kept idle at most per cache (Spark's Kafka consumer cache keeps 64 too); beyond it
the least recently used one is closed."""


def settings_key(configs: Mapping[str, Any]) -> Hashable:
    """A cache key for client settings (strings, numbers and booleans)."""
    return tuple(sorted(configs.items()))


def close_client(client: BlockingClient) -> None:
    client.close()


@dataclass
class _Idle(Generic[C]):
    client: C
    since: float


class ClientCache(Generic[C]):
    """Idle clients by key; a client is lent to one task at a time.

    A client comes back only from a task that ended normally; one whose task failed is closed
    with ``discard``, since its state (a failed send, a position mid-range) is not to be trusted.
    """

    def __init__(
        self,
        discard: Callable[[C], None] | None = None,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        capacity: int = CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._discard = discard or close_client
        self._idle_timeout_s = idle_timeout_s
        self._capacity = capacity
        self._clock = clock
        self._idle: OrderedDict[Hashable, _Idle[C]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many clients are idle here."""
        return len(self._idle)

    @contextmanager
    def lend(self, key: Hashable, make: Callable[[], C]) -> Iterator[C]:
        """The idle client under ``key``, else a new one from ``make``; kept again afterwards
        unless the block raised."""
        with self._lock:
            closing = self._expired()
            idle = self._idle.pop(key, None)
        self._close(closing)
        client = idle.client if idle is not None else make()
        try:
            yield client
        except BaseException:
            self._close([client], self._discard)
            raise
        with self._lock:
            replaced = self._idle.pop(key, None)
            self._idle[key] = _Idle(client, self._clock())
            closing = [replaced.client] if replaced is not None else []
            while len(self._idle) > self._capacity:
                closing.append(self._idle.popitem(last=False)[1].client)
        self._close(closing)

    def close(self) -> None:
        """Close every idle client."""
        with self._lock:
            closing = [idle.client for idle in self._idle.values()]
            self._idle.clear()
        self._close(closing)

    def _expired(self) -> list[C]:
        deadline = self._clock() - self._idle_timeout_s
        expired = [key for key, idle in self._idle.items() if idle.since <= deadline]
        return [self._idle.pop(key).client for key in expired]

    def _close(self, clients: list[C], close: Callable[[C], None] = close_client) -> None:
        for client in clients:
            try:
                close(client)
            except Exception:  # a client that fails to close is gone all the same
                logger.warning("closing a cached %s failed", type(client).__name__, exc_info=True)
