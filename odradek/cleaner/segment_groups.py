"""Grouping the segments of a cleaning run so that each group is rewritten as one segment."""

from __future__ import annotations

from collections.abc import Sequence

from odradek.cleaner.segment_snapshot import SegmentSnapshot

INT32_MAX = 2**31 - 1


def group_segments_by_size(
    segments: Sequence[SegmentSnapshot],
    max_size: int,
    max_index_size: int,
    first_uncleanable_offset: int,
) -> list[list[SegmentSnapshot]]:
    """Consecutive runs of ``segments`` whose data fits ``max_size`` bytes, whose indexes fit
    ``max_index_size`` bytes each and whose offsets fit one segment's int32 relative offsets
    (Kafka's ``Cleaner.groupSegmentsBySize``). Cleaning only shrinks a segment, so a group's
    output fits wherever its input did."""
    groups: list[list[SegmentSnapshot]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        offset_index_size = group[0].offset_index_bytes
        time_index_size = group[0].time_index_bytes
        while (
            rest
            and log_size + rest[0].size <= max_size
            and offset_index_size + rest[0].offset_index_bytes <= max_index_size
            and time_index_size + rest[0].time_index_bytes <= max_index_size
            and (
                rest[0].size == 0
                or _last_offset_bound(rest, first_uncleanable_offset) - group[0].base_offset
                <= INT32_MAX
            )
        ):
            segment = rest.pop(0)
            group.append(segment)
            log_size += segment.size
            offset_index_size += segment.offset_index_bytes
            time_index_size += segment.time_index_bytes
        groups.append(group)
    return groups


def _last_offset_bound(rest: list[SegmentSnapshot], first_uncleanable_offset: int) -> int:
    """The highest offset the first of ``rest`` may hold: below the next segment's base."""
    return (rest[1].base_offset if len(rest) > 1 else first_uncleanable_offset) - 1
