"""ReplicaManager: the partitions this broker leads and the data paths over them.

Produce, fetch, list-offsets and delete-records land here (Kafka's ``ReplicaManager``).
Small appends run on the event loop (a write to the page cache, cheaper than a hop to a
thread) and large ones on append threads, each partition's in arrival order (see Partition).
Everything else that can wait on the disk runs on a thread: fsyncs (through each partition's
group commit, on the LogFlusher's threads), reads of data not in the page cache, timestamp
lookups and record deletion.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import TypeVar

from odradek.errors import (
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    PolicyViolationError,
    RecordValidationError,
    RequestTimedOutError,
    error_code_for,
)
from odradek.network.page_cache import is_resident
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.values.delete_records import HIGH_WATERMARK_OFFSET
from odradek.protocol.values.fetch import FetchPartition, FetchPartitionResponse
from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.protocol.values.produce import (
    Acks,
    ProducePartitionData,
    ProducePartitionRefusal,
    ProducePartitionResponse,
)
from odradek.record.record_batch import HEADER_SIZE
from odradek.server.delayed_fetch import DelayedFetch, FetchPartitionStatus
from odradek.server.delayed_fetch_purgatory import DelayedFetchPurgatory
from odradek.server.log_flusher import LogFlusher
from odradek.server.log_read_result import LogReadResult
from odradek.server.partition import Partition
from odradek.server.request_context import RequestContext
from odradek.server.transaction import transaction_test_stop
from odradek.server.transaction.transaction_marker import TransactionMarker
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.file_records import TimestampAndOffset
from odradek.storage.log_append_info import LogAppendInfo
from odradek.storage.log_manager import LogManager
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition, validate_topic_name

logger = logging.getLogger(__name__)

T = TypeVar("T")

_FETCH_ISOLATION = {level: FetchIsolation(level.value) for level in IsolationLevel}

# (Members at hand: looking one up on its enum class costs about a call, per request.)
_ACKS_ALL = Acks.ALL
_LOG_END = IsolationLevel.LOG_END

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Topics only the broker writes (clients may read them): Produce to them is refused with
INVALID_TOPIC_EXCEPTION, as Kafka does."""


