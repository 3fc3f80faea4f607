"""The broker's half of a cleaning run: swapping its ``.swap`` segments into the live log, or
deleting what a run that did not finish left behind."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from odradek.cleaner.cleaning_task import CleaningResult
from odradek.cleaner.errors import LogCleaningAbortedError
from odradek.clock import SYSTEM_CLOCK
from odradek.storage import log_file_names as names
from odradek.storage.log_segment import LogSegment
from odradek.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)


def swap_in(log: UnifiedLog, result: CleaningResult, should_abort: Callable[[], bool]) -> None:
    """Replace each group of ``result`` by its cleaned segment, one group at a time, checking
    ``should_abort()`` before each (LogCleaningAbortedError leaves the rest unswapped)."""
    for bases in result.groups:
        if should_abort():
            raise LogCleaningAbortedError(f"[{log.topic_partition}] cleaning aborted")
        old = [segment for base in bases if (segment := log.segments.get(base)) is not None]
        cleaned = LogSegment.open(
            log.dir,
            bases[0],
            log.config,
            SYSTEM_CLOCK,  # times only rolls, which a cleaned segment never does
            file_already_exists=True,
            file_suffix=names.SWAP_FILE_SUFFIX,
        )
        log.replace_segments(cleaned, old)


def delete_leftovers(directory: Path) -> None:
    """Delete the ``.cleaned`` and ``.swap`` files of a run that did not finish (a directory
    renamed for deletion meanwhile has nothing to delete)."""
    try:
        paths = list(directory.iterdir())
    except FileNotFoundError:
        return
    for path in paths:
        if path.name.endswith((names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX)):
            logger.info(
                "[%s] deleting %s left by an unfinished cleaning", directory.name, path.name
            )
            path.unlink(missing_ok=True)
