"""InitProducerId (key 22): a producer id and epoch for an idempotent producer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import Int16, Int32, Int64
from odradek.record.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID


@dataclass(frozen=True)
class InitProducerIdRequest(Message):
    """A new producer id (``producer_id`` -1), or the next epoch of the id a producer holds
    (its ``producer_id`` and current ``producer_epoch``, KIP-360). ``transactional_id`` must
    be nil: transactions are not supported."""

    api_key: ClassVar[ApiKey] = ApiKey.INIT_PRODUCER_ID
    transactional_id: str | None = None
    transaction_timeout_ms: Int32 = -1
    producer_id: Int64 = NO_PRODUCER_ID
    producer_epoch: Int16 = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class InitProducerIdResponse(Message):
    """The id and epoch; a refusal is a request error in the response header (its code and
    message), like every whole-request error of this protocol."""

    api_key: ClassVar[ApiKey] = ApiKey.INIT_PRODUCER_ID
    producer_id: Int64 = NO_PRODUCER_ID
    producer_epoch: Int16 = NO_PRODUCER_EPOCH
