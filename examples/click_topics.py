"""The two topics of the click pipeline, created on first use."""

from __future__ import annotations

from odradek.client import Admin, NewTopic
from odradek.errors import TopicAlreadyExistsError

CLICKS = "clicks"
CLICK_COUNTS = "click-counts"
COUNTS_CONFIGS = {
    "cleanup.policy": "compact",
    # The cleaner never touches the active segment, and with the defaults (1 GiB, 7 days) the
    # few KB of counts would stay in it for a week: roll it every 30 s of new counts instead,
    "segment.ms": "30000",
    # and clean as soon as anything is dirty (default: once half the log is).
    "min.cleanable.dirty.ratio": "0.01",
}
"""The counts topic's configs: compaction shows within a minute or so of streaming (a roll,
then the cleaner's next look, every log.cleaner.backoff.ms: 15 s)."""


def ensure_topic(
    bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None
) -> None:
    """Create topic ``name`` unless it exists."""
    with Admin(bootstrap_servers=bootstrap) as admin:
        try:
            admin.create_topics([NewTopic(name, partitions, configs or {})])
        except TopicAlreadyExistsError:
            pass


def ensure_pipeline_topics(
    bootstrap: str, clicks: str = CLICKS, counts: str = CLICK_COUNTS
) -> None:
    """The clicks topic (3 partitions) and the counts topic, compacted (COUNTS_CONFIGS): the
    last count per page stays."""
    ensure_topic(bootstrap, clicks, 3)
    ensure_topic(bootstrap, counts, 1, COUNTS_CONFIGS)
