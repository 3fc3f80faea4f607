"""DelayedFetchPurgatory: fetches waiting for data, watched by partition (Kafka's purgatory)."""

from __future__ import annotations

import asyncio

from odradek.server.delayed_fetch import DelayedFetch
from odradek.topic_partition import TopicPartition


class DelayedFetchPurgatory:
    """Holds waiting fetches under each partition they read; an append or high watermark move
    on a partition checks the fetches watching it (no polling: nothing runs while nothing
    changes). Everything happens on the event loop, so no lock is needed."""

    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[DelayedFetch]] = {}

    async def wait(self, fetch: DelayedFetch, timeout_s: float) -> None:
        """Return once ``fetch`` completes or ``timeout_s`` has passed."""
        if fetch.try_complete():
            return
        keys = fetch.keys
        for key in keys:
            self._watchers.setdefault(key, set()).add(fetch)
        deadline = asyncio.get_running_loop().call_later(timeout_s, fetch.force_complete)
        try:
            await fetch.future  # (its deadline completes it: no waiter, no set of futures)
        finally:
            deadline.cancel()
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(fetch)
                    if not watchers:
                        del self._watchers[key]

    def check_and_complete(self, key: TopicPartition) -> None:
        """``key``'s offsets moved: complete the fetches watching it that can be answered."""
        watchers = self._watchers.get(key) if self._watchers else None  # (on every append)
        if watchers:
            for fetch in list(watchers):
                fetch.try_complete()

    def complete_all(self) -> None:
        """Answer every waiting fetch now with what it can get (shutdown)."""
        for watchers in list(self._watchers.values()):
            for fetch in list(watchers):
                fetch.force_complete()
