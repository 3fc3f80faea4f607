"""IdleFileCache: the segment files kept open while nothing writes to them, a bounded number.

Only the active segment of a partition is written. Every other segment's ``.log`` descriptor,
and every index map (a map holds a descriptor of its own in Python before 3.13), is opened when
a read needs it and stays open while it is among the most recently used; past the cache's
capacity the least recently used is released and opened again on its next use. So a broker
holds about one descriptor per partition (its active ``.log``) plus this constant, however many
segments its partitions have.
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict
from typing import Protocol

MAX_CAPACITY = 1024
MIN_CAPACITY = 16


class IdleFile(Protocol):
    """Something the cache may close: its ``release_idle`` lets go of the descriptor or map
    (a reader in flight keeps it until done) and it reopens on its next use."""

    def release_idle(self) -> None: ...


def default_capacity() -> int:
    """An eighth of the process's descriptor limit, within [16, 1024]: room for the active
    segments and the connections the rest of the limit is for."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CAPACITY
    return max(MIN_CAPACITY, min(MAX_CAPACITY, soft // 8))


class IdleFileCache:
    """Open idle files, least recently used first; ``touch`` past the capacity releases the
    oldest (outside the cache's lock: releasing takes the file's own)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an idle file cache needs a capacity of at least 1, not {capacity}")
        self._capacity = capacity
        self._files: OrderedDict[IdleFile, None] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return self._capacity

    def set_capacity(self, capacity: int) -> None:
        """Change the capacity, releasing the oldest files beyond it."""
        if capacity < 1:
            raise ValueError(f"an idle file cache needs a capacity of at least 1, not {capacity}")
        with self._lock:
            self._capacity = capacity
            evicted = self._evict()
        _release(evicted)

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, file: IdleFile) -> bool:
        return file in self._files

    def touch(self, file: IdleFile) -> None:
        """``file`` was just used (and is open): make it the most recent.

        A file already cached (an active segment's index, on every index entry) is moved
        without the lock: ``move_to_end`` is one step under the GIL, and a file evicted
        meanwhile raises KeyError and is added back below, as it would be after the lock.
        """
        try:
            self._files.move_to_end(file)
            return
        except KeyError:
            pass
        with self._lock:
            files = self._files
            if file in files:
                files.move_to_end(file)
                return
            files[file] = None
            evicted = self._evict() if len(files) > self._capacity else []
        _release(evicted)

    def discard(self, file: IdleFile) -> None:
        """Forget ``file`` without releasing it (it became active, or closed itself)."""
        with self._lock:
            self._files.pop(file, None)

    def _evict(self) -> list[IdleFile]:
        evicted = []
        while len(self._files) > self._capacity:
            evicted.append(self._files.popitem(last=False)[0])
        return evicted


def _release(files: list[IdleFile]) -> None:
    for file in files:
        file.release_idle()


IDLE_FILES = IdleFileCache(default_capacity())
"""The broker's one cache: the bound holds for the whole process."""
