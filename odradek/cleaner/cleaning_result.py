"""CleaningResult: what the cleaning process hands back to the broker."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.cleaner.cleaner_stats import CleanerStats


@dataclass(frozen=True)
class CleaningResult:
    """The run cleaned the log up to ``end_offset`` (the next first dirty offset) and left one
    ``.swap`` segment per group, named by the group's first base offset, to replace the
    segments with the base offsets in ``groups``."""

    end_offset: int
    groups: tuple[tuple[int, ...], ...]
    stats: CleanerStats
