"""LogDirLock: the ``.lock`` file that keeps two brokers out of one log directory (design §2).

The lock is an exclusive ``flock`` on ``<log dir>/.lock``, held for the broker's lifetime and
dropped by the kernel if the process dies, so a crash never leaves a stale lock. The holder
writes its pid and host into the file, and a second broker names them when it fails to start.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from odradek.errors import LogDirLockedError

LOCK_FILE_NAME = ".lock"


class LogDirLock:
    """A held lock on one log directory; ``release()`` gives it up."""

    def __init__(self, log_dir: Path, fd: int) -> None:
        self.log_dir = log_dir
        self._fd = fd

    @classmethod
    def acquire(cls, log_dir: Path) -> LogDirLock:
        """Lock ``log_dir`` or raise LogDirLockedError naming the process that holds it."""
        fd = os.open(log_dir / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise LogDirLockedError(
                f"log directory {log_dir} is in use by another broker ({holder}); "
                f"each log directory can serve one broker at a time"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        holder = f"pid {os.getpid()} on host {socket.gethostname()}\n".encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder, 0)
        return cls(log_dir, fd)

    @property
    def is_held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """Unlock and close; a second call does nothing."""
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def _read_holder(fd: int) -> str:
    holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    return holder or "holder unknown"
