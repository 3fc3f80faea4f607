"""ResponseWriter: one connection's outgoing frames, in order, with zero-copy file regions.

A frame made only of bytes goes straight to the transport. A frame carrying file regions (a
fetch response) is written by a task: its bytes through the transport, then, once the
transport has nothing buffered, each region with sendfile on the socket itself. Frames queued
meanwhile wait their turn behind it, so bytes of different frames never interleave.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from odradek.errors import is_descriptor_exhaustion
from odradek.network.file_region import FileRegion
from odradek.network.network_metrics import COPIED, SENDFILE, NetworkMetrics
from odradek.network.sendfile_sender import SendfileSender
from odradek.protocol.values.wire_types import Payload

logger = logging.getLogger(__name__)


class ResponseWriter:
    """Writes the frames of one connection's responses in the order they are given."""

    def __init__(
        self,
        transport: asyncio.Transport,
        peer: str,
        executor: Executor,
        metrics: NetworkMetrics,
        on_backlog_change: Callable[[], None],
    ) -> None:
        self._transport = transport
        self._peer = peer
        self._executor = executor
        self._metrics = metrics
        self._on_backlog_change = on_backlog_change
        self._queue: deque[Sequence[Payload]] = deque()
        self._task: asyncio.Task[None] | None = None
        self._sender: SendfileSender | None = None
        self._drained: asyncio.Future[None] | None = None
        self._held: list[Payload] | None = None  # frames gathered between hold and release
        self.backlog_bytes = 0
        """Bytes of frames queued behind a zero-copy send, not yet handed to the socket."""

    @property
    def busy(self) -> bool:
        """True while frames are being written by the task (a file region is in the way)."""
        return self._task is not None

    def hold(self) -> None:
        """Gather the frames written from now on until ``release``, to hand them to the socket
        in one write (the responses to the requests of one read: one send, not one each)."""
        if self._task is None:
            self._held = []

    def release(self) -> None:
        """Write what was gathered since ``hold``."""
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._write_bytes(held)

    def write(self, frame: Sequence[Payload]) -> None:
        """Send ``frame`` (its prefix, then its payload pieces) after every earlier frame."""
        if self._task is None and FileRegion not in map(type, frame):
            if self._held is not None:
                self._held.extend(frame)
            else:
                self._write_bytes(frame)
            return
        self.release()  # what was gathered goes first
        self._queue.append(frame)
        self.backlog_bytes += sum(map(len, frame))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._write_queued())
        self._on_backlog_change()

    def write_bytes(self, frame: bytes) -> None:
        """``write`` of a frame that is one piece of bytes (a response answered at once),
        without a list around it or a look for file regions in it."""
        if self._task is not None:
            self.write([frame])
        elif self._held is not None:
            self._held.append(frame)
        else:
            self._transport.write(frame)
            self._metrics.network.sent += len(frame)

    async def flush(self) -> None:
        """Wait until every frame written so far has been handed to the socket."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def transport_resumed(self) -> None:
        """The transport's buffer fell to its low-water mark (forward of resume_writing)."""
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def close(self) -> None:
        """Drop what is queued and release the socket duplicate (the connection is gone)."""
        self._held = None
        if self._task is not None:
            self._task.cancel()
        if self._sender is not None:
            self._sender.close()
        self._queue.clear()
        self.backlog_bytes = 0

    async def _write_queued(self) -> None:
        try:
            while self._queue:
                frame = self._queue[0]
                await self._write_frame(frame)
                self._queue.popleft()
                self.backlog_bytes -= sum(map(len, frame))
                self._on_backlog_change()
        except OSError as error:
            logger.info("%s: sending a response failed, closing: %s", self._peer, error)
            self._transport.abort()
        finally:
            self._task = None

    async def _write_frame(self, frame: Sequence[Payload]) -> None:
        pending: list[Payload] = []
        for part in frame:
            if not isinstance(part, FileRegion):
                pending.append(part)
            elif len(part):
                self._write_bytes(pending)
                pending = []
                await self._send_region(part)
        self._write_bytes(pending)

    def _write_bytes(self, parts: Sequence[Payload]) -> None:
        if len(parts) == 1:
            self._transport.write(parts[0])
            self._metrics.network.sent += len(parts[0])
        elif parts:
            self._transport.writelines(parts)
            self._metrics.network.sent += sum(map(len, parts))

    async def _send_region(self, region: FileRegion) -> None:
        await self._transport_drained()
        sender = self._sendfile_sender()
        sent = await sender.send(region) if sender is not None and sender.supported else 0
        if sent:
            self._metrics.fetch_bytes.labels(SENDFILE).inc(sent)
            self._metrics.network.sent += sent
        if sent < len(region):
            await self._copy(region, sent)

    async def _copy(self, region: FileRegion, skip: int) -> None:
        """The fallback: read the rest of ``region`` on a thread and write it as bytes."""
        slice_ = region.slice
        position, length = region.position + skip, len(region) - skip
        data = await asyncio.get_running_loop().run_in_executor(
            self._executor, slice_.read_at, position, length
        )
        if len(data) != length:
            raise OSError(f"{slice_.path} ended at byte {position + len(data)} inside a slice")
        self._transport.write(data)
        self._metrics.fetch_bytes.labels(COPIED).inc(length)
        self._metrics.network.sent += length

    def _sendfile_sender(self) -> SendfileSender | None:
        """The sender on this connection's socket; None when the transport is TLS (sendfile
        would put the file's bytes on the socket unencrypted), has no socket, or when the
        process is out of descriptors for its duplicate (the region is copied then, and the
        next one tries again)."""
        if self._transport.get_extra_info("ssl_object") is not None:
            return None
        if self._sender is None:
            sock = self._transport.get_extra_info("socket")
            if sock is not None:
                try:
                    self._sender = SendfileSender(sock.fileno(), self._executor)
                except OSError as error:
                    if not is_descriptor_exhaustion(error):
                        raise
                    logger.warning("%s: no descriptor for sendfile, copying: %s", self._peer, error)
        return self._sender

    async def _transport_drained(self) -> None:
        """Wait until the transport has sent everything it buffered.

        The transport only reports crossing its low-water mark, so the marks are set to zero
        for the wait: it then pauses the protocol now and resumes it once empty.
        """
        transport = self._transport
        while transport.get_write_buffer_size():
            low, high = transport.get_write_buffer_limits()
            self._drained = asyncio.get_running_loop().create_future()
            transport.set_write_buffer_limits(high=0, low=0)
            try:
                await self._drained
            finally:
                self._drained = None
                if not transport.is_closing():
                    transport.set_write_buffer_limits(high=high, low=low)
