"""Crash-safe replacement of small metadata files (checkpoints, meta.properties, topic configs).

``write_atomically`` writes ``NAME.tmp``, fsyncs it, renames it over ``NAME`` and fsyncs the
directory, so after a crash at any point the file holds either its old or its new content.
"""

from __future__ import annotations

import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def write_atomically(path: Path, data: bytes, *, sync_directory: bool = True) -> None:
    """Replace ``path`` with ``data`` durably. Raises OSError; the old file is then intact.
    Without ``sync_directory`` the caller fsyncs the directory (the new content is whole
    either way, but the old may come back after a power cut until then)."""
    tmp_path = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp_path, path)
    if sync_directory:
        fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Make renames and unlinks in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file_if_exists(path: Path) -> None:
    """Make a file's content and size durable by name (its writer may have closed it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
