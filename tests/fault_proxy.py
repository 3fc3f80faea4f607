"""FaultProxy: a TCP proxy between a client and the broker that loses one acknowledgement.

Armed with a marker, it forwards everything until a client request carrying the marker has
gone through to the broker, then closes both sides of that connection at the broker's first
answer, which it never forwards: the broker has appended the batch, the client never hears of
it and must retry (on a new connection, which the proxy forwards as usual). Protocol-blind:
it works for Kafka's protocol and odradek's alike. ``on_drop`` runs when it drops (e.g. to
SIGKILL the broker before the retry arrives); the target port may change between connections
(a restarted broker).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from odradek.client.event_loop_thread import EventLoopThread


class FaultProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.drops = 0
        self._marker: bytes | None = None
        self._on_drop: Callable[[], None] | None = None
        self._loop_thread = EventLoopThread(name="fault-proxy")
        self._server = self._loop_thread.run(
            asyncio.start_server(self._serve, "127.0.0.1", 0), timeout=10
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._lock = threading.Lock()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def arm(self, marker: bytes, on_drop: Callable[[], None] | None = None) -> None:
        """Drop the acknowledgement of the next request that contains ``marker``."""
        with self._lock:
            self._marker, self._on_drop = marker, on_drop

    def close(self) -> None:
        self._server.close()
        self._loop_thread.run(self._server.wait_closed(), timeout=10)

    async def _serve(self, client_reader, client_writer) -> None:
        try:
            broker_reader, broker_writer = await asyncio.open_connection(
                "127.0.0.1", self.target_port
            )
        except OSError:
            client_writer.close()
            return
        dropping = asyncio.Event()

        async def upstream() -> None:
            while data := await client_reader.read(65536):
                with self._lock:
                    if self._marker is not None and self._marker in data:
                        self._marker = None
                        dropping.set()
                broker_writer.write(data)
                await broker_writer.drain()
            broker_writer.close()

        async def downstream() -> None:
            while data := await broker_reader.read(65536):
                if dropping.is_set():
                    self.drops += 1
                    with self._lock:
                        on_drop, self._on_drop = self._on_drop, None
                    if on_drop is not None:
                        await asyncio.get_running_loop().run_in_executor(None, on_drop)
                    break
                client_writer.write(data)
                await client_writer.drain()
            client_writer.close()
            broker_writer.close()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for writer in (client_writer, broker_writer):
                writer.close()
