"""The broker connection a client uses: opened on first use, reopened after a failure.

odradek is a single broker, so every request goes to the first bootstrap server that answers;
the others are tried in turn when it does not. A failed attempt is not repeated sooner than
``reconnect_backoff_ms`` later.
"""

from __future__ import annotations

import asyncio
import logging
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


class NetworkClient:
    """Sends requests over one shared connection to the broker."""

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        self._addresses = config.broker_addresses()
        self._security = config.security()
        self._connection: Connection | None = None
        self._connecting = asyncio.Lock()
        self._last_failure = 0.0
        self._closed = False

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
        wait_s = self._last_failure + self._config.reconnect_backoff_ms / 1000 - time.monotonic()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
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
            except (SaslAuthenticationFailedError, UnsupportedSaslMechanismError):
                self._last_failure = time.monotonic()
                raise  # wrong credentials or mechanism: another server would say the same
            except KafkaError as error:
                failures.append(error.message)
                continue
            logger.debug("connected to %s:%d", host, port)
            return connection
        self._last_failure = time.monotonic()
        raise NetworkError("no bootstrap server is reachable: " + "; ".join(failures))
