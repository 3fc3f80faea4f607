"""SharedDescriptor: an open file descriptor shared by its file and the reads in flight on it.

A descriptor number is reused by the next ``open`` as soon as it is closed. A fetch that took a
segment's descriptor for a later ``sendfile`` would then send whatever file got the number, if
the segment closed it meanwhile (deleted, shut down, or closed while idle). So every user holds
the descriptor while it uses it, and the last one to let go closes it.
"""

from __future__ import annotations

import logging
import os
import threading

logger = logging.getLogger(__name__)


class SharedDescriptor:
    """An open descriptor and how many hold it; closed when the last holder releases it.

    It starts with one holder: the file that opened it.
    """

    __slots__ = ("_fd", "_holders", "_lock")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._holders = 1
        self._lock = threading.Lock()

    @property
    def fd(self) -> int:
        """The descriptor number; -1 once closed."""
        return self._fd

    @property
    def holders(self) -> int:
        return self._holders

    def acquire(self) -> bool:
        """Hold the descriptor one more time; False when it is already closed."""
        with self._lock:
            if self._holders == 0:
                return False
            self._holders += 1
            return True

    def release(self) -> None:
        """Let go of one hold; the last closes the descriptor."""
        with self._lock:
            self._holders -= 1
            if self._holders:
                return
            fd, self._fd = self._fd, -1
        try:
            os.close(fd)
        except OSError as error:  # Linux frees the number whatever close reports
            # The text, not the exception: a release runs inside whatever evicted the file
            # (an index mapping itself, a read), and a record kept by a handler (a log
            # capture, a buffering handler) would keep the traceback's frames, and with them
            # what those callers held: an index map, a read's descriptor.
            logger.warning("closing descriptor %d reported %s", fd, str(error))

    def __repr__(self) -> str:
        return f"SharedDescriptor(fd={self._fd}, holders={self._holders})"


class DescriptorPin:
    """One hold on a SharedDescriptor, released once (explicitly or when collected): for a
    reader whose use ends somewhere else (a fetch's slice, sent later). It takes over a hold
    the caller acquired."""

    __slots__ = ("_descriptor", "fd")

    def __init__(self, descriptor: SharedDescriptor) -> None:
        self._descriptor: SharedDescriptor | None = descriptor
        self.fd = descriptor.fd

    def release(self) -> None:
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            descriptor.release()

    def __del__(self) -> None:
        try:
            self.release()
        except OSError:  # closing at interpreter exit: nothing to report to
            pass
