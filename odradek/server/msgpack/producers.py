"""MsgpackProducerApis: InitProducerId v0 on odradek's msgpack protocol (an idempotent
producer's id), mapped onto the ProducerIdManager's call the Kafka protocol's handler makes
(server/kafka/producers.py); ApiRouter authorizes it first. (v1 carries Kafka's request data
and is answered by that handler: server/msgpack/kafka_data.py.)"""

from __future__ import annotations

import logging

from odradek.errors import UnsupportedVersionError
from odradek.protocol.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from odradek.server.producer_id_manager import ProducerIdManager
from odradek.server.request_context import RequestContext

logger = logging.getLogger(__name__)


class MsgpackProducerApis:
    """InitProducerId's own message mapped onto the ProducerIdManager."""

    def __init__(self, producer_ids: ProducerIdManager) -> None:
        self._producer_ids = producer_ids

    async def init_producer_id(
        self, request: InitProducerIdRequest, context: RequestContext
    ) -> InitProducerIdResponse:
        """The id and epoch; raises the KafkaError that refuses them."""
        if request.transactional_id is not None:
            refusal = UnsupportedVersionError(
                f"transactional id {request.transactional_id!r}: InitProducerId v0 of "
                f"odradek's protocol has no transactional path; a transactional producer sends "
                f"v1 (Kafka's request data), which the transaction coordinator answers"
            )
            logger.warning("InitProducerId from %s refused: %s", context.peer, refusal)
            raise refusal
        producer_id, epoch = await self._producer_ids.init_producer_id(
            request.producer_id, request.producer_epoch, context
        )
        return InitProducerIdResponse(producer_id, epoch)
