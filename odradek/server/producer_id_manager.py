"""ProducerIdManager: producer ids that are never given twice, also across restarts and
crashes (the role of Kafka's ``ProducerIdManager`` and the non-transactional half of its
``TransactionCoordinator.handleInitProducerId``).

Ids are reserved in blocks: before the first id of a block is handed out, the block's end is
written durably (temp file, fsync, rename, directory fsync) to ``producer-id-block`` in every
log directory. A restart, clean or not, starts after the highest end any directory holds, so
the unused rest of the last block is skipped, never reused. A producer that re-initialises
with the id and epoch it holds gets the next epoch of that id (KIP-360); once the epoch is
exhausted, a new id at epoch 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import Executor
from pathlib import Path

from odradek.errors import (
    InvalidRequestError,
    KafkaError,
    KafkaStorageError,
)
from odradek.record.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from odradek.server.request_context import RequestContext
from odradek.storage.atomic_file import write_atomically

logger = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_FILE = "producer-id-block"
BLOCK_SIZE = 1000
MAX_EPOCH = 2**15 - 1
FILE_VERSION = 0


def encode_block_file(block_end: int) -> bytes:
    return f"version={FILE_VERSION}\nblock_end={block_end}\n".encode()


def decode_block_file(text: str) -> int:
    """The reserved block end in a ``producer-id-block`` file; ValueError if unreadable."""
    fields = dict(line.split("=", 1) for line in text.splitlines() if line.strip())
    if fields.get("version") != str(FILE_VERSION):
        raise ValueError(f"unknown version {fields.get('version')!r}")
    block_end = int(fields["block_end"])
    if block_end < 0:
        raise ValueError(f"negative block_end {block_end}")
    return block_end


class ProducerIdManager:
    """Hands out producer ids from durably reserved blocks."""

    def __init__(
        self, log_dirs: Sequence[Path], executor: Executor, block_size: int = BLOCK_SIZE
    ) -> None:
        self._paths = [Path(d) / PRODUCER_ID_BLOCK_FILE for d in log_dirs]
        self._executor = executor
        self._block_size = block_size
        self._next_id = 0
        self._block_end = 0
        self._unreadable: str | None = None
        self._lock: asyncio.Lock | None = None

    def load(self) -> None:
        """Read the reserved block ends (blocking; at start-up). Ids resume after the highest."""
        highest = 0
        for path in self._paths:
            try:
                highest = max(highest, decode_block_file(path.read_text()))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, UnicodeDecodeError) as error:
                self._unreadable = f"{path} is unreadable ({error})"
                logger.error("%s: no producer id is given until it is fixed", self._unreadable)
        self._next_id = self._block_end = highest
        logger.info("producer ids resume at %d", highest)

    @property
    def next_id(self) -> int:
        return self._next_id

    async def generate(self) -> int:
        """A producer id never given before."""
        if self._unreadable is not None:
            raise KafkaStorageError(f"cannot give producer ids: {self._unreadable}")
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._next_id >= self._block_end:
                end = self._next_id + self._block_size
                await asyncio.get_running_loop().run_in_executor(self._executor, self._reserve, end)
                self._block_end = end
            producer_id = self._next_id
            self._next_id += 1
            return producer_id

    def _reserve(self, block_end: int) -> None:
        """Write ``block_end`` durably to every log directory that takes it (one at least)."""
        written = 0
        failures = []
        for path in self._paths:
            try:
                write_atomically(path, encode_block_file(block_end))
                written += 1
            except OSError as error:
                failures.append(f"{path}: {error}")
        if failures:
            logger.warning("producer id block end %d not written to %s", block_end, failures)
        if not written:
            raise KafkaStorageError(
                f"no log directory took the producer id block end {block_end}: {failures}"
            )

    async def init_producer_id(
        self, producer_id: int, producer_epoch: int, context: RequestContext
    ) -> tuple[int, int]:
        """The id and epoch of an idempotent producer: a new id (``producer_id`` and
        ``producer_epoch`` -1), or the next epoch of the id it holds (KIP-360); raises the
        KafkaError that refuses it."""
        try:
            return await self._init(producer_id, producer_epoch)
        except KafkaError as error:
            logger.warning("InitProducerId from %s refused: %s", context.peer, error)
            raise

    async def _init(self, producer_id: int, epoch: int) -> tuple[int, int]:
        if producer_id == NO_PRODUCER_ID and epoch == NO_PRODUCER_EPOCH:
            return await self.generate(), 0
        if producer_id < 0 or epoch < 0:
            raise InvalidRequestError(
                f"producer_id {producer_id} and producer_epoch {epoch}: give both or neither"
            )
        if producer_id >= self._next_id:
            raise InvalidRequestError(f"producer id {producer_id} was never given by this broker")
        if epoch >= MAX_EPOCH - 1:
            return await self.generate(), 0
        return producer_id, epoch + 1
