"""The broker connection a client uses: opened on first use, reopened after a failure.

odradek is a single broker, so every request goes to the first bootstrap server that answers;
the others are tried in turn when it does not. After a failed attempt the next waits, as in
Kafka's clients, ``reconnect_backoff_ms`` doubling with each failure up to
``reconnect_backoff_max_ms``, with 20% jitter so that many clients do not come back in step.

A broker going away and coming back is logged once each (WARNING, then INFO), naming it, not
once per attempt: whoever's request failed meanwhile logs that at DEBUG (see
:func:`retry_log_level`). A client that never reached the broker says nothing of its first
failure, which its caller reports (a one-shot command's error), only once it retries.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from typing import Any

from odradek.client.config import ClientConfig
from odradek.client.connection import Connection, InFlightRequest
from odradek.errors import (
    KafkaError,
    NetworkError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from odradek.protocol.schema import Message

logger = logging.getLogger(__name__)

RECONNECT_BACKOFF_JITTER = 0.2  # Kafka's CommonClientConfigs.RECONNECT_BACKOFF_JITTER


def reconnect_backoff_ms(failures: int, initial_ms: int, max_ms: int) -> float:
    """How long to wait after ``failures`` consecutive failed attempts (>= 1), as Kafka's
    ExponentialBackoff: ``initial_ms * 2**(failures - 1)``, times a random factor within
    1 +- 20%, never above ``max_ms``."""
    if initial_ms <= 0:
        return 0.0
    most_doublings = math.log2(max_ms / initial_ms) if max_ms > initial_ms else 0.0
    term = initial_ms * 2 ** min(failures - 1, most_doublings)
    jitter = random.uniform(1 - RECONNECT_BACKOFF_JITTER, 1 + RECONNECT_BACKOFF_JITTER)
    return min(term * jitter, max(max_ms, initial_ms))


def retry_log_level(error: KafkaError) -> int:
    """The level for a request that failed and will be retried: DEBUG when the broker could
    not be reached (the network client says that, once), else WARNING."""
    return logging.DEBUG if isinstance(error, NetworkError) else logging.WARNING


class NetworkClient:
    """Sends requests over one shared connection to the broker."""

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        self._addresses = config.broker_addresses()
        self._security = config.security()
        self._connection: Connection | None = None
        self._connecting = asyncio.Lock()
        self._failures = 0  # consecutive failed attempts
        self._next_attempt = 0.0  # time.monotonic() before which no attempt is made
        self._first_failure = 0.0
        self._connected_before = False
        self._closed = False
        self.connection_attempts = 0
        """Attempts to connect so far, each trying the bootstrap servers in turn."""

    async def send(self, request: Message, timeout_ms: int | None = None) -> Any:
        """Send ``request`` and return its response (see :meth:`Connection.send`)."""
        connection = await self.connection()
        return await connection.send(request, timeout_ms)

    def try_start(self, request: Message) -> tuple[Connection, InFlightRequest] | None:
        """Write ``request`` at once on the open connection (see :meth:`Connection.try_start`);
        None when there is none or it would have to wait."""
        connection = self._connection
        if connection is None or connection.closed:
            return None
        in_flight = connection.try_start(request)
        return None if in_flight is None else (connection, in_flight)

    async def send_no_response(self, request: Message) -> None:
        connection = await self.connection()
        await connection.send_no_response(request)

    async def connection(self) -> Connection:
        """The open connection, connecting first if there is none; NetworkError if no broker."""
        connection = self._connection
        if connection is not None and not connection.closed:
            return connection
        async with self._connecting:
            if self._connection is None or self._connection.closed:
                self._connection = await self._connect()
            return self._connection

    async def close(self) -> None:
        self._closed = True
        if self._connection is not None:
            await self._connection.close()

    async def _connect(self) -> Connection:
        if self._closed:
            raise NetworkError("the client is closed")
        wait_s = self._next_attempt - time.monotonic()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        self.connection_attempts += 1
        failures = []
        for host, port in self._addresses:
            connection = Connection(
                host,
                port,
                client_id=self._config.client_id,
                request_timeout_ms=self._config.request_timeout_ms,
                security=self._security,
            )
            try:
                await connection.connect()
            except (SaslAuthenticationFailedError, UnsupportedSaslMechanismError) as error:
                self._failed(error)
                raise  # wrong credentials or mechanism: another server would say the same
            except KafkaError as error:
                failures.append(error.message)
                continue
            self._connected(host, port)
            return connection
        error = NetworkError("no bootstrap server is reachable: " + "; ".join(failures))
        self._failed(error)
        raise error

    def _servers(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self._addresses)

    def _failed(self, error: KafkaError) -> None:
        """Count a failed attempt, set when the next may be made, and say the broker went
        away on the first failure after it was there (or the second, if it never was)."""
        now = time.monotonic()
        self._failures += 1
        if self._failures == 1:
            self._first_failure = now
        config = self._config
        backoff_ms = reconnect_backoff_ms(
            self._failures, config.reconnect_backoff_ms, config.reconnect_backoff_max_ms
        )
        self._next_attempt = now + backoff_ms / 1000
        if self._failures == (1 if self._connected_before else 2):
            logger.warning(
                "client %s: the broker at %s %s: %s; reconnecting after %d ms, backing off up "
                "to %d ms",
                config.client_id,
                self._servers(),
                "went away" if self._connected_before else "is unreachable",
                error.message,
                round(backoff_ms),
                config.reconnect_backoff_max_ms,
            )
        else:
            logger.debug(
                "client %s: attempt %d failed: %s", config.client_id, self._failures, error
            )

    def _connected(self, host: str, port: int) -> None:
        if self._failures >= (1 if self._connected_before else 2):
            logger.info(
                "client %s: the broker at %s is back (%s:%d) after %d failed attempts in %.1f s",
                self._config.client_id,
                self._servers(),
                host,
                port,
                self._failures,
                time.monotonic() - self._first_failure,
            )
        else:
            logger.debug("client %s: connected to %s:%d", self._config.client_id, host, port)
        self._failures = 0
        self._next_attempt = 0.0
        self._connected_before = True
