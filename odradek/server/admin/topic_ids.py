"""TopicIds: every topic's UUID, kept in its partition directories' ``partition.metadata``.

A topic gets its id when it is created through Kafka's protocol, or the first time a client
asks for it (topics created by odradek's own protocol, auto-created, or older than ids); the
id is written to every partition directory of the topic (partitions added later get it when
the topic is next asked about), so it survives restarts and stays the same for the topic's
life. Reading and writing the files runs on a thread.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from concurrent.futures import Executor

from odradek.errors import KafkaError
from odradek.storage.log_manager import LogManager
from odradek.storage.partition_metadata_file import read_topic_id, write_topic_id

logger = logging.getLogger(__name__)


class TopicIds:
    """Topic name to id and back, loaded (or assigned) on first use."""

    def __init__(self, log_manager: LogManager, executor: Executor) -> None:
        self._log_manager = log_manager
        self._executor = executor
        self._ids: dict[str, uuid.UUID] = {}
        self._names: dict[uuid.UUID, str] = {}  # the reverse of _ids: a lookup by id is O(1)
        self._partition_counts: dict[str, int] = {}

    def get(self, topic: str) -> uuid.UUID | None:
        return self._ids.get(topic)

    def name_of(self, topic_id: uuid.UUID | None) -> str | None:
        return self._names.get(topic_id)

    async def resolve(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the topic with ``topic_id``, loading the ids of topics not asked
        about yet when it is not known (None: no such topic)."""
        name = self._names.get(topic_id)
        if name is None and topic_id is not None:
            unknown = [topic for topic in self._log_manager.topics() if topic not in self._ids]
            await self.ensure(dict.fromkeys(unknown))
            name = self._names.get(topic_id)
        return name

    def forget(self, topic: str) -> None:
        self._names.pop(self._ids.pop(topic, None), None)
        self._partition_counts.pop(topic, None)

    async def ensure(self, partition_counts: Mapping[str, int | None]) -> None:
        """Load or assign the ids of topics not known yet, or whose partition count is not
        the one given (None: unknown, look again): new partitions get the topic's id."""
        missing = [
            topic
            for topic, count in partition_counts.items()
            if topic not in self._ids or count is None or self._partition_counts.get(topic) != count
        ]
        if missing:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, self._load_or_assign, missing)

    def _load_or_assign(self, topics: list[str]) -> None:
        for topic in topics:
            directories = []
            partitions = self._log_manager.partitions(topic)
            for tp in partitions:
                try:
                    directories.append(self._log_manager.get_log(tp).dir)
                except KafkaError:
                    continue  # offline: its file is read when it is back
            if not directories:
                continue
            found = [read_topic_id(directory) for directory in directories]
            topic_id = next((known for known in found if known is not None), None)
            if topic_id is None:
                topic_id = uuid.uuid4()
                logger.info("topic %s gets id %s", topic, topic_id)
            for directory, known in zip(directories, found, strict=True):
                if known is None:
                    try:
                        write_topic_id(directory, topic_id)
                    except OSError as error:
                        logger.warning("[%s] cannot write its topic id: %s", directory.name, error)
            self._names.pop(self._ids.get(topic), None)  # a topic recreated under its name
            self._ids[topic] = topic_id
            self._names[topic_id] = topic
            self._partition_counts[topic] = len(partitions)
