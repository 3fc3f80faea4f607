"""Fetching for the consumer: one Fetch request in flight, its results buffered per partition."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque

from odradek.client.completed_fetch import CompletedFetch
from odradek.client.config import ConsumerConfig
from odradek.client.consumer_record import ConsumerRecord
from odradek.client.network_client import NetworkClient, retry_log_level
from odradek.client.subscription_state import RESET_TIMESTAMPS, SubscriptionState
from odradek.errors import KafkaError, OffsetOutOfRangeError, error_for_code
from odradek.protocol.fetch import FetchRequest, FetchResponse
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.values.fetch import FetchPartition
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class Fetcher:
    """Fetches the assigned partitions that have a position, one Fetch in flight at a time.

    The next fetch is written as soon as a response has been read, in the same step, before
    the caller has taken its records: a partition with one response buffered is fetched on
    from where that response ends. So the broker nearly always holds a long poll of the
    consumer, and a record appended just after a response left is not held up until the
    caller polls again and the loop gets round to sending the next fetch. At most two
    responses a partition are buffered: a partition with two is fetched again once the caller
    has drained one. Buffered data is dropped when its partition was sought or unassigned
    meanwhile.

    Buffered records may also be taken from another thread (:meth:`try_fetched_records`, for
    the blocking consumer), without a round trip through the event loop: a lock guards the
    buffer, and a threading.Event, set with each response, wakes such a caller.
    """

    def __init__(
        self, client: NetworkClient, subscriptions: SubscriptionState, config: ConsumerConfig
    ) -> None:
        self._client = client
        self._subscriptions = subscriptions
        self._config = config
        self._isolation = config.fetch_isolation()
        self._read_committed = self._isolation is IsolationLevel.TXN_COMMITTED
        self._retry_backoff_s = config.retry_backoff_ms / 1000
        self._completed: deque[CompletedFetch] = deque()
        self._task: asyncio.Task[None] | None = None
        self._failure: KafkaError | None = None
        self._backoff_until = 0.0
        self._closed = False
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()  # the buffer, _failure and _fetching, across threads
        self._fetching = False  # a fetch task runs and will look for fetchable partitions again
        self._arrived = asyncio.Event()  # set when a response is buffered or fetching stops
        self._arrived_threadsafe = threading.Event()  # the same, for callers on other threads

    def send_fetch(self) -> None:
        """Start fetching unless a fetch is in flight, a retry backoff runs, nothing is
        fetchable, or the fetcher is closed (a poll interrupted by Ctrl-C may still run)."""
        with self._lock:
            if self._closed or self._fetching:
                return
            positions = self._fetchable()
            if not positions:
                return
            self._fetching = True
        self._task = asyncio.create_task(self._fetch_while_fetchable(positions))

    async def wait_for_data(self, timeout_s: float) -> None:
        """Return when data is buffered, fetching stops, a backoff ends, or on timeout."""
        if self._completed:
            return
        if self._fetching:
            self._arrived.clear()
            try:
                async with asyncio.timeout(timeout_s):
                    await self._arrived.wait()
            except TimeoutError:
                pass
            return
        backoff_left = self._backoff_until - asyncio.get_running_loop().time()
        pause = backoff_left if backoff_left > 0 else self._retry_backoff_s
        await asyncio.sleep(min(timeout_s, pause))

    def fetched_records(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` buffered records, advancing the positions past them.

        Raises the errors found: a failed fetch request, OFFSET_OUT_OF_RANGE when
        ``auto_offset_reset`` is ``none``, a corrupt batch, any non-retriable partition error.
        An error found after some records were collected is raised by the next call, so
        records whose positions have moved on are never lost.
        """
        with self._lock:
            return self._fetched_records(max_records)

    def try_fetched_records(self, max_records: int) -> list[ConsumerRecord] | None:
        """What :meth:`fetched_records` returns, taken on the caller's thread (any thread);
        [] when nothing is buffered yet but a fetch is in flight (wait with
        :meth:`wait_for_data_threadsafe`); None when only the event loop can go on (nothing
        buffered or in flight, or data that gave no records while fetching has stopped: a
        fetch to start, a backoff to wait out)."""
        self._arrived_threadsafe.clear()  # before looking: a response after this sets it
        with self._lock:
            if not self._completed and self._failure is None and not self._fetching:
                return None
            records = self._fetched_records(max_records)
            fetching = self._fetching
        if not fetching:
            if not records:
                return None
            self._loop.call_soon_threadsafe(self.send_fetch)  # fetch on past what was taken
        return records

    def wait_for_data_threadsafe(self, timeout_s: float) -> None:
        """Block (off the event loop) until a response is buffered, fetching stops, or
        ``timeout_s`` passes, after a :meth:`try_fetched_records` that gave []."""
        self._arrived_threadsafe.wait(timeout_s)

    def _fetched_records(self, max_records: int) -> list[ConsumerRecord]:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        records: list[ConsumerRecord] = []
        while self._completed and len(records) < max_records:
            try:
                records += self._take(self._completed[0], max_records - len(records))
            except KafkaError as error:
                if not records:
                    raise
                self._failure = error
                break
        return records

    def _take(self, fetch: CompletedFetch, wanted: int) -> list[ConsumerRecord]:
        """Up to ``wanted`` records of the first buffered fetch, dropping it once used up."""
        if not self._is_current(fetch):
            self._completed.popleft()
            return []
        if fetch.response.error:
            self._completed.popleft()
            self._handle_error(fetch)
            return []
        try:
            taken = fetch.take(wanted)
        except KafkaError:
            self._completed.popleft()
            raise
        finally:
            self._subscriptions.seek(fetch.topic_partition, fetch.next_offset)
        if len(taken) < wanted:
            self._completed.popleft()
        return taken

    async def close(self) -> None:
        with self._lock:
            self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        with self._lock:
            self._completed.clear()

    def _is_current(self, fetch: CompletedFetch) -> bool:
        """Whether the partition is still assigned and still positioned where the data goes on."""
        tp = fetch.topic_partition
        return (
            self._subscriptions.is_assigned(tp)
            and self._subscriptions.position(tp) == fetch.next_offset
        )

    def _handle_error(self, fetch: CompletedFetch) -> None:
        tp = fetch.topic_partition
        error = error_for_code(fetch.response.error, fetch.response.message or "")
        if isinstance(error, OffsetOutOfRangeError):
            reset = RESET_TIMESTAMPS.get(self._config.auto_offset_reset)
            if reset is None:
                raise OffsetOutOfRangeError(
                    error.message or f"offset {fetch.fetch_offset} of {tp} is out of range"
                )
            logger.info(
                "%s: offset %d out of range, resetting to %s",
                tp,
                fetch.fetch_offset,
                self._config.auto_offset_reset,
            )
            self._subscriptions.request_reset(tp, reset)
        elif error.retriable:
            logger.log(retry_log_level(error), "fetching %s failed, will retry: %s", tp, error)
        else:
            raise error

    def _fetchable(self) -> dict[TopicPartition, int]:
        """Where to fetch each partition that may be fetched now: at its position when
        nothing of it is buffered, at the end of its one buffered response when that can be
        read on; not with two responses buffered, nor during a retry backoff."""
        if self._failure is not None:
            return {}
        if asyncio.get_running_loop().time() < self._backoff_until:
            return {}
        positions = self._subscriptions.fetch_positions()
        chains: dict[TopicPartition, list[CompletedFetch]] = {}
        for fetch in self._completed:
            if fetch.topic_partition in positions:
                chains.setdefault(fetch.topic_partition, []).append(fetch)
        fetchable = {}
        for tp, position in positions.items():
            offset: int | None = position
            buffered = 0
            for fetch in chains.get(tp, ()):
                if offset is None or fetch.next_offset != offset:
                    continue  # sought away from: it is dropped when reached
                offset = fetch.end_offset()
                buffered += 1
            if offset is not None and buffered < 2:
                fetchable[tp] = offset
        return fetchable

    async def _fetch_while_fetchable(self, positions: dict[TopicPartition, int]) -> None:
        """Fetch, and fetch on at once from where each response ends, while anything is
        fetchable; the poll waiting is woken by each response and when this stops."""
        try:
            while True:
                if await self._fetch(positions):
                    self._wake_pollers()
                with self._lock:
                    positions = {} if self._closed else self._fetchable()
                    if not positions:
                        self._fetching = False  # decided with the lock: see try_fetched_records
                        return
        except BaseException:
            with self._lock:
                self._fetching = False
            raise
        finally:
            self._wake_pollers()

    def _wake_pollers(self) -> None:
        self._arrived.set()
        # A poller on another thread is woken once this step is over, when the next fetch is
        # written: woken sooner, it would only wake again when this thread lets go of the GIL.
        self._loop.call_soon(self._arrived_threadsafe.set)

    async def _fetch(self, positions: dict[TopicPartition, int]) -> bool:
        """One Fetch of ``positions``; whether a response was buffered."""
        config = self._config
        request = FetchRequest(
            tuple(
                FetchPartition(tp.topic, tp.partition, offset, config.max_partition_fetch_bytes)
                for tp, offset in positions.items()
            ),
            config.fetch_max_wait_ms,
            config.fetch_min_bytes,
            config.fetch_max_bytes,
            self._isolation,
        )
        timeout_ms = config.request_timeout_ms + config.fetch_max_wait_ms
        try:
            response: FetchResponse = await self._client.send(request, timeout_ms)
        except KafkaError as error:
            if self._closed:
                return False  # the consumer is closing: nothing to retry or report
            if not error.retriable:
                with self._lock:
                    self._failure = error
                return False
            logger.log(retry_log_level(error), "fetch failed, will retry: %s", error)
            self._back_off()
            return False
        completed = []
        for entry in response.partitions:
            tp = TopicPartition(entry.topic, entry.partition)
            offset = positions.get(tp)
            if offset is not None:
                completed.append(
                    CompletedFetch(tp, offset, entry, config.check_crcs, self._read_committed)
                )
                if entry.error not in (0, OffsetOutOfRangeError.code):
                    self._back_off()
        with self._lock:
            self._completed.extend(completed)
        return True

    def _back_off(self) -> None:
        """Send no fetch for ``retry_backoff_ms``, so a failing broker is not hammered."""
        self._backoff_until = asyncio.get_running_loop().time() + self._retry_backoff_s
