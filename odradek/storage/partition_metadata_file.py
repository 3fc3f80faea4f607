"""PartitionMetadataFile: ``partition.metadata``, a partition directory's topic id (Kafka's
format: ``version: 0`` then ``topic_id: <id>``, the id in Kafka's text form, URL-safe base64
without padding)."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

FILE_NAME = "partition.metadata"
VERSION = 0


def topic_id_text(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_topic_id(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return uuid.UUID(bytes=raw)


def read_topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id stored in ``directory``, None when there is no (readable) file."""
    try:
        lines = (directory / FILE_NAME).read_text().splitlines()
    except FileNotFoundError:
        return None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    if fields.get("version") != str(VERSION) or "topic_id" not in fields:
        return None
    try:
        return parse_topic_id(fields["topic_id"].strip())
    except ValueError:
        return None


def write_topic_id(directory: Path, topic_id: uuid.UUID) -> None:
    """Write the file whole or not at all: a temporary file, fsync'ed, renamed over it."""
    path = directory / FILE_NAME
    temporary = directory / (FILE_NAME + ".tmp")
    data = f"version: {VERSION}\ntopic_id: {topic_id_text(topic_id)}\n".encode()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    directory_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)
