"""Admin clients: AsyncAdmin (the asyncio core) and Admin (its blocking twin).

Each call is one request. When a request covers several topics or partitions, the outcome of
each is checked in request order and the first error is raised (as Kafka's ``all().get()``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from odradek.client.blocking_client import BlockingClient
from odradek.client.config import ClientConfig
from odradek.client.event_loop_thread import shared_event_loop_thread
from odradek.client.network_client import NetworkClient
from odradek.client.offset_lookup import OffsetAndTimestamp, list_offsets
from odradek.client.transaction_description import (
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from odradek.errors import error_for_code
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.configs import (
    AlterableTopicConfigs,
    AlterConfigsRequest,
    ConfigEntry,
    DescribeConfigsRequest,
)
from odradek.protocol.delete_groups import DeleteGroupsRequest
from odradek.protocol.delete_records import DeleteRecordsPartition, DeleteRecordsRequest
from odradek.protocol.describe_groups import DescribedGroupEntry, DescribeGroupsRequest
from odradek.protocol.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    TopicDescription,
)
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.kafka_data import kafka_data_request
from odradek.protocol.list_groups import ListedGroup, ListGroupsRequest
from odradek.protocol.metadata import MetadataRequest, MetadataResponse
from odradek.protocol.offset_commit import OffsetCommitPartition, OffsetCommitRequest
from odradek.protocol.offset_fetch import OffsetFetchGroup, OffsetFetchRequest
from odradek.protocol.topics import (
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from odradek.topic_partition import TopicPartition


@dataclass(frozen=True)
class NewTopic:
    """A topic to create, with topic-level config overrides (``retention.ms`` ...) as strings.

    ``num_partitions`` -1 takes the broker's ``num.partitions``.
    """

    name: str
    num_partitions: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


def _present(value: int) -> int | None:
    """A Kafka response's optional number: None where it says -1 (absent)."""
    return value if value >= 0 else None


def _raise_first_error(entries: Iterable[Any]) -> None:
    """Raise the error of the first entry (topic or partition outcome) that has one."""
    for entry in entries:
        if entry.error:
            raise error_for_code(entry.error, entry.message or "")