class ReplicaManager:
    """Leads every partition of the LogManager and serves the record APIs over them."""

    def __init__(
        self,
        log_manager: LogManager,
        append_executor: Executor,
        flusher: LogFlusher,
        io_executor: Executor,
    ) -> None:
        self._log_manager = log_manager
        self._append_executor = append_executor
        self._flusher = flusher
        self._io_executor = io_executor
        self._partitions: dict[tuple[str, int], Partition] = {}
        # The LogManager's serving_changes when the logs of _partitions were last checked
        # to be the ones it serves: while it stands still they are, and a lookup is one get.
        self._checked_serving = log_manager.serving_changes
        self._purgatory = DelayedFetchPurgatory()
        self._shutting_down = False

    def startup(self) -> None:
        """Become the leader of every loaded partition: flush what the last run left unflushed
        and commit it (HW := LEO), as a single replica's leader election does. Blocking."""
        for log in self._log_manager.all_logs():
            if log.recovery_point < log.log_end_offset:
                log.flush()
            log.maybe_increment_high_watermark(log.log_end_offset_metadata)

    def shutdown(self) -> None:
        """Answer every waiting fetch now, and later ones without waiting, so in-flight
        requests can finish."""
        self._shutting_down = True
        self._purgatory.complete_all()

    def partition(self, topic: str, number: int) -> Partition:
        """The partition ``topic-number``; raises INVALID_TOPIC_EXCEPTION,
        UNKNOWN_TOPIC_OR_PARTITION or KAFKA_STORAGE_ERROR."""
        if self._checked_serving != self._log_manager.serving_changes:
            self._forget_unserved_partitions()
        partition = self._partitions.get((topic, number))
        if partition is not None:
            return partition
        tp = TopicPartition(topic, number)
        partition = Partition(
            self._log_manager.get_log(tp),
            self._append_executor,
            self._flusher,
            self._purgatory.check_and_complete,
        )
        self._partitions[(topic, number)] = partition
        return partition

    def _forget_unserved_partitions(self) -> None:
        """Drop the partitions whose log the LogManager no longer serves (deleted, offline,
        or replaced by a new topic of the same name): their next lookup makes them anew from
        what it serves, or raises its error."""
        log_manager = self._log_manager
        self._checked_serving = log_manager.serving_changes  # (read first: later changes show)
        for key, partition in list(self._partitions.items()):
            try:
                served = log_manager.get_log(partition.topic_partition) is partition.log
            except KafkaError:
                served = False
            if not served:
                del self._partitions[key]

    def forget_topic(self, topic: str) -> None:
        """Drop the partitions of a deleted topic."""
        for key in [key for key in self._partitions if key[0] == topic]:
            del self._partitions[key]

    # --- produce -----------------------------------------------------------------------------

    async def append_records(
        self,
        context: RequestContext,
        partitions: Sequence[ProducePartitionData],
        acks: Acks,
        timeout_ms: int,
    ) -> list[ProducePartitionResponse] | None:
        """Append every partition's batches; with acks=all wait until they are durable (at
        most ``timeout_ms``). Each partition's result in the order of ``partitions``; None for
        acks=0, which gets no response.

        Each partition's place in its append queue is taken before the first await, so one
        connection's produce requests are applied in the order they arrived. Small appends
        with none queued ahead are done at once (no await), so a request of only those is
        answered without suspending.
        """
        started = []
        queued = []
        for data in partitions:
            partition, outcome = self._start_append(data, acks)
            if isinstance(outcome, asyncio.Future):
                queued.append(outcome)
            started.append((data, partition, outcome))
        if queued:
            try:
                await asyncio.wait(queued)
            except asyncio.CancelledError:
                for append in queued:  # the appends themselves go on (Partition.append)
                    if not append.cancel() and not append.cancelled():
                        append.exception()  # one done already: read, never "not retrieved"
                raise
        results = []
        responses = []
        for data, partition, outcome in started:
            if isinstance(outcome, asyncio.Future):
                outcome = outcome.exception() or outcome.result()
            result = self._appended(data, partition, outcome, acks, context)
            results.append(result)
            responses.append(result[0])
        if acks is Acks.NONE:
            return None
        if acks is Acks.ALL:
            await self._wait_durable(results, responses, timeout_ms)
        return responses

    def _start_append(
        self, data: ProducePartitionData, acks: Acks
    ) -> tuple[Partition | None, LogAppendInfo | KafkaError | asyncio.Future[LogAppendInfo]]:
        """The partition and its append: done (its info or its Kafka error), or queued."""
        try:
            if data.topic in INTERNAL_TOPICS:
                raise InvalidTopicError(f"cannot append to internal topic {data.topic}")
            partition = self.partition(data.topic, data.partition)
        except KafkaError as error:
            return None, error
        try:
            info = partition.append_now(data.records, acks)
        except KafkaError as error:
            return partition, error
        return partition, info if info is not None else partition.append(data.records, acks)

    def _appended(
        self,
        data: ProducePartitionData,
        partition: Partition | None,
        outcome: LogAppendInfo | BaseException,
        acks: Acks,
        context: RequestContext,
    ) -> tuple[ProducePartitionResponse, asyncio.Future[None] | None]:
        """One partition's response and, for acks=all, the future of its durability."""
        if isinstance(outcome, KafkaError):
            logger.warning(
                "[%s] produce from %s rejected: %s",
                _label(data.topic, data.partition),
                context.peer,
                outcome,
            )
            return _produce_error(data, outcome), None
        if isinstance(outcome, BaseException):
            raise outcome
        response = ProducePartitionResponse(
            data.topic,
            data.partition,
            0,
            None,
            outcome.first_offset,
            outcome.log_append_time_ms,
            outcome.log_start_offset,
        )
        durable = partition.durable(outcome.last_offset) if acks is Acks.ALL else None
        return response, durable

    async def _wait_durable(
        self,
        results: list[tuple[ProducePartitionResponse, asyncio.Future[None] | None]],
        responses: list[ProducePartitionResponse],
        timeout_ms: int,
    ) -> None:
        """Replace each response whose flush failed or did not end in time by its error."""
        waits = [durable for _, durable in results if durable is not None]
        if not waits:
            return
        await asyncio.wait(waits, timeout=timeout_ms / 1000)
        for index, (response, durable) in enumerate(results):
            if durable is None:
                continue
            if not durable.done():
                error: BaseException = RequestTimedOutError(
                    f"the append to {_label(response.topic, response.partition)} was not "
                    f"fsync'ed within timeout_ms={timeout_ms}"
                )
            else:
                error = durable.exception()
                if error is None:
                    continue
            responses[index] = _produce_error(response, error)

    def append_at_once(
        self, topic: str, number: int, records: bytes | memoryview, acks: Acks
    ) -> LogAppendInfo | None:
        """Append ``records`` to ``topic-number`` here and now, for acks 0 or 1, when that is
        cheap and keeps the order (see ``Partition.append_now``) and succeeds: a one-partition
        produce answered without a task, a future or a response object. None when it does not
        (nothing is written then): the request takes ``append_records``, which queues the
        append, or answers its error."""
        if acks is _ACKS_ALL or topic in INTERNAL_TOPICS:
            return None
        try:
            partition = self._partitions.get((topic, number))  # ``partition``, without its call
            if partition is None or self._checked_serving != self._log_manager.serving_changes:
                partition = self.partition(topic, number)
            return partition.append_now(records, acks)
        except KafkaError:
            return None

    # --- transaction markers -----------------------------------------------------------------

    async def write_transaction_markers(
        self, markers: Sequence[TransactionMarker]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Append each marker's COMMIT or ABORT control batch to each of its partitions as the
        transaction coordinator (Kafka's WriteTxnMarkers on the leader), ordered with the
        partition's other appends, and answer once each is durable (acks=all's fsync rule):
        None per partition written, else its error (UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR)."""
        results: dict[TopicPartition, KafkaError | None] = {}
        started = []
        for marker in markers:
            for tp in marker.partitions:
                if started and transaction_test_stop.armed(transaction_test_stop.BETWEEN_MARKERS):
                    await _durable(started)  # a test's crash point: the markers so far on disk
                    transaction_test_stop.stop_at(transaction_test_stop.BETWEEN_MARKERS)
                try:
                    partition = self.partition(tp.topic, tp.partition)
                except KafkaError as error:
                    results[tp] = error
                    continue
                appended = partition.append_end_txn_marker(
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.coordinator_epoch,
                    marker.committed,
                )
                started.append((tp, partition, appended))
        # Every partition's flush is asked for before any is waited for: they run side by
        # side on the flush threads, not one after another. At once: the producer's next
        # transaction waits for these markers, so no request of its comes to share a flush
        # (a linger would only delay them).
        flushes: list[tuple[TopicPartition, asyncio.Future[None]]] = []
        for tp, partition, appended in started:
            try:
                info = await appended
            except KafkaError as error:
                logger.warning("[%s] transaction marker not written: %s", tp, error)
                results[tp] = error
            else:
                flushes.append((tp, partition.durable(info.last_offset, at_once=True)))
        for tp, flushed in flushes:
            try:
                await flushed
            except KafkaError as error:
                logger.warning("[%s] transaction marker not made durable: %s", tp, error)
                results[tp] = error
            else:
                results[tp] = None
        return results

    def append_durably_at_once(
        self, topic: str, number: int, records: bytes | memoryview
    ) -> tuple[Partition, LogAppendInfo] | None:
        """``append_at_once`` at acks=all: the partition and the append's info, the answer
        to wait for ``Partition.when_durable`` (its high watermark moves once fsync'ed); None
        when it is not done (nothing is written then)."""
        if topic in INTERNAL_TOPICS:
            return None
        try:
            partition = self._partitions.get((topic, number))
            if partition is None or self._checked_serving != self._log_manager.serving_changes:
                partition = self.partition(topic, number)
            info = partition.append_now(records, _ACKS_ALL)
        except KafkaError:
            return None
        return None if info is None else (partition, info)

    # --- fetch -------------------------------------------------------------------------------

    async def fetch_messages(
        self,
        context: RequestContext,
        partitions: Sequence[FetchPartition],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation: IsolationLevel,
    ) -> list[FetchPartitionResponse]:
        """Read every partition of ``partitions`` (together at most ``max_bytes``, but at
        least one batch); unless that gives ``min_bytes`` (or an error), wait in the purgatory
        for appends to bring them, at most ``max_wait_ms``, then read again. Each partition's
        result in the order of ``partitions``."""
        fetch_isolation = _FETCH_ISOLATION[isolation]
        results = self._read_available(partitions, max_bytes, fetch_isolation, context, [])
        if len(results) < len(partitions):
            await self._read_rest(partitions, max_bytes, fetch_isolation, context, results)
        if self._must_wait(max_wait_ms, min_bytes, results):
            statuses = [
                FetchPartitionStatus(
                    r.partition, r.info.fetch_offset_metadata, r.request.partition_max_bytes
                )
                for r in results
            ]
            delayed = DelayedFetch(statuses, min_bytes, fetch_isolation)
            await self._purgatory.wait(delayed, max_wait_ms / 1000)
            results = self._read_available(partitions, max_bytes, fetch_isolation, context, [])
            if len(results) < len(partitions):
                await self._read_rest(partitions, max_bytes, fetch_isolation, context, results)
        return [result.to_response() for result in results]

    def nothing_new(
        self, topic: str, number: int, fetch_offset: int, isolation: IsolationLevel
    ) -> tuple[int, int] | None:
        """``(high_watermark, log_start_offset)`` of ``topic-number`` when a read from
        ``fetch_offset`` with ``isolation`` finds nothing there: the offset is the end such a
        read may reach (a consumer polling at the head of its partition). None otherwise, or
        when the partition cannot be read: the fetch then takes ``fetch_messages``, which
        reads, waits or answers the error. What ``fetch_messages`` answers a one-partition
        fetch that may not wait, in a few steps."""
        partition = self._partitions.get((topic, number))  # ``partition``, without its call
        if partition is None or self._checked_serving != self._log_manager.serving_changes:
            try:
                partition = self.partition(topic, number)
            except KafkaError:
                return None
        log = partition.log
        if log.producer_state.unstable:
            return None  # the last stable offset may not be the HW: the general path answers
        high_watermark = log.high_watermark
        log_start_offset = log.log_start_offset
        end = high_watermark if isolation is not _LOG_END else log.log_end_offset
        if fetch_offset != end or fetch_offset < log_start_offset:
            return None
        return high_watermark, log_start_offset

    def _must_wait(self, max_wait_ms: int, min_bytes: int, results: list[LogReadResult]) -> bool:
        if self._shutting_down or max_wait_ms <= 0 or not results:
            return False
        size = 0
        for result in results:
            if result.error is not None:
                return False
            size += result.size
        return size < min_bytes

    def _read_available(
        self,
        entries: Sequence[FetchPartition],
        max_bytes: int,
        isolation: FetchIsolation,
        context: RequestContext,
        results: list[LogReadResult],
    ) -> list[LogReadResult]:
        """Add to ``results`` the reads of ``entries`` from ``len(results)`` on, in order and
        within ``max_bytes``; the first with data returns at least one whole batch even if it
        is larger (so a consumer never gets stuck). Stops before a read that may wait on the
        disk (``_read_rest`` goes on from there). Returns ``results``."""
        remaining = max_bytes
        for result in results:
            remaining = max(0, remaining - result.size)
        for index in range(len(results), len(entries)):
            entry = entries[index]
            limit = min(entry.partition_max_bytes, remaining)
            result = self._read_partition(entry, isolation, limit, remaining == max_bytes)
            if result is None:  # it may wait on the disk
                break
            if result.error is not None:
                _log_read_failure(entry, context, result.error)
            remaining = max(0, remaining - result.size)
            results.append(result)
        return results

    async def _read_rest(
        self,
        entries: Sequence[FetchPartition],
        max_bytes: int,
        isolation: FetchIsolation,
        context: RequestContext,
        results: list[LogReadResult],
    ) -> None:
        """Go on with ``_read_available`` where it stopped: that partition's read in a
        thread, then the others as ``_read_available`` reads them."""
        while len(results) < len(entries):
            entry = entries[len(results)]
            remaining = max_bytes
            for result in results:
                remaining = max(0, remaining - result.size)
            limit = min(entry.partition_max_bytes, remaining)
            result = await self._read_partition_in_thread(
                entry, isolation, limit, remaining == max_bytes
            )
            if result.error is not None:
                _log_read_failure(entry, context, result.error)
            results.append(result)
            self._read_available(entries, max_bytes, isolation, context, results)

    def _read_partition(
        self, entry: FetchPartition, isolation: FetchIsolation, max_bytes: int, min_one: bool
    ) -> LogReadResult | None:
        """Read one partition here and now; None when the read may wait on the disk (then
        ``_read_partition_in_thread`` does it)."""
        partition = None
        try:
            partition = self.partition(entry.topic, entry.partition)
            log = partition.log
            if _may_wait_on_disk(log, entry.fetch_offset):
                return None
            info = log.read(entry.fetch_offset, max_bytes, isolation, min_one)
        except (KafkaError, OSError) as error:
            return _read_failed(entry, partition, error)
        return LogReadResult(entry, partition, info)

    async def _read_partition_in_thread(
        self, entry: FetchPartition, isolation: FetchIsolation, max_bytes: int, min_one: bool
    ) -> LogReadResult:
        partition = None
        try:
            partition = self.partition(entry.topic, entry.partition)
            info = await self._in_thread(
                partition.log.read, entry.fetch_offset, max_bytes, isolation, min_one
            )
        except (KafkaError, OSError) as error:
            return _read_failed(entry, partition, error)
        return LogReadResult(entry, partition, info)

    # --- list offsets, delete records --------------------------------------------------------

    async def list_offsets(
        self, targets: Sequence[tuple[str, int, int]], isolation: FetchIsolation
    ) -> list[TimestampAndOffset | KafkaError | None]:
        """The record at each (topic, partition, target timestamp) of ``targets`` (earliest
        -2, latest -1, or the first at or after a time), as far as ``isolation`` lets a reader
        see; None where no record is that recent, the error where the partition cannot say
        (Kafka's ``fetchOffsetForTimestamp``)."""
        return [await self._list_offset(*target, isolation) for target in targets]

    async def _list_offset(
        self, topic: str, partition: int, target: int, isolation: FetchIsolation
    ) -> TimestampAndOffset | KafkaError | None:
        try:
            log = self.partition(topic, partition).log
            if target in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
                return log.fetch_offset_by_timestamp(target, isolation)
            found = await self._in_thread(log.fetch_offset_by_timestamp, target, isolation)
            if found is not None and isolation is FetchIsolation.HIGH_WATERMARK:
                return found if found.offset < log.high_watermark else None
            if found is not None and isolation is FetchIsolation.TXN_COMMITTED:
                return found if found.offset < log.last_stable_offset else None
            return found
        except KafkaError as error:
            return error
        except OSError as error:
            return _read_error(topic, partition, error)

    async def delete_records(
        self, offsets: Sequence[tuple[str, int, int]]
    ) -> list[int | KafkaError]:
        """Raise the log start offset of each (topic, partition, offset) of ``offsets`` (-1:
        to the high watermark), one after the other: each one's new low watermark, or why
        not (Kafka's ``deleteRecords``)."""
        return [await self._delete_records(*entry) for entry in offsets]

    async def _delete_records(self, topic: str, partition: int, offset: int) -> int | KafkaError:
        try:
            log = self.partition(topic, partition).log
            if not log.config.delete:  # Kafka's Partition.deleteRecordsOnLeader, before all else
                raise PolicyViolationError(
                    f"records of {log.topic_partition} cannot be deleted: its cleanup.policy "
                    f"is {','.join(log.config.cleanup_policy)}, without delete"
                )
            offset = log.high_watermark if offset == HIGH_WATERMARK_OFFSET else offset
            return await self._in_thread(log.delete_records, offset)
        except KafkaError as error:
            return error

    async def _in_thread(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` on the I/O threads: work that may wait on the disk."""
        return await asyncio.get_running_loop().run_in_executor(self._io_executor, function, *args)


def _produce_error(
    data: ProducePartitionData | ProducePartitionResponse, error: BaseException
) -> ProducePartitionResponse:
    message = error.message if isinstance(error, KafkaError) else str(error)
    if isinstance(error, RecordValidationError) and error.record_errors:
        return ProducePartitionRefusal(
            data.topic, data.partition, error.code, message, record_errors=error.record_errors
        )
    return ProducePartitionResponse(data.topic, data.partition, error_code_for(error), message)


async def _durable(
    started: list[tuple[TopicPartition, Partition, asyncio.Future[LogAppendInfo]]],
) -> None:
    """Wait until the markers ``started`` are appended and fsync'ed (their errors are the
    caller's to report)."""
    for _, partition, appended in started:
        try:
            await partition.durable((await asyncio.shield(appended)).last_offset)
        except KafkaError:
            pass


def _read_failed(
    entry: FetchPartition, partition: Partition | None, error: KafkaError | OSError
) -> LogReadResult:
    if isinstance(error, OSError):
        error = _read_error(entry.topic, entry.partition, error)
    return LogReadResult(entry, partition, error=error)


def _log_read_failure(entry: FetchPartition, context: RequestContext, error: KafkaError) -> None:
    logger.info(
        "[%s] fetch at offset %d from %s failed: %s",
        _label(entry.topic, entry.partition),
        entry.fetch_offset,
        context.peer,
        error,
    )


def _read_error(topic: str, partition: int, error: OSError) -> KafkaStorageError:
    """A read that failed on a file (no descriptor to open it with, a segment deleted under
    it) as the partition's retriable error; the log directory stays online: a failing disk
    shows itself to the writes and flushes, which report it."""
    return KafkaStorageError(
        f"reading {_label(topic, partition)} failed: {error.strerror or error} "
        f"(errno {error.errno}); retry later"
    )


def _may_wait_on_disk(log: UnifiedLog, offset: int) -> bool:
    """Whether a read from ``offset`` may wait on the disk: it starts in an older segment (the
    data likely to be cold), or the pages its offset lookup scans are not in the page cache
    (the active segment of a log not written since the broker started, or evicted). A read
    from the log end on reads nothing: a consumer polling for new records never waits."""
    if offset >= log.log_end_offset:
        return False
    segment = log.segments.floor_segment(offset)
    if segment is None:
        return False  # below the log start: refused without reading
    if segment.base_offset != log.active_segment.base_offset:
        return True
    bound = log.last_read_bound
    if bound.message_offset == offset and bound.segment_base_offset == segment.base_offset:
        # The read starts there with one header read (UnifiedLog.read): only that header counts.
        return not is_resident(segment.log.fd, bound.relative_position_in_segment, HEADER_SIZE)
    position = segment.offset_index.lookup(offset).position
    return not is_resident(segment.log.fd, position, segment.index_interval_bytes + HEADER_SIZE)


def _label(topic: str, partition: int) -> str:
    """``topic-partition`` for a log line; a topic that is no legal name is shown quoted."""
    try:
        validate_topic_name(topic)
    except KafkaError:
        return f"{topic!r}-{partition}"
    return f"{topic}-{partition}"
