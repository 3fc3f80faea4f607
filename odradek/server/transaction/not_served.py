"""What a transactional client is told until this broker has a transaction coordinator."""

from __future__ import annotations

from odradek.errors import UnsupportedVersionError

# Until this broker has a transaction coordinator, FindCoordinator for a transactional id is
# refused with a non-retriable error saying why, so a transactional client fails at once instead
# of retrying COORDINATOR_NOT_AVAILABLE until its own timeout.
TRANSACTIONS_NOT_SERVED = UnsupportedVersionError(
    "transactions are not supported by this broker yet (no transaction coordinator); "
    "an idempotent producer needs no transactional.id"
)
