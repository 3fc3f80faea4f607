"""ConsumerCoordinator: a consumer's membership of its group (Kafka's ``ConsumerCoordinator``).

It joins the group, runs the assignor when it is the leader, takes its assignment from
SyncGroup, heartbeats in the background, and commits and fetches offsets. The protocol is
Kafka's eager one: all partitions are revoked before a rejoin, so no partition is owned by two
members of one generation.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.client.config import ConsumerConfig
from odradek.client.consumer_rebalance_listener import ConsumerRebalanceListener
from odradek.client.network_client import NetworkClient, retry_log_level
from odradek.client.partition_assignor import ASSIGNORS
from odradek.client.subscription_state import SubscriptionState
from odradek.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    KafkaError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    error_for_code,
)
from odradek.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Subscription,
    assignment_of,
    parse_assignment,
    parse_subscription,
)
from odradek.protocol.find_coordinator import FindCoordinatorRequest
from odradek.protocol.heartbeat import HeartbeatRequest
from odradek.protocol.join_group import JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse
from odradek.protocol.leave_group import LeaveGroupRequest, LeavingMember
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.offset_commit import OffsetCommitPartition, OffsetCommitRequest
from odradek.protocol.offset_fetch import GroupPartition, OffsetFetchGroup, OffsetFetchRequest
from odradek.protocol.sync_group import SyncGroupAssignment, SyncGroupRequest
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

NO_GENERATION = -1
REJOIN_ERRORS = (RebalanceInProgressError, IllegalGenerationError, UnknownMemberIdError)


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """Where a consumer stands in its group (generation -1: not a member now)."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


