"""RequestMemoryPool: the memory of requests being received or handled, bounded broker-wide.

Kafka's ``queued.max.request.bytes`` (its ``MemoryPool``): every byte a connection buffers for
a request, from its first byte until its response is written, is reserved here first. When
the pool is exhausted, connections stop reading their sockets (the kernel's buffers then push
back on the clients) and wait until reserved memory is released, instead of allocating more.

The pool only counts; buffers are allocated by their owners as the bytes arrive. Any frame
format can use it: reserve before growing a buffer, release when done with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

Waiter = Callable[[], None]


class RequestMemoryPool:
    """Counts reserved request bytes against ``capacity`` (None: unbounded) and tells waiters
    when memory is released. Used from the event loop only, so it takes no lock."""

    def __init__(self, capacity: int | None) -> None:
        self.reserved = 0
        self.limit: float = math.inf
        """``capacity``, or infinity when unbounded: the pool is exhausted once ``reserved``
        reaches it (a plain attribute, for the readers that look at every read)."""
        self.capacity = capacity
        self._waiters: dict[Waiter, None] = {}  # insertion-ordered: woken first come first

    @property
    def capacity(self) -> int | None:
        return self._capacity

    @capacity.setter
    def capacity(self, capacity: int | None) -> None:
        self._capacity = capacity
        self.limit = math.inf if capacity is None else capacity

    @property
    def exhausted(self) -> bool:
        """Whether nothing more can be reserved; readers should stop reading."""
        return self.reserved >= self.limit

    def try_reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes if the pool has them; False (and nothing reserved) if not."""
        if self.reserved + size > self.limit:
            return False
        self.reserved += size
        return True

    def reserve(self, size: int) -> None:
        """Reserve ``size`` bytes even past the capacity: for the few bytes a reader needs to
        make progress at all. The pool is then exhausted and readers stop."""
        self.reserved += size

    def release(self, size: int) -> None:
        """Give back ``size`` reserved bytes and wake the readers waiting for memory."""
        self.reserved -= size
        if self._waiters and self.reserved < self.limit:
            waiters, self._waiters = list(self._waiters), {}
            for waiter in waiters:
                waiter()

    def wait(self, waiter: Waiter) -> None:
        """Call ``waiter`` once, the next time memory is released below the capacity."""
        self._waiters[waiter] = None

    def cancel_wait(self, waiter: Waiter) -> None:
        self._waiters.pop(waiter, None)
