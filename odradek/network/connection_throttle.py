"""ConnectionThrottle: a connection muted while its client's quota throttle lasts (KIP-219:
the response goes out at once with its throttle time, then the broker reads nothing more from
that connection until the time has passed)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from odradek.network.session import Session


class ConnectionThrottle:
    """``muted`` while a throttle lasts; ``update_reading`` is called when it starts and ends."""

    def __init__(self, update_reading: Callable[[], None]) -> None:
        self._update_reading = update_reading
        self._timer: asyncio.TimerHandle | None = None
        self.muted = False

    def start(self, session: Session) -> None:
        """Mute for the session's pending throttle (extending a shorter one under way)."""
        seconds, session.throttle_s = session.throttle_s, 0.0
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        if self._timer is not None:
            if self._timer.when() >= until:
                return
            self._timer.cancel()
        self._timer = loop.call_at(until, self._end)
        self.muted = True
        self._update_reading()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _end(self) -> None:
        self._timer = None
        self.muted = False
        self._update_reading()
