"""GroupCoordinatorMetrics: rebalances, commit latency and the last load of the groups."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class GroupCoordinatorMetrics:
    """The figures the coordinator updates as it runs (per-group state is read at scrape
    time by the GroupCoordinatorCollector)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.rebalances = Counter(
            "odradek_group_rebalances",
            "Rebalances started (a group entering PreparingRebalance).",
            registry=registry,
        )
        self.completed_rebalances = Counter(
            "odradek_group_completed_rebalances",
            "Rebalances completed (a group reaching Stable).",
            registry=registry,
        )
        self.commit_latency = Histogram(
            "odradek_group_offset_commit_seconds",
            "Time from an OffsetCommit's arrival at the coordinator to its records being fsync'ed.",
            buckets=COMMIT_BUCKETS,
            registry=registry,
        )
        self.load_seconds = 0.0
        self.loaded_groups = 0
        self.loaded_offsets = 0

    def rebalance_started(self, group_id: str) -> None:
        self.rebalances.inc()

    def rebalance_completed(self, group_id: str) -> None:
        self.completed_rebalances.inc()

    def committed(self, seconds: float) -> None:
        self.commit_latency.observe(seconds)

    def loaded(self, groups: int, offsets: int, seconds: float) -> None:
        self.loaded_groups, self.loaded_offsets, self.load_seconds = groups, offsets, seconds
