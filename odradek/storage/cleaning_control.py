"""CleaningControl: what the LogManager needs of the log cleaner, without importing it.

The cleaner (odradek.cleaner) builds on storage, so storage cannot import it; the broker
attaches a LogCleaner to the LogManager through this protocol instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from odradek.topic_partition import TopicPartition

if TYPE_CHECKING:
    from odradek.storage.unified_log import UnifiedLog


class CleaningControl(Protocol):
    """Keeps the cleaner and the LogManager's own work (retention, deletion) off one log."""

    def pause_cleaning_for_non_compacted_partitions(self) -> list[UnifiedLog]:
        """Pause cleaning of every log whose policy is not compact-only; return them."""

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        """Let the cleaner work on ``tps`` again."""

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stop any cleaning of ``tp`` and forget it, its ``cleaner-offset-checkpoint`` entry
        included (its topic is being deleted; the cleaner owns that file)."""

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """Drop the cleaner's state for the logs of a failed directory."""
