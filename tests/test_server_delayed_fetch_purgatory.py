"""DelayedFetchPurgatory: a waiting fetch ends at its deadline, when an append makes it ready,
or when its request is cancelled; each way it leaves no watcher and no timer behind."""

from __future__ import annotations

import asyncio

import uvloop

from odradek.server.delayed_fetch_purgatory import DelayedFetchPurgatory
from odradek.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


class Fetch:
    """A waiting fetch that is ready once told so (what DelayedFetch decides from offsets)."""

    def __init__(self) -> None:
        self.keys = [TP]
        self.ready = False
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def try_complete(self) -> bool:
        if self.ready and not self.future.done():
            self.future.set_result(None)
        return self.future.done()

    def force_complete(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


def test_a_fetch_ends_at_its_deadline_when_an_append_makes_it_ready_or_when_cancelled() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        purgatory = DelayedFetchPurgatory()

        started = loop.time()
        await purgatory.wait(Fetch(), 0.05)
        assert 0.04 <= loop.time() - started < 1
        assert not purgatory._watchers

        fetch = Fetch()
        waiting = asyncio.ensure_future(purgatory.wait(fetch, 30))
        await asyncio.sleep(0.01)
        purgatory.check_and_complete(TP)  # not ready yet: still waiting
        assert not waiting.done()
        fetch.ready = True
        purgatory.check_and_complete(TP)
        await asyncio.wait_for(waiting, 1)
        assert not purgatory._watchers

        # Cancelled in the loop iteration that starts the wait, so before its deadline however
        # late a loaded machine runs the loop (a sleep here could outlast the 0.05 s deadline,
        # which then completes the fetch first, as it should).
        fetch = Fetch()
        waiting = asyncio.ensure_future(purgatory.wait(fetch, 0.05))
        await asyncio.sleep(0)
        assert purgatory._watchers and not waiting.done()
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert not purgatory._watchers
        await asyncio.sleep(0.08)  # past the deadline: nothing completes it after its end
        assert fetch.future.cancelled()

    uvloop.run(scenario())
