"""The two topics of the click pipeline, created on first use."""

from __future__ import annotations

from odradek.client import Admin, NewTopic
from odradek.errors import TopicAlreadyExistsError

CLICKS = "clicks"
CLICK_COUNTS = "click-counts"


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
    """The clicks topic (3 partitions) and the counts topic, compacted: the last count per
    page stays."""
    ensure_topic(bootstrap, clicks, 3)
    ensure_topic(bootstrap, counts, 1, {"cleanup.policy": "compact"})
