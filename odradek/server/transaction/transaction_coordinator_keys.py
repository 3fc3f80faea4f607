"""TransactionCoordinatorKeys: FindCoordinator's answer for a transactional id key, for both
protocols' FindCoordinator handlers: this broker coordinates every transactional id, once
``__transaction_state`` exists (created on first use, as Kafka does) and the principal may
Describe the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as in Kafka)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.errors import CoordinatorNotAvailableError, InvalidRequestError, KafkaError
from odradek.security.acl import AclOperation
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.request_context import RequestContext

if TYPE_CHECKING:
    from odradek.server.transaction.transaction_coordinator import TransactionCoordinator


class TransactionCoordinatorKeys:
    """Whether FindCoordinator may name this broker for a transactional id."""

    def __init__(self, coordinator: TransactionCoordinator, authorizer: Authorizer) -> None:
        self._coordinator = coordinator
        self._authorizer = authorizer

    async def ready(self) -> KafkaError | None:
        """None once ``__transaction_state`` exists; the error every key gets otherwise."""
        try:
            await self._coordinator.state_manager.topic.ensure()
        except KafkaError as failure:
            return CoordinatorNotAvailableError(f"cannot create the transaction topic: {failure}")
        return None

    def denial(self, context: RequestContext, transactional_id: str) -> KafkaError | None:
        if not transactional_id:
            return InvalidRequestError("the transactional id must not be empty")
        return self._authorizer.transactional_id_denial(
            context, AclOperation.DESCRIBE, transactional_id
        )