class ConsumerCoordinator:
    """Group membership for an AsyncConsumer; everything runs on its event loop."""

    def __init__(
        self,
        client: NetworkClient,
        config: ConsumerConfig,
        subscriptions: SubscriptionState,
    ) -> None:
        assert config.group_id is not None
        self.group_id = config.group_id
        self._client = client
        self._config = config
        self._subscriptions = subscriptions
        self.generation_id = NO_GENERATION
        self.member_id = ""
        self.protocol_name: str | None = None
        self._rejoin_needed = True
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._join_task: asyncio.Task[None] | None = None
        self._listener: ConsumerRebalanceListener = ConsumerRebalanceListener()
        self._topics: tuple[str, ...] = ()
        self._pattern: re.Pattern[str] | None = None
        self._metadata_checked = 0.0
        self._next_auto_commit = 0.0
        self._pending_commits: set[asyncio.Task[Any]] = set()
        self._found_coordinator = False

    # --- subscription ------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | None,
        pattern: re.Pattern[str] | None,
        listener: ConsumerRebalanceListener | None,
    ) -> None:
        self._topics = tuple(sorted(set(topics or ())))
        self._pattern = pattern
        self._listener = listener or ConsumerRebalanceListener()
        self._metadata_checked = 0.0
        self._rejoin_needed = True

    @property
    def subscribed_topics(self) -> tuple[str, ...]:
        return self._topics

    @property
    def is_subscribed(self) -> bool:
        return bool(self._topics) or self._pattern is not None

    async def _refresh_pattern(self) -> None:
        """Match the pattern against the broker's topics; a changed set means a rejoin."""
        loop = asyncio.get_running_loop()
        if self._pattern is None:
            return
        if loop.time() - self._metadata_checked < self._config.metadata_max_age_ms / 1000:
            return
        self._metadata_checked = loop.time()
        try:
            response = await self._client.send(MetadataRequest(None, False))
        except KafkaError as error:
            if not error.retriable:
                raise
            logger.log(
                retry_log_level(error), "group %s: listing topics failed: %s", self.group_id, error
            )
            return
        matched = tuple(
            sorted(
                t.name
                for t in response.topics
                if self._pattern.fullmatch(t.name) and not t.name.startswith("__")
            )
        )
        if matched != self._topics:
            logger.info("group %s: the pattern now matches %s", self.group_id, matched)
            self._topics = matched
            self._rejoin_needed = True

    # --- the poll loop -----------------------------------------------------------------------

    async def poll(self, timeout_s: float) -> bool:
        """Called by every consumer poll: rejoin when needed (waiting at most ``timeout_s``;
        the join goes on in the background meanwhile), auto-commit when due. Whether the
        consumer is a member with an assignment now."""
        await self._refresh_pattern()
        if self._join_task is None and (self._rejoin_needed or self.generation_id == NO_GENERATION):
            self._join_task = asyncio.get_running_loop().create_task(self._join_and_sync())
        if self._join_task is not None:
            await asyncio.wait({self._join_task}, timeout=max(timeout_s, 0))
            if not self._join_task.done():
                return False
            task, self._join_task = self._join_task, None
            task.result()  # raises what ended the join (a fenced instance, a closed client)
        self._maybe_auto_commit()
        return True

    def _maybe_auto_commit(self) -> None:
        if not self._config.enable_auto_commit:
            return
        now = asyncio.get_running_loop().time()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self._config.auto_commit_interval_ms / 1000
        offsets = self._subscriptions.fetch_positions()
        if offsets:
            task = asyncio.get_running_loop().create_task(self._auto_commit(offsets))
            self._pending_commits.add(task)
            task.add_done_callback(self._pending_commits.discard)

    async def _auto_commit(self, offsets: dict[TopicPartition, int]) -> None:
        try:
            await self.commit(offsets)
        except KafkaError as error:
            logger.log(
                retry_log_level(error), "group %s: auto-commit failed: %s", self.group_id, error
            )

    # --- join --------------------------------------------------------------------------------

    async def _join_and_sync(self) -> None:
        """Revoke, join, sync, then position the new partitions at their committed offsets;
        retriable failures (the broker restarting, a lost connection) are retried."""
        self._start_heartbeat()  # it stays quiet until the join gives a generation
        await self._revoke_all()
        while True:
            try:
                await self._find_coordinator()
                joined = await self._join()
                assignment = await self._sync(joined)
            except MemberIdRequiredError:
                continue
            except REJOIN_ERRORS as error:
                if isinstance(error, UnknownMemberIdError | IllegalGenerationError):
                    self.member_id = ""
                    self.generation_id = NO_GENERATION
                logger.info("group %s: rejoining: %s", self.group_id, error)
                await asyncio.sleep(self._config.retry_backoff_ms / 1000)
                continue
            except KafkaError as error:
                if not error.retriable:
                    raise
                logger.log(
                    min(retry_log_level(error), logging.INFO),
                    "group %s: joining failed, retrying: %s",
                    self.group_id,
                    error,
                )
                await asyncio.sleep(self._config.retry_backoff_ms / 1000)
                continue
            break
        self._rejoin_needed = False
        partitions = set(assignment)
        self._subscriptions.assign(sorted(partitions))
        await self._seek_to_committed(partitions)
        logger.info(
            "group %s: member %s of generation %d is assigned %s",
            self.group_id,
            self.member_id,
            self.generation_id,
            sorted(map(str, partitions)),
        )
        await _invoke(self._listener.on_partitions_assigned, set(partitions))
        self._next_auto_commit = (
            asyncio.get_running_loop().time() + self._config.auto_commit_interval_ms / 1000
        )

    async def _revoke_all(self) -> None:
        """Before a rejoin (eager protocol): commit what was consumed, tell the listener, drop
        the assignment."""
        revoked = self._subscriptions.assignment
        if self.generation_id != NO_GENERATION and revoked:
            if self._config.enable_auto_commit:
                try:
                    await self.commit(self._subscriptions.fetch_positions())
                except KafkaError as error:
                    logger.warning(
                        "group %s: commit before the rebalance failed: %s", self.group_id, error
                    )
            await _invoke(self._listener.on_partitions_revoked, set(revoked))
        self._subscriptions.assign([])

    async def _find_coordinator(self) -> None:
        while not self._found_coordinator:
            response = await self._client.send(FindCoordinatorRequest((self.group_id,)))
            entry = response.coordinators[0]
            if entry.error == 0:
                self._found_coordinator = True
                return
            error = self._group_error(entry.error, entry.message)
            if not error.retriable:
                raise error  # refused the group: the application must hear it, as in Kafka
            logger.info("group %s: no coordinator yet: %s", self.group_id, entry.message)
            await asyncio.sleep(self._config.retry_backoff_ms / 1000)

    def _group_error(self, code: int, message: str | None) -> KafkaError:
        """The error a group request's answer carries; a refused group with Kafka's
        clients' message (GroupAuthorizationException)."""
        if code == GroupAuthorizationFailedError.code:
            return GroupAuthorizationFailedError(f"Not authorized to access group: {self.group_id}")
        return error_for_code(code, message or "")

    async def _join(self) -> JoinGroupResponse:
        metadata = Subscription(self._topics).to_bytes()
        request = JoinGroupRequest(
            self.group_id,
            self._config.session_timeout_ms,
            CONSUMER_PROTOCOL_TYPE,
            tuple(JoinGroupProtocol(name, metadata) for name in self._config.assignors()),
            self._config.max_poll_interval_ms,
            self.member_id,
            self._config.group_instance_id,
        )
        timeout_ms = self._config.max_poll_interval_ms + self._config.request_timeout_ms
        response: JoinGroupResponse = await self._client.send(request, timeout_ms)
        if response.error_code == MemberIdRequiredError.code:
            self.member_id = response.member_id
            raise MemberIdRequiredError(response.error_message or "")
        if response.error_code:
            raise error_for_code(response.error_code, response.error_message or "")
        self.member_id = response.member_id
        self.generation_id = response.generation_id
        self.protocol_name = response.protocol_name
        return response

    async def _sync(self, joined: JoinGroupResponse) -> list[TopicPartition]:
        assignments: tuple[SyncGroupAssignment, ...] = ()
        if joined.leader == joined.member_id and joined.members:
            assignments = await self._assign(joined)
        request = SyncGroupRequest(
            self.group_id,
            joined.generation_id,
            self.member_id,
            self._config.group_instance_id,
            CONSUMER_PROTOCOL_TYPE,
            joined.protocol_name,
            assignments,
        )
        timeout_ms = self._config.max_poll_interval_ms + self._config.request_timeout_ms
        response = await self._client.send(request, timeout_ms)
        if response.error_code:
            raise self._group_error(response.error_code, response.error_message)
        assignment = parse_assignment(response.assignment)
        return [
            TopicPartition(topic, number)
            for topic, numbers in assignment.partitions.items()
            for number in numbers
        ]

    async def _assign(self, joined: JoinGroupResponse) -> tuple[SyncGroupAssignment, ...]:
        """The leader's work: every member's subscription, the topics' partition counts, the
        protocol's assignor."""
        subscriptions = {m.member_id: parse_subscription(m.metadata).topics for m in joined.members}
        topics = sorted({t for topics in subscriptions.values() for t in topics})
        response = await self._client.send(MetadataRequest(tuple(topics), False))
        counts = {t.name: len(t.partitions) for t in response.topics if t.error == 0}
        assignor = ASSIGNORS[joined.protocol_name or "range"]
        assigned = assignor(subscriptions, counts)
        return tuple(
            SyncGroupAssignment(
                member,
                assignment_of([(tp.topic, tp.partition) for tp in partitions]).to_bytes(),
            )
            for member, partitions in assigned.items()
        )

    async def _seek_to_committed(self, partitions: set[TopicPartition]) -> None:
        while True:
            try:
                committed = await self.committed(partitions)
            except KafkaError as error:
                if not error.retriable:
                    raise
                logger.log(
                    min(retry_log_level(error), logging.INFO),
                    "group %s: fetching offsets failed, retrying: %s",
                    self.group_id,
                    error,
                )
                await asyncio.sleep(self._config.retry_backoff_ms / 1000)
                continue
            break
        for tp, offset in committed.items():
            if offset is not None and offset >= 0:
                self._subscriptions.seek(tp, offset)

    # --- heartbeat ---------------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        interval = self._config.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if self.generation_id == NO_GENERATION:
                continue
            request = HeartbeatRequest(
                self.group_id, self.generation_id, self.member_id, self._config.group_instance_id
            )
            try:
                response = await self._client.send(request)
            except KafkaError as error:
                logger.log(
                    retry_log_level(error), "group %s: heartbeat failed: %s", self.group_id, error
                )
                continue
            if response.error_code == 0 or request.generation_id != self.generation_id:
                continue  # fine, or about a generation this member has already left
            error = error_for_code(response.error_code, response.error_message or "")
            if isinstance(error, FencedInstanceIdError):
                logger.error("group %s: fenced: %s", self.group_id, error)
            logger.info("group %s: heartbeat says rejoin: %s", self.group_id, error)
            if isinstance(error, UnknownMemberIdError | IllegalGenerationError):
                self.generation_id = NO_GENERATION
                if isinstance(error, UnknownMemberIdError):
                    self.member_id = ""
            self._rejoin_needed = True

    # --- offsets -----------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (the next offsets to read) for the group; returns once durable.

        Raises CommitFailedError when the group rebalanced meanwhile.
        """
        if not offsets:
            return
        managed = self.generation_id != NO_GENERATION
        request = OffsetCommitRequest(
            self.group_id,
            tuple(OffsetCommitPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()),
            self.generation_id if managed else -1,
            self.member_id if managed else "",
            self._config.group_instance_id if managed else None,
        )
        response = await self._client.send(request)
        for entry in response.partitions:
            if not entry.error:
                continue
            error = error_for_code(entry.error, entry.message or "")
            if isinstance(error, REJOIN_ERRORS):
                self._rejoin_needed = True
                raise CommitFailedError(
                    f"commit of {entry.topic}-{entry.partition} refused: {error}"
                )
            raise error

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where it has none)."""
        wanted = tuple(GroupPartition(tp.topic, tp.partition) for tp in partitions)
        if not wanted:
            return {}
        response = await self._client.send(
            OffsetFetchRequest((OffsetFetchGroup(self.group_id, wanted),))
        )
        group = response.groups[0]
        if group.error:
            raise self._group_error(group.error, group.message)
        return {
            TopicPartition(p.topic, p.partition): (
                p.committed_offset if p.committed_offset >= 0 else None
            )
            for p in group.partitions
        }

    async def close(self) -> None:
        """Commit (with auto-commit), leave the group, stop heartbeating."""
        if self._join_task is not None:
            self._join_task.cancel()
            await asyncio.gather(self._join_task, return_exceptions=True)
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            await asyncio.gather(self._heartbeat_task, return_exceptions=True)
        if self._pending_commits:
            await asyncio.gather(*self._pending_commits, return_exceptions=True)
        if self.generation_id == NO_GENERATION:
            return
        if self._config.enable_auto_commit:
            try:
                await self.commit(self._subscriptions.fetch_positions())
            except KafkaError as error:
                logger.warning("group %s: the last commit failed: %s", self.group_id, error)
        if self._config.group_instance_id is not None:
            return  # a static member keeps its place until its session ends
        try:
            await self._client.send(
                LeaveGroupRequest(self.group_id, (LeavingMember(self.member_id),))
            )
        except KafkaError as error:
            logger.warning("group %s: leaving failed: %s", self.group_id, error)
        self.generation_id = NO_GENERATION


async def _invoke(
    callback: Callable[[set[TopicPartition]], object], partitions: set[TopicPartition]
) -> None:
    """Call a listener method; await it if it is a coroutine."""
    result = callback(partitions)
    if inspect.isawaitable(result):
        await result
