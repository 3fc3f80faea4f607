"""LogDirFailureChannel: where storage reports a failed log directory (Kafka's class of that name).

Any part of storage that gets an I/O error it cannot recover from (a UnifiedLog's append or flush, a
checkpoint write) reports the log directory here. The first report takes the directory offline
and notifies the listeners once (the LogManager then closes that directory's logs); later
reports of the same directory are no-ops. Offline directories stay offline until restart.

Running out of file descriptors (EMFILE, ENFILE) is no failure of the directory: the process (or
the system) holds too many files open, and the disk is fine. Such a report leaves the directory
online; the operation that hit it fails with a retriable error and works again once
descriptors are free.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from odradek.errors import is_descriptor_exhaustion

logger = logging.getLogger(__name__)

OfflineListener = Callable[[Path], None]


class LogDirFailureChannel:
    """The set of offline log directories, with listeners told of each new one."""

    def __init__(self) -> None:
        self._offline: dict[Path, str] = {}
        self._listeners: list[OfflineListener] = []
        self._lock = threading.Lock()

    def add_listener(self, listener: OfflineListener) -> None:
        """Call ``listener(log_dir)`` whenever a directory goes offline (on the reporter's
        thread: listeners must be quick and must not take a UnifiedLog's lock)."""
        with self._lock:
            self._listeners.append(listener)

    def maybe_add_offline_log_dir(
        self, log_dir: Path, message: str, error: BaseException | None = None
    ) -> bool:
        """Take ``log_dir`` offline for the reason ``message``; True if it was online.

        An ``error`` that is descriptor exhaustion leaves the directory online (and returns
        False): the caller's operation fails, the next one may succeed.
        """
        if is_descriptor_exhaustion(error):
            logger.warning(
                "log directory %s stays online: %s (out of file descriptors, not a disk failure)",
                log_dir,
                message,
            )
            return False
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = message
            listeners = list(self._listeners)
        logger.error("log directory %s is offline: %s", log_dir, message, exc_info=error)
        for listener in listeners:
            listener(log_dir)
        return True

    def is_offline(self, log_dir: Path) -> bool:
        return bool(self._offline) and log_dir in self._offline  # (asked on every request)

    def reason(self, log_dir: Path) -> str | None:
        """Why ``log_dir`` went offline, or None while it is online."""
        return self._offline.get(log_dir)

    @property
    def offline_log_dirs(self) -> frozenset[Path]:
        with self._lock:
            return frozenset(self._offline)
