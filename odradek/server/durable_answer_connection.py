"""DurableAnswerConnection: a connection that keeps acks=all answers waiting for their fsync.

Both wire protocols answer a produce of one partition at acks=all, appended at once, without a
task (DurableAnswer): the answer's bytes are ready, and it waits here, in request order behind
the others waiting, until the partition's group commit calls it with the flush's outcome.
Answers ended by one flush go out in one write. One whose flush failed, or did not end within
its request's ``timeout_ms`` (REQUEST_TIMED_OUT), is answered with its protocol's error
response (``_failed_durable_response``), as the general path answers it.

While any wait, one future (their *turn*) stands for them all among the connection's tasks:
a graceful shutdown waits for it, and a protocol whose responses leave in request order puts
it before the next request's (``_durable_turn_began``). Each waiting answer counts as a
request in flight and its bytes stay reserved until it goes out.
"""

from __future__ import annotations

import abc
import asyncio
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor

from odradek.errors import RequestTimedOutError, error_code_for, error_name_for
from odradek.network.connection import Connection, ConnectionRegistry, ConnectionSettings
from odradek.network.frame_reader import SizePrefixedFrameReader
from odradek.network.request_memory_pool import RequestMemoryPool
from odradek.network.session import Session
from odradek.protocol.api_keys import ApiKey
from odradek.server.durable_answer import DurableAnswer
from odradek.server.metrics.broker_metrics import BrokerMetrics

PRODUCE = int(ApiKey.PRODUCE)
"""The API key of a produce, the same in both protocols."""
PRODUCE_NAME = ApiKey.PRODUCE.display_name


class DurableAnswerConnection(Connection[memoryview]):
    """A connection whose protocol answers acks=all produces with DurableAnswers
    (``_wait_durable``); it says how an error is answered (``_failed_durable_response``)."""

    _metrics: BrokerMetrics

    def __init__(
        self,
        reader: SizePrefixedFrameReader[memoryview],
        settings: ConnectionSettings,
        registry: ConnectionRegistry,
        metrics: BrokerMetrics,
        executor: Executor,
        memory_pool: RequestMemoryPool,
        session: Session | None,
        api_name: Callable[[int], str],
    ) -> None:
        super().__init__(
            reader, settings, registry, metrics, executor, memory_pool, session, api_name
        )
        self._durable: deque[DurableAnswer] = deque()
        """Answers appended at once at acks=all waiting for their fsync, in request order."""
        self._durable_turn: asyncio.Future[None] | None = None
        """While any wait: done once every one is answered; in-flight work (``_tasks``) for
        a shutdown."""
        self._durable_timer: asyncio.TimerHandle | None = None
        self._durable_write_due = False

    # --- what a protocol says ------------------------------------------------------------------

    @abc.abstractmethod
    def _failed_durable_response(self, answer: DurableAnswer) -> bytes:
        """The response frame saying ``answer.failed`` (the flush failed or did not end in
        time) to the produce ``answer`` waited for, as the general path says it."""

    def _durable_turn_began(self, turn: asyncio.Future[None]) -> None:
        """Answers began to wait; ``turn`` is done once none does any more."""

    def _durable_turn_ended(self, turn: asyncio.Future[None]) -> None:
        """No answer waits any more (``turn`` is about to be done)."""

    # --- waiting -------------------------------------------------------------------------------

    def _wait_durable(self, answer: DurableAnswer, size: int) -> None:
        """Queue ``answer`` (a request of ``size`` bytes) behind the answers waiting already,
        to go out once the group commit of its partition has fsync'ed it."""
        loop = self._loop
        answer.size = size
        answer.received = self._received
        answer.deadline = loop.time() + answer.timeout_ms / 1000
        self._in_flight_bytes += size
        self._durable.append(answer)
        if self._durable_turn is None:
            turn = self._durable_turn = loop.create_future()
            self._tasks.add(turn)  # type: ignore[arg-type]  (awaited and cancelled alike)
            self._durable_timer = loop.call_at(answer.deadline, self._durable_timed_out)
            self._durable_turn_began(turn)
        if answer.partition.when_durable(answer.last_offset, answer):
            answer.done = True
            self._durable_done()
        else:
            answer.on_done = self._durable_done
        if not self._reading_paused:
            self._pause_or_resume_reading()

    def _requests_in_flight(self) -> int:
        # (the answers waiting for their fsync count one each, not as their turn's one)
        return len(self._tasks) + len(self._durable) - (self._durable_turn is not None)

    def _durable_done(self) -> None:
        """An answer's fsync ended: write the ready ones at the head once the callbacks of
        this turn of the loop have run (all those of one flush, in one write)."""
        if not self._durable_write_due:
            self._durable_write_due = True
            self._loop.call_soon(self._write_durable)

    def _write_durable(self) -> None:
        """Answer, in one write, the waiting answers at the head whose fsync has ended."""
        self._durable_write_due = False
        waiting = self._durable
        if not waiting or not waiting[0].done or self._transport.is_closing():
            return  # (a connection shutting down still answers; a lost one drops them)
        writer = self._writer
        writer.hold()
        try:
            while waiting and waiting[0].done:
                answer = waiting.popleft()
                self._in_flight_bytes -= answer.size
                response = answer.response
                if answer.failed is not None:
                    response = self._failed_durable_response(answer)
                    self._count_partition_error(answer)
                self._answered_at_once(PRODUCE, answer.size, response, answer.received)
        finally:
            writer.release()
        if self._durable_timer is not None:
            self._durable_timer.cancel()
            self._durable_timer = None
        if waiting:
            self._durable_timer = self._loop.call_at(waiting[0].deadline, self._durable_timed_out)
        else:
            self._end_durable_turn()

    def _count_partition_error(self, answer: DurableAnswer) -> None:
        """Count the error of a failed answer as ApiRouter counts a response's partition
        errors on the general path."""
        name = error_name_for(error_code_for(answer.failed))
        self._metrics.partition_errors.labels(PRODUCE_NAME, name).inc()

    def _durable_timed_out(self) -> None:
        """The answer at the head waited its request's timeout_ms for its fsync: it (and those
        behind it whose time is up too) is answered REQUEST_TIMED_OUT, as the general path
        answers."""
        self._durable_timer = None
        now = self._loop.time()
        for answer in self._durable:
            if not answer.done and answer.deadline <= now:
                answer.done = True
                answer.failed = RequestTimedOutError(
                    f"the append to {answer.topic}-{answer.partition_index} was not fsync'ed "
                    f"within timeout_ms={answer.timeout_ms}"
                )
        self._write_durable()
        if self._durable and self._durable_timer is None:
            self._durable_timer = self._loop.call_at(
                self._durable[0].deadline, self._durable_timed_out
            )

    def _end_durable_turn(self) -> None:
        turn = self._durable_turn
        if turn is None:
            return
        self._durable_turn = None
        if self._durable_timer is not None:
            self._durable_timer.cancel()
            self._durable_timer = None
        self._tasks.discard(turn)  # type: ignore[arg-type]
        self._durable_turn_ended(turn)
        if not turn.done():
            turn.set_result(None)
        self._update_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        waiting = self._durable
        for answer in waiting:  # their fsyncs go on; nobody is left to answer
            answer.on_done = None
            self._in_flight_bytes -= answer.size
            self._memory_pool.release(answer.size)
        waiting.clear()
        self._end_durable_turn()
