"""The next segment's log file, created ahead of the roll: a roll renames it into place instead
of creating a file, so the new segment's name needs no directory fsync before the first acks=all
append in it is answered.

A partition that rolled keeps one empty file, ``next-segment.log.precreated``, whose directory
entry was made durable in the background (with the roll's producer snapshot, by one directory
fsync). The next roll renames it to ``<base offset>.log`` and writes there. That rename is not
synced before acknowledgements: a power cut may bring the pre-created name back, holding the new
segment's fsynced records. Loading (``recover_precreated_segment``) then puts it back under the
name its first batch's base offset gives; an empty one (never used, or left by any stop) is
deleted. At most one segment can be in that state: the next pre-created file is created and
synced after the rename, and that fsync makes the rename durable too.

Preallocated segments (``preallocate``) are created at the roll as before.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import BinaryIO

from odradek.record.record_batch import HEADER_SIZE, RecordBatch
from odradek.storage import log_file_names as names

logger = logging.getLogger(__name__)

PRECREATED_SEGMENT_FILE = "next-segment.log.precreated"


def precreated_segment_path(directory: Path) -> Path:
    return directory / PRECREATED_SEGMENT_FILE


def precreate_segment_file(directory: Path) -> None:
    """Create the empty pre-created file unless it exists; the caller fsyncs ``directory``
    before a roll may use it."""
    try:
        os.close(os.open(precreated_segment_path(directory), os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        pass


def take_precreated_segment_file(directory: Path, base_offset: int) -> bool:
    """Rename the pre-created file to the log file of the segment at ``base_offset``; False
    (nothing changed) when there is none to take."""
    try:
        os.rename(precreated_segment_path(directory), names.log_file(directory, base_offset))
    except FileNotFoundError:
        return False
    return True


def recover_precreated_segment(directory: Path, name: str) -> None:
    """At load: delete an empty (or unreadable) pre-created file; one holding records was a
    roll's segment whose rename a power cut undid: name it by its first batch again."""
    path = precreated_segment_path(directory)
    try:
        with open(path, "rb") as file:
            base_offset = _first_batch_offset(file)
    except FileNotFoundError:
        return
    if base_offset is not None and not names.log_file(directory, base_offset).exists():
        logger.warning(
            "[%s] the segment at offset %d was found under its pre-created name (a power cut "
            "undid its rename): renamed back",
            name,
            base_offset,
        )
        os.rename(path, names.log_file(directory, base_offset))
        return
    logger.info("[%s] deleting %s: a pre-created segment never used", name, path.name)
    path.unlink(missing_ok=True)


def _first_batch_offset(file: BinaryIO) -> int | None:
    """The base offset of the file's first batch if that batch is whole and sound."""
    header = file.read(HEADER_SIZE)
    if len(header) < HEADER_SIZE:
        return None
    size = RecordBatch(header).size_in_bytes
    if size < HEADER_SIZE:
        return None
    batch = RecordBatch(header + file.read(size - HEADER_SIZE))
    return batch.base_offset if batch.is_valid() else None
