"""ClientQuotas: the broker's three quota managers and the hooks its request paths call.

Produce requests count their record bytes against ``producer_byte_rate``, fetch responses
theirs against ``consumer_byte_rate`` (a fetch asks for at most one quota window's worth, as
Kafka caps it, and a fetch that would take its client over the quota is answered without its
records, which are then not counted, as Kafka answers it), and every request but a fetch
counts the time it took the broker against ``request_percentage`` (percent of one event loop;
a fetch's wait for data is not work, and its bytes are counted instead). A request that
takes its client over a quota is answered at once with the throttle time, and its connection
reads nothing more for that long (KIP-219); clients that honour the throttle time wait on
their side too. A client with a quota has its
requests handled one at a time (as Kafka handles every connection's), and those it sent
before a throttle wait for its end: the pipelined requests cannot overshoot the quota.

With no quota configured, the request paths pay one attribute check (``enabled``). The quotas
come from the ClientQuotaStore: read at start, after each AlterClientQuotas, and whenever the
file changes (looked at once a second: ``odradek quotas`` writes it directly).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import TypeVar

from odradek.security.kafka_principal import ANONYMOUS
from odradek.server.quota.client_quota_entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from odradek.server.quota.client_quota_manager import ClientQuotaManager
from odradek.server.quota.client_quota_store import ClientQuotaStore, QuotaChange, Quotas
from odradek.server.request_context import RequestContext

logger = logging.getLogger(__name__)

REFRESH_INTERVAL_S = 1.0
PERCENT_PER_SECOND = 100.0


ResponseT = TypeVar("ResponseT")


class ClientQuotas:
    """Produce, fetch and request-time quotas over one ClientQuotaStore."""

    def __init__(self, store: ClientQuotaStore, samples: int = 11, window_s: float = 1.0) -> None:
        self.store = store
        self.window_s = window_s
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples, window_s)
        self.enabled = False
        """Whether any quota is configured: the one check the request paths make."""
        self._watchers: list[Callable[[], None]] = []
        self._timer: asyncio.TimerHandle | None = None

    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request)

    # --- configuration -----------------------------------------------------------------------

    def load(self) -> None:
        """Read the store (at start-up; raises ValueError for a corrupt file)."""
        self.store.refresh()
        self._apply(self.store.quotas())

    def start(self) -> None:
        """Follow the store's file from now on (on the running loop)."""
        self._timer = asyncio.get_running_loop().call_later(REFRESH_INTERVAL_S, self._follow)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def describe(self) -> Quotas:
        return self.store.quotas()

    def alter(self, changes: Iterable[QuotaChange]) -> Quotas:
        """Apply ``changes`` to the store (blocking: call from a thread); the quotas now."""
        self.store.alter(changes)
        return self.store.quotas()

    def applied(self, quotas: Quotas) -> None:
        """Use ``quotas`` (read or written by ``alter``) from now on (on the loop)."""
        self._apply(quotas)

    def _follow(self) -> None:
        try:
            if self.store.refresh():
                self._apply(self.store.quotas())
        except (OSError, ValueError) as error:
            logger.error("client quotas unchanged: %s", error)
        self._timer = asyncio.get_running_loop().call_later(REFRESH_INTERVAL_S, self._follow)

    def _apply(self, quotas: Quotas) -> None:
        for manager in self.managers():
            manager.update(
                {
                    entity: values[manager.quota_key]
                    for entity, values in quotas.items()
                    if manager.quota_key in values
                }
            )
        enabled = any(manager.enabled for manager in self.managers())
        if enabled != self.enabled:
            logger.info("client quotas %s", "in force" if enabled else "off: none configured")
            self.enabled = enabled
            for watcher in self._watchers:
                watcher()

    def watch(self, watcher: Callable[[], None]) -> None:
        """Call ``watcher`` whenever ``enabled`` changes (for flags kept from it)."""
        self._watchers.append(watcher)

    # --- the request paths' hooks ------------------------------------------------------------

    def fetch_max_bytes(self, context: RequestContext) -> int | None:
        """The most a fetch of this client may ask for: one quota window's worth (None: no
        consumer quota applies)."""
        user, client_id = _client(context)
        quota = self.fetch.quota_for(user, client_id)
        return None if quota is None else max(1, int(quota * self.window_s))

    @asynccontextmanager
    async def admission(self, context: RequestContext) -> AsyncIterator[None]:
        """Around a request's handling: for a client with a quota, one request at a time,
        after the throttle in force has passed; nothing for the others."""
        session = context.session
        if session is None or not self._applies(*_client(context)):
            yield
            return
        if session.quota_lock is None:
            session.quota_lock = asyncio.Lock()
        async with session.quota_lock:
            delay = session.throttled_until - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            yield

    async def answer_counted(
        self,
        context: RequestContext,
        answer: Callable[[], Awaitable[ResponseT]],
        produced_bytes: int = 0,
        fetched_bytes: Callable[[ResponseT], int] | None = None,
        timed: bool = True,
    ) -> tuple[ResponseT, int, int]:
        """Answer a request under its client's quotas, for both wire protocols: admitted
        (``admission``), answered by ``answer()``, then counted: ``produced_bytes`` (Produce),
        the response's ``fetched_bytes`` (Fetch) and, when ``timed``, the time it took.
        Returns the response, the throttle time in ms (the connection is muted that long) and
        the fetched bytes counted; a throttled fetch must drop its records (not counted)."""
        async with self.admission(context):
            started = time.perf_counter()
            response = await answer()
            fetched = 0
            if fetched_bytes is not None and response is not None:
                fetched = fetched_bytes(response)
            request_s = time.perf_counter() - started if timed else None
            throttle_ms = self.throttle_ms(context, produced_bytes, fetched, request_s)
        return response, throttle_ms, fetched

    def _applies(self, user: str, client_id: str) -> bool:
        return any(m.quota_for(user, client_id) is not None for m in self.managers())

    def throttle_ms(
        self,
        context: RequestContext,
        produced_bytes: int = 0,
        fetched_bytes: int = 0,
        request_s: float | None = None,
    ) -> int:
        """Count a request's usage; the time its client must wait (0: none), for which its
        connection is muted once the response is out. A fetch given a throttle time must be
        answered without its records (they were not counted)."""
        user, client_id = _client(context)
        now_ms = time.monotonic() * 1000.0
        throttle = 0
        if produced_bytes:
            throttle = self.produce.record(user, client_id, produced_bytes, now_ms)
        if fetched_bytes:
            fetch_throttle = self.fetch.record(user, client_id, fetched_bytes, now_ms)
            if fetch_throttle:  # answered without its records: they do not count
                self.fetch.unrecord(user, client_id, fetched_bytes)
            throttle = max(throttle, fetch_throttle)
        if request_s is not None:
            used = request_s * PERCENT_PER_SECOND
            throttle = max(throttle, self.request.record(user, client_id, used, now_ms))
        if throttle and context.session is not None:
            context.session.throttle(throttle / 1000.0, now_ms / 1000.0)
        return throttle


def _client(context: RequestContext) -> tuple[str, str]:
    """The user (the principal's name) and client id quotas are looked up by."""
    session = context.session
    user = session.principal.name if session is not None else ANONYMOUS.name
    return user, context.header.client_id or ""
