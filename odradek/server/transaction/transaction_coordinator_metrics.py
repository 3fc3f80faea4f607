"""TransactionCoordinatorMetrics: open transactions, the age of the oldest, commits and aborts
(those the coordinator made for a timeout counted apart)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge

from odradek.server.transaction.transaction_state import TransactionState

if TYPE_CHECKING:
    from odradek.clock import Clock
    from odradek.server.transaction.transaction_state_manager import TransactionStateManager

OPEN_STATES = frozenset(
    {
        TransactionState.ONGOING,
        TransactionState.PREPARE_COMMIT,
        TransactionState.PREPARE_ABORT,
        TransactionState.PREPARE_EPOCH_FENCE,
    }
)
"""A transaction is open from its first partition until its markers are written."""


class TransactionCoordinatorMetrics:
    """Counters the coordinator updates; gauges read from its state at scrape time."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.started_transactions = Counter(
            "odradek_transactions_started",
            "Transactions opened (a transactional id's first partition added).",
            registry=registry,
        )
        self.commits = Counter(
            "odradek_transaction_commits",
            "Transactions committed (every COMMIT marker written).",
            registry=registry,
        )
        self.aborts = Counter(
            "odradek_transaction_aborts",
            "Transactions aborted, by who decided: client (EndTxn), fence (a new producer "
            "instance), timeout (open longer than transaction.timeout.ms).",
            ["reason"],
            registry=registry,
        )
        self.open_transactions = Gauge(
            "odradek_transactions_open",
            "Transactions open now (Ongoing, or decided with markers still being written).",
            registry=registry,
        )
        self.oldest_open_transaction_age = Gauge(
            "odradek_transaction_oldest_open_age_seconds",
            "Age of the oldest open transaction (0 when none is open).",
            registry=registry,
        )
        self._state: TransactionStateManager | None = None
        self._clock: Clock | None = None
        self.open_transactions.set_function(self._open_count)
        self.oldest_open_transaction_age.set_function(self._oldest_age)

    def watch(self, state: TransactionStateManager, clock: Clock) -> None:
        """Read the gauges from ``state``, ages by ``clock`` (the coordinator's)."""
        self._state, self._clock = state, clock

    def _open(self) -> list[int]:
        if self._state is None:
            return []
        return [m.start_timestamp_ms for m in self._state.all() if m.state in OPEN_STATES]

    def _open_count(self) -> float:
        return float(len(self._open()))

    def _oldest_age(self) -> float:
        starts = [start for start in self._open() if start >= 0]
        if not starts or self._clock is None:
            return 0.0
        return max(0.0, (self._clock.milliseconds() - min(starts)) / 1000)

    def started(self) -> None:
        self.started_transactions.inc()

    def aborted(self, reason: str | None) -> None:
        self.aborts.labels(reason or "client").inc()

    def completed(self, committed: bool) -> None:
        if committed:
            self.commits.inc()
