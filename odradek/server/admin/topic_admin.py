"""TopicAdmin: which topics exist on this broker, with how many partitions and which settings.

The broker-side half of Kafka's topic administration (the work of ``AdminZkClient`` and of the
controller's topic and config records): create a topic, add partitions to one, change or
describe its config overrides, delete it. The LogManager below it keeps the log directories and
the logs; this class decides what they should hold and keeps the topic configs in step.

Creation is all or nothing, even across a crash (see
:mod:`odradek.storage.pending_partition_creation`), and costs O(partitions created). One
operation runs at a time. :meth:`shutdown` refuses new operations and waits, bounded, for the
running ones; a creation still running after that is abandoned and rolled back.
Methods block on the disk; the server calls them off its event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from odradek.config.broker_config import BrokerConfig
from odradek.config.config_entry import ConfigEntry
from odradek.config.log_config import LogConfig
from odradek.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.log_manager import CREATION_ABORT_TIMEOUT_S, LogManager
from odradek.storage.partition_description import PartitionDescription
from odradek.storage.pending_partition_creation import PendingPartitionCreation
from odradek.topic_partition import TopicPartition, collision_key, validate_topic_name

logger = logging.getLogger(__name__)


class TopicAdmin:
    """Creates, alters and deletes the topics of the LogManager's logs."""

    def __init__(self, log_manager: LogManager, config: BrokerConfig) -> None:
        self._log_manager = log_manager
        self._config = config
        self._default_log_config = config.log_config()
        self._operation_lock = threading.Lock()  # one create, delete or config change at a time
        self._state = threading.Condition()  # guards the two fields below
        self._stopping = False  # no new operation starts
        self._abandoned = False  # running creations stop and roll back
        self._in_flight = 0

    # --- create ------------------------------------------------------------------------------

    def validate_new_topic(
        self, topic: str, num_partitions: int, overrides: Mapping[str, object] | None = None
    ) -> LogConfig:
        """Every check of a creation, creating nothing (CreateTopics' ``validate_only``);
        returns the settings the topic would have.

        Raises InvalidTopicError, InvalidPartitionsError, PolicyViolationError (more partitions
        than ``create.topics.max.partitions.per.request``), InvalidConfigError or
        TopicAlreadyExistsError.
        """
        validate_topic_name(topic)
        self._check_partition_count(topic, num_partitions)
        config = LogConfig.from_props(overrides or {}, self._default_log_config)
        if self._log_manager.partitions(topic):
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        colliding = self.colliding_topic(topic)
        if colliding is not None:
            raise InvalidTopicError(f"Topic '{topic}' collides with existing topic: {colliding}")
        return config

    def colliding_topic(self, topic: str) -> str | None:
        """Another existing topic whose name is ``topic``'s once '.' and '_' are one character
        (their metric names would be the same), as Kafka refuses; None when there is none.
        O(topics), as a creation's other costs are O(partitions)."""
        if "." not in topic and "_" not in topic:
            return None
        folded = collision_key(topic)
        for existing in self._log_manager.topics():
            if existing != topic and collision_key(existing) == folded:
                return existing
        return None

    def create_topic(
        self, topic: str, num_partitions: int, overrides: Mapping[str, object] | None = None
    ) -> list[TopicPartition]:
        """Create ``topic`` with ``num_partitions`` empty logs and its config ``overrides``,
        all or nothing. Raises as :meth:`validate_new_topic` does, or KafkaStorageError when a
        directory fails or the broker stops meanwhile."""
        with self._operation("create topic", topic):
            config = self.validate_new_topic(topic, num_partitions, overrides)
            stored = _stored_overrides(config, overrides or {})
            self._log_manager.topic_configs.set(topic, stored)
            creation = PendingPartitionCreation(topic, 0, num_partitions, new_topic=True)
            try:
                logs = self._log_manager.create_logs(creation, config, self._aborted)
            except BaseException:
                self._forget_configs(topic)
                raise
        logger.info("created topic %s: %d partitions, overrides %s", topic, len(logs), stored)
        return [log.topic_partition for log in logs]

    def get_or_create_topic(self, topic: str) -> list[TopicPartition]:
        """The partitions of ``topic``, creating it with ``num.partitions`` when it does not
        exist and ``auto.create.topics.enable`` is on (else UnknownTopicOrPartitionError)."""
        partitions = self._log_manager.partitions(topic)
        if partitions:
            return partitions
        if not self._config.auto_create_topics_enable:
            raise UnknownTopicOrPartitionError(
                f"topic {topic} does not exist and auto.create.topics.enable is false"
            )
        colliding = self.colliding_topic(topic)
        if colliding is not None:  # as Kafka's Metadata answers it: its creation fails
            raise UnknownTopicOrPartitionError(
                f"topic {topic} does not exist and is not auto-created: it collides with "
                f"existing topic {colliding}"
            )
        try:
            return self.create_topic(topic, self._config.num_partitions)
        except TopicAlreadyExistsError:
            return self._log_manager.partitions(topic)

    def validate_new_partitions(self, topic: str, total_count: int) -> int:
        """Every check of growing ``topic`` to ``total_count`` partitions, adding nothing
        (CreatePartitions' ``validate_only``); returns how many would be added.

        Raises UnknownTopicOrPartitionError, InvalidPartitionsError (not more than it has) or
        PolicyViolationError (more than ``create.topics.max.partitions.per.request``).
        """
        existing = len(self._require_topic(topic))
        count = total_count - existing
        if count < 1:
            raise InvalidPartitionsError(
                f"topic {topic} has {existing} partitions; {total_count} would not add any"
            )
        self._check_partition_count(topic, count)
        return count

    def create_partitions(self, topic: str, total_count: int) -> list[TopicPartition]:
        """Grow ``topic`` to ``total_count`` partitions (Kafka's CreatePartitions), the new ones
        all or nothing; returns the new partitions. Raises as :meth:`validate_new_partitions`
        does, or KafkaStorageError."""
        with self._operation("create partitions of", topic):
            count = self.validate_new_partitions(topic, total_count)
            first = total_count - count
            creation = PendingPartitionCreation(topic, first, count, new_topic=False)
            logs = self._log_manager.create_logs(
                creation, self._log_manager.topic_config(topic), self._aborted
            )
        logger.info("added %d partitions to topic %s (now %d)", count, topic, total_count)
        return [log.topic_partition for log in logs]

    def _check_partition_count(self, topic: str, count: int) -> None:
        if count < 1:
            raise InvalidPartitionsError(f"topic {topic} needs at least one partition, not {count}")
        limit = self._config.create_topics_max_partitions_per_request
        if count > limit:
            raise PolicyViolationError(
                f"cannot create {count} partitions of topic {topic} at once: "
                f"create.topics.max.partitions.per.request is {limit}"
            )

    # --- delete ------------------------------------------------------------------------------

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic``: its logs (removed from disk after ``file.delete.delay.ms``) and its
        config overrides. Raises UnknownTopicOrPartitionError, or KafkaStorageError when a
        partition is offline."""
        with self._operation("delete topic", topic):
            partitions = self._require_topic(topic)
            self._log_manager.delete_logs(partitions)
            self._log_manager.topic_configs.remove(topic)
        logger.info("deleted topic %s (%d partitions)", topic, len(partitions))

    # --- configs -----------------------------------------------------------------------------

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The config overrides of ``topic`` (empty when it has none)."""
        return self._log_manager.topic_configs.overrides(topic)

    def alter_topic_config(self, topic: str, overrides: Mapping[str, object]) -> LogConfig:
        """Make ``overrides`` the whole override set of ``topic`` (Kafka's AlterConfigs), persist
        it and apply it to the live logs at once; return the new settings."""
        config = LogConfig.from_props(overrides, self._default_log_config)
        stored = _stored_overrides(config, overrides)
        with self._operation("alter the config of", topic):
            partitions = self._require_topic(topic)
            self._log_manager.topic_configs.set(topic, stored)
            for tp in partitions:
                try:
                    self._log_manager.get_log(tp).update_config(config)
                except KafkaStorageError:
                    pass  # offline: it takes the stored config when its directory returns
        logger.info("altered the config of topic %s: overrides %s", topic, stored)
        return config

    def describe_topic(self, topic: str) -> list[PartitionDescription]:
        """Every partition of ``topic``; raises UnknownTopicOrPartitionError or, when one of
        them is offline, KafkaStorageError."""
        return [self._log_manager.describe_partition(tp) for tp in self._require_topic(topic)]

    def describe_topic_config(self, topic: str) -> list[ConfigEntry]:
        """Every topic setting of ``topic`` with its value and source (DescribeConfigs)."""
        self._require_topic(topic)
        return LogConfig.describe(
            self._log_manager.topic_configs.overrides(topic),
            self._default_log_config,
            self._config.static_topic_keys(),
        )

    def _require_topic(self, topic: str) -> list[TopicPartition]:
        partitions = self._log_manager.partitions(topic)
        if not partitions:
            raise UnknownTopicOrPartitionError(f"topic {topic} does not exist")
        return partitions

    def _forget_configs(self, topic: str) -> None:
        """Remove the overrides of a topic whose creation failed (best effort: a failure here
        leaves overrides that the next creation of the topic replaces)."""
        try:
            self._log_manager.topic_configs.remove(topic)
        except KafkaStorageError as error:
            logger.warning("cannot forget the configs of %s: %s", topic, error)

    # --- shutdown ----------------------------------------------------------------------------

    def shutdown(
        self, finish_timeout_s: float, rollback_timeout_s: float = CREATION_ABORT_TIMEOUT_S
    ) -> bool:
        """Refuse new operations and wait at most ``finish_timeout_s`` for the running ones to
        end; then abandon the creations still running (they roll back) and wait at most
        ``rollback_timeout_s`` more. True when no operation is left."""
        with self._state:
            self._stopping = True
            finished = self._state.wait_for(lambda: self._in_flight == 0, finish_timeout_s)
            if not finished:
                logger.warning(
                    "abandoning the topic operations still running after %.1f s", finish_timeout_s
                )
                self._abandoned = True
                finished = self._state.wait_for(lambda: self._in_flight == 0, rollback_timeout_s)
        if not finished:
            logger.warning("a topic operation is still running at shutdown")
        return finished

    def _aborted(self) -> bool:
        return self._abandoned

    @contextmanager
    def _operation(self, action: str, topic: str) -> Iterator[None]:
        with self._state:
            if self._stopping:
                raise KafkaStorageError(f"cannot {action} {topic}: the broker is stopping")
            self._in_flight += 1
        try:
            with self._operation_lock:
                if self._stopping:
                    raise KafkaStorageError(f"cannot {action} {topic}: the broker is stopping")
                yield
        finally:
            with self._state:
                self._in_flight -= 1
                self._state.notify_all()


def _stored_overrides(config: LogConfig, overrides: Mapping[str, object]) -> dict[str, str]:
    """The overrides as the canonical text of the settings they gave, to store."""
    rendered = config.to_props()
    return {name: rendered[name] for name in overrides}
