"""OffsetAndMetadata: one committed offset of a group, as the coordinator keeps it."""

from __future__ import annotations

from dataclasses import dataclass

NO_OFFSET = -1


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset with its leader epoch, metadata string and commit time (ms).

    ``record_offset`` is where its record sits in ``__consumer_offsets``: of two values for one
    key, the later record wins, whatever order their acknowledgements ran in.
    """

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    record_offset: int = -1
