"""SendfileSender: zero-copy sends of file regions to one connection's socket.

uvloop implements neither ``loop.sendfile`` nor ``add_writer`` on a transport's own descriptor,
so the sender works on a duplicate of the socket's descriptor: same socket, same O_NONBLOCK
flag, a descriptor number the loop lets us watch. The caller makes sure the transport has
nothing buffered before a send and writes nothing through it until the send is done, so the
bytes of the two paths never interleave.

``os.sendfile`` never blocks on the socket (it is non-blocking: when full we wait on
``add_writer``) but does block on the disk when the file's pages are not cached. Each window
is therefore probed first (:func:`is_resident`); a cold window is sent from a thread, so one
client reading old data does not stall the loop for everyone else.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from concurrent.futures import Executor, Future

from odradek.network.file_region import FileRegion
from odradek.network.page_cache import is_resident

logger = logging.getLogger(__name__)

WINDOW_BYTES = 1024 * 1024
"""Most bytes handed to one sendfile call (and probed before it)."""

UNSUPPORTED_ERRNOS = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})
"""sendfile errors meaning "not for this file or socket": copy instead."""


class SendfileSender:
    """Sends file regions with ``os.sendfile`` on a duplicate of ``socket_fd``."""

    def __init__(self, socket_fd: int, executor: Executor) -> None:
        self._fd = os.dup(socket_fd)
        self._executor = executor
        self._loop = asyncio.get_running_loop()
        self._in_thread: Future[int | None] | None = None
        self.supported = True
        """False once sendfile failed as unsupported; the caller copies from then on."""

    async def send(self, region: FileRegion) -> int:
        """Send ``region``; return the bytes sent, fewer than its length only when sendfile
        turned out to be unsupported (the caller copies the rest).

        Raises OSError when the socket fails or the file is shorter than the region.
        """
        position = region.position
        end = position + len(region)
        while position < end and self.supported:
            count = min(WINDOW_BYTES, end - position)
            if is_resident(region.fd, position, count):
                sent = self._sendfile(self._fd, region.fd, position, count)
            else:
                sent = await self._sendfile_in_thread(region, position, count)
            if sent is None:
                await self._writable()
                continue
            position += sent
            if position < end:
                await asyncio.sleep(0)  # a long send takes turns with other connections
        return position - region.position

    def _sendfile(self, socket_fd: int, file_fd: int, position: int, count: int) -> int | None:
        """Bytes sent, 0 when unsupported, None when the socket is full."""
        try:
            sent = os.sendfile(socket_fd, file_fd, position, count)
        except BlockingIOError:
            return None
        except OSError as error:
            if error.errno not in UNSUPPORTED_ERRNOS:
                raise
            logger.info("sendfile is not supported here (%s); copying instead", error.strerror)
            self.supported = False
            return 0
        if sent == 0:
            raise OSError(errno.EIO, f"file ended at byte {position} inside a fetched slice")
        return sent

    async def _sendfile_in_thread(
        self, region: FileRegion, position: int, count: int
    ) -> int | None:
        """``_sendfile`` on a thread. The thread's task holds ``region`` (and so its file's
        descriptor, see FileSlice) until it returns, even if this send is cancelled first."""
        in_thread = self._executor.submit(self._sendfile_region, self._fd, region, position, count)
        self._in_thread = in_thread
        return await asyncio.wrap_future(in_thread)

    def _sendfile_region(
        self, socket_fd: int, region: FileRegion, position: int, count: int
    ) -> int | None:
        return self._sendfile(socket_fd, region.fd, position, count)

    async def _writable(self) -> None:
        """Wait until the socket can take more bytes."""
        fd = self._fd
        writable = self._loop.create_future()
        self._loop.add_writer(fd, _settle, writable)
        try:
            await writable
        finally:
            if self._fd == fd:
                self._loop.remove_writer(fd)

    def close(self) -> None:
        """Close the duplicate descriptor (the socket closes when the transport's is closed
        too). Call it when the connection is lost; a sendfile still running on a thread
        keeps the descriptor until it returns."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        self._loop.remove_writer(fd)
        in_thread = self._in_thread
        if in_thread is None or in_thread.done():
            os.close(fd)
        else:
            # The thread still uses the number; closing it now could let a new connection
            # reuse it and receive this one's bytes.
            in_thread.add_done_callback(lambda _: os.close(fd))


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