class AsyncAdmin:
    """Manages topics, configs and records. Takes the common client settings (ClientConfig)."""

    def __init__(self, **configs: Any) -> None:
        self.config = ClientConfig(**configs)
        self._client = NetworkClient(self.config)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False) -> None:
        """Create ``topics``; with ``validate_only`` just check that they could be created."""
        request = CreateTopicsRequest(
            tuple(CreatableTopic(t.name, t.num_partitions, dict(t.configs)) for t in topics),
            validate_only,
            self.config.request_timeout_ms,
        )
        _raise_first_error((await self._client.send(request)).topics)

    async def create_partitions(
        self, total_counts: Mapping[str, int], validate_only: bool = False
    ) -> None:
        """Grow each topic to its total partition count (Kafka's ``createPartitions``)."""
        request = CreatePartitionsRequest(
            tuple(CreatePartitionsTopic(name, count) for name, count in total_counts.items()),
            validate_only,
            self.config.request_timeout_ms,
        )
        _raise_first_error((await self._client.send(request)).topics)

    async def delete_topics(self, names: Iterable[str]) -> None:
        response = await self._client.send(DeleteTopicsRequest(tuple(names)))
        _raise_first_error(response.topics)

    async def list_topics(self) -> list[str]:
        """The names of every topic, sorted."""
        response = await self.metadata()
        return sorted(topic.name for topic in response.topics)

    async def metadata(
        self, topics: Iterable[str] | None = None, allow_auto_topic_creation: bool = False
    ) -> MetadataResponse:
        """The broker, the cluster id, and ``topics`` (default: all) as the broker sees them."""
        names = None if topics is None else tuple(topics)
        return await self._client.send(MetadataRequest(names, allow_auto_topic_creation))

    async def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        """Per topic (default: all): each partition's offsets, size and log dir, and configs."""
        request = DescribeTopicPartitionsRequest(None if names is None else tuple(names))
        response = await self._client.send(request)
        _raise_first_error(response.topics)
        for topic in response.topics:
            _raise_first_error(topic.partitions)
        return list(response.topics)

    async def describe_configs(self, topics: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
        """Every topic-level config of each topic, by name, with value and source."""
        response = await self._client.send(DescribeConfigsRequest(tuple(topics)))
        _raise_first_error(response.topics)
        return {t.name: {entry.name: entry for entry in t.entries} for t in response.topics}

    async def alter_configs(
        self, configs: Mapping[str, Mapping[str, str | None]], validate_only: bool = False
    ) -> None:
        """Set topic config overrides, ``{topic: {name: value}}``; a None value removes one.

        Overrides not named are left as they are (incremental, as IncrementalAlterConfigs).
        """
        request = AlterConfigsRequest(
            tuple(AlterableTopicConfigs(name, dict(values)) for name, values in configs.items()),
            validate_only,
        )
        _raise_first_error((await self._client.send(request)).topics)

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Delete records below each offset; the new log start offsets.

        Offset -1 (``protocol.values.delete_records.HIGH_WATERMARK_OFFSET``) deletes everything
        below the high watermark.
        """
        request = DeleteRecordsRequest(
            tuple(DeleteRecordsPartition(tp.topic, tp.partition, o) for tp, o in offsets.items())
        )
        response = await self._client.send(request)
        _raise_first_error(response.partitions)
        return {TopicPartition(p.topic, p.partition): p.low_watermark for p in response.partitions}

    async def list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
        isolation: IsolationLevel = IsolationLevel.HIGH_WATERMARK,
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by timestamp, or EARLIEST_TIMESTAMP/LATEST_TIMESTAMP (offset -1: none)."""
        return await list_offsets(self._client, timestamps, isolation)

    # --- consumer groups ---------------------------------------------------------------------

    async def list_consumer_groups(self, states: Iterable[str] = ()) -> list[ListedGroup]:
        """Every group (only those in ``states`` when given: Stable, Empty, ...)."""
        response = await self._client.send(ListGroupsRequest(tuple(states)))
        if response.error_code:
            raise error_for_code(response.error_code, response.error_message or "")
        return list(response.groups)

    async def describe_consumer_groups(self, groups: Iterable[str]) -> list[DescribedGroupEntry]:
        """State, protocol and members (with their assignments) of each group; an unknown
        group comes back in state Dead."""
        response = await self._client.send(DescribeGroupsRequest(tuple(groups)))
        _raise_first_error(response.groups)
        return list(response.groups)

    async def delete_consumer_groups(self, groups: Iterable[str]) -> None:
        """Delete empty groups and their committed offsets."""
        response = await self._client.send(DeleteGroupsRequest(tuple(groups)))
        _raise_first_error(response.results)

    async def list_consumer_group_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of ``group``."""
        response = await self._client.send(OffsetFetchRequest((OffsetFetchGroup(group),)))
        _raise_first_error(response.groups)
        return {
            TopicPartition(p.topic, p.partition): p.committed_offset
            for p in response.groups[0].partitions
            if p.committed_offset >= 0
        }

    async def alter_consumer_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Commit ``offsets`` for ``group`` from outside it (the group must be empty)."""
        request = OffsetCommitRequest(
            group,
            tuple(OffsetCommitPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()),
        )
        _raise_first_error((await self._client.send(request)).partitions)

    # --- transactions ------------------------------------------------------------------------

    async def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> dict[int, list[TransactionListing]]:
        """The transactional ids each coordinator (by broker id) knows, as Kafka's
        ``listTransactions().allByBrokerId()``: only those in ``states``, of
        ``producer_ids``, open longer than ``duration_filter_ms`` or matching
        ``transactional_id_pattern`` (a regular expression) when given."""
        request = kafka_data_request(ApiKey.LIST_TRANSACTIONS, 0)(
            {
                "state_filters": list(states),
                "producer_id_filters": list(producer_ids),
                "duration_filter": duration_filter_ms,
                "transactional_id_pattern": transactional_id_pattern,
            }
        )
        data = (await self._client.send(request)).data
        if data["error_code"]:
            raise error_for_code(data["error_code"], "ListTransactions")
        broker_id = (await self._client.connection()).api_versions.broker_id
        return {
            broker_id: [
                TransactionListing(t["transactional_id"], t["producer_id"], t["transaction_state"])
                for t in data["transaction_states"]
            ]
        }

    async def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription]:
        """Each transactional id's state at its coordinator (Kafka's
        ``describeTransactions``); TRANSACTIONAL_ID_NOT_FOUND for one it does not know."""
        ids = list(transactional_ids)
        find = kafka_data_request(ApiKey.FIND_COORDINATOR, 1)
        found = (await self._client.send(find({"key_type": 1, "coordinator_keys": ids}))).data
        coordinators = {}
        for coordinator in found["coordinators"]:
            if coordinator["error_code"]:
                raise error_for_code(
                    coordinator["error_code"],
                    coordinator["error_message"] or f"the coordinator of {coordinator['key']!r}",
                )
            coordinators[coordinator["key"]] = coordinator["node_id"]
        request = kafka_data_request(ApiKey.DESCRIBE_TRANSACTIONS, 0)({"transactional_ids": ids})
        data = (await self._client.send(request)).data
        described = {}
        for state in data["transaction_states"]:
            transactional_id = state["transactional_id"]
            if state["error_code"]:
                raise error_for_code(state["error_code"], f"transactional id {transactional_id!r}")
            started = state["transaction_start_time"]
            described[transactional_id] = TransactionDescription(
                coordinators.get(transactional_id, -1),
                state["transaction_state"],
                state["producer_id"],
                state["producer_epoch"],
                state["transaction_timeout"],
                started if started >= 0 else None,
                tuple(
                    TopicPartition(topic["topic"], partition)
                    for topic in state["topics"]
                    for partition in topic["partitions"]
                ),
            )
        return described

    async def describe_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, list[ProducerState]]:
        """The active producers of each partition at its leader (Kafka's
        ``describeProducers``); a partition's error is raised."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = kafka_data_request(ApiKey.DESCRIBE_PRODUCERS, 0)(
            {"topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]}
        )
        data = (await self._client.send(request)).data
        described = {}
        for topic in data["topics"]:
            for partition in topic["partitions"]:
                tp = TopicPartition(topic["name"], partition["partition_index"])
                if partition["error_code"]:
                    raise error_for_code(
                        partition["error_code"], partition["error_message"] or f"partition {tp}"
                    )
                described[tp] = [
                    ProducerState(
                        p["producer_id"],
                        p["producer_epoch"],
                        p["last_sequence"],
                        p["last_timestamp"],
                        _present(p["coordinator_epoch"]),
                        _present(p["current_txn_start_offset"]),
                    )
                    for p in partition["active_producers"]
                ]
        return described

    async def close(self) -> None:
        await self._client.close()


class Admin(BlockingClient):
    """The blocking admin client: an AsyncAdmin on the shared background event loop."""

    def __init__(self, **configs: Any) -> None:
        self._thread = shared_event_loop_thread()
        self._admin = self._thread.call(AsyncAdmin, **configs)

    def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False) -> None:
        self._thread.run(self._admin.create_topics(list(topics), validate_only))

    def create_partitions(
        self, total_counts: Mapping[str, int], validate_only: bool = False
    ) -> None:
        self._thread.run(self._admin.create_partitions(dict(total_counts), validate_only))

    def delete_topics(self, names: Iterable[str]) -> None:
        self._thread.run(self._admin.delete_topics(list(names)))

    def list_topics(self) -> list[str]:
        return self._thread.run(self._admin.list_topics())

    def metadata(
        self, topics: Iterable[str] | None = None, allow_auto_topic_creation: bool = False
    ) -> MetadataResponse:
        names = None if topics is None else list(topics)
        return self._thread.run(self._admin.metadata(names, allow_auto_topic_creation))

    def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        names = None if names is None else list(names)
        return self._thread.run(self._admin.describe_topics(names))

    def describe_configs(self, topics: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
        return self._thread.run(self._admin.describe_configs(list(topics)))

    def alter_configs(
        self, configs: Mapping[str, Mapping[str, str | None]], validate_only: bool = False
    ) -> None:
        self._thread.run(self._admin.alter_configs(configs, validate_only))

    def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self._thread.run(self._admin.delete_records(offsets))

    def list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
        isolation: IsolationLevel = IsolationLevel.HIGH_WATERMARK,
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        return self._thread.run(self._admin.list_offsets(timestamps, isolation))

    def list_consumer_groups(self, states: Iterable[str] = ()) -> list[ListedGroup]:
        return self._thread.run(self._admin.list_consumer_groups(list(states)))

    def describe_consumer_groups(self, groups: Iterable[str]) -> list[DescribedGroupEntry]:
        return self._thread.run(self._admin.describe_consumer_groups(list(groups)))

    def delete_consumer_groups(self, groups: Iterable[str]) -> None:
        self._thread.run(self._admin.delete_consumer_groups(list(groups)))

    def list_consumer_group_offsets(self, group: str) -> dict[TopicPartition, int]:
        return self._thread.run(self._admin.list_consumer_group_offsets(group))

    def alter_consumer_group_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        self._thread.run(self._admin.alter_consumer_group_offsets(group, offsets))

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> dict[int, list[TransactionListing]]:
        return self._thread.run(
            self._admin.list_transactions(
                list(states), list(producer_ids), duration_filter_ms, transactional_id_pattern
            )
        )

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription]:
        return self._thread.run(self._admin.describe_transactions(list(transactional_ids)))

    def describe_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, list[ProducerState]]:
        return self._thread.run(self._admin.describe_producers(list(partitions)))

    def close(self) -> None:
        self._thread.run(self._admin.close())
