"""SaslGate: what a connection of odradek's protocol lets through before SASL authentication.

The Kafka connection does the same inline; this keeps the msgpack connection's hooks to three
calls: :meth:`allows` before a request is decoded, :meth:`after_step` after each response (a
failed exchange closes the connection), and the deadline counted from accept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from odradek.network.session import Session


class LimitedReader(Protocol):
    max_frame_bytes: int


class SaslGate:
    """Gates one connection's requests until its session's SASL exchange completes."""

    def __init__(
        self,
        session: Session,
        timer: asyncio.TimerHandle,
        reader: LimitedReader,
        max_request_bytes: int,
    ) -> None:
        self._session = session
        self._timer: asyncio.TimerHandle | None = timer
        self._reader = reader
        self._max_request_bytes = max_request_bytes
        reader.max_frame_bytes = min(max_request_bytes, session.authenticator.max_receive_bytes)

    @classmethod
    def start(
        cls,
        session: Session,
        loop: asyncio.AbstractEventLoop,
        on_timeout: Callable[[str], None],
        reader: LimitedReader,
        max_request_bytes: int,
    ) -> SaslGate | None:
        """A gate for ``session``, None when its listener does not use SASL. Until the
        exchange completes, ``reader`` reads requests up to ``sasl.server.max.receive.size``
        only; then up to ``max_request_bytes``."""
        authenticator = session.authenticator
        if authenticator is None:
            return None
        authenticator.peer = session.peer
        deadline = session.accepted_at + authenticator.timeout_s
        message = f"no SASL authentication within {authenticator.timeout_s:.0f} s"
        timer = loop.call_at(deadline, on_timeout, message)
        return cls(session, timer, reader, max_request_bytes)

    def allows(self, api_key: int) -> bool:
        return self._session.authenticator.allows(api_key)

    def after_step(self) -> bool:
        """True when the exchange failed (close the connection once the answer is out)."""
        authenticator = self._session.authenticator
        if authenticator.complete and self._timer is not None:
            self.cancel()
            self._reader.max_frame_bytes = self._max_request_bytes
        return authenticator.failed

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
