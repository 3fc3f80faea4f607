"""LogCleaningState: where a log stands with the cleaner (Kafka's ``LogCleaningState``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LogCleaningState:
    """``in progress`` (being cleaned), ``aborted`` (asked to stop, not stopped yet) or
    ``paused`` by ``paused_count`` callers; a log the cleaner is not touching has no state."""

    name: str
    paused_count: int = 0

    @property
    def is_paused(self) -> bool:
        return self.name == PAUSED_NAME


PAUSED_NAME = "paused"
IN_PROGRESS = LogCleaningState("in progress")
ABORTED = LogCleaningState("aborted")


def paused(count: int) -> LogCleaningState:
    return LogCleaningState(PAUSED_NAME, count)
