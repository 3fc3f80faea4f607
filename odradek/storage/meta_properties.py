"""MetaProperties: which cluster and broker a log directory belongs to (``meta.properties``).

Kafka's version 0 file, written once when a directory is first used and checked at every start::

    version=0
    broker.id=0
    cluster.id=WsaQbjxXS4-d3V2gwSUpXg

Kafka in KRaft mode writes version 1, naming the node instead (and the directory)::

    version=1
    node.id=1
    directory.id=J8aAPcfLQt2bqs1JT_rRWQ
    cluster.id=WsaQbjxXS4-d3V2gwSUpXg

Both are read, so odradek starts on a copy of a Kafka broker's log directory; odradek writes
version 0 in a fresh directory and never rewrites an existing file.

A directory that names another cluster or broker holds someone else's data; starting on it
would mix two logs, so the broker refuses to start (InconsistentClusterIdError).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from odradek.config.properties_file import parse_properties
from odradek.errors import InconsistentClusterIdError, InvalidConfigError
from odradek.storage.atomic_file import write_atomically

META_PROPERTIES_FILE_NAME = "meta.properties"
CURRENT_VERSION = 0
# The key naming the broker in each version Kafka writes: 0 (ZooKeeper era), 1 (KRaft).
_BROKER_ID_KEYS = {0: "broker.id", 1: "node.id"}


@dataclass(frozen=True)
class MetaProperties:
    """The identity recorded in a log directory."""

    cluster_id: str
    broker_id: int
    version: int = CURRENT_VERSION

    @classmethod
    def read(cls, log_dir: Path) -> MetaProperties | None:
        """The identity stored in ``log_dir``, None if it has none yet. Raises OSError when the
        file cannot be read and InconsistentClusterIdError when it is malformed."""
        path = log_dir / META_PROPERTIES_FILE_NAME
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            props = {s.name: s.value for s in parse_properties(text, str(path))}
            version = int(props["version"])
            if version not in _BROKER_ID_KEYS:
                raise InconsistentClusterIdError(f"{path} has unsupported version {version}")
            broker_id = int(props[_BROKER_ID_KEYS[version]])
            cluster_id = props["cluster.id"]
        except (KeyError, ValueError, InvalidConfigError) as error:
            raise InconsistentClusterIdError(
                f"{path} is malformed ({error!r}): cannot tell which cluster and broker the "
                f"directory belongs to; repair or remove the file"
            ) from None
        return cls(cluster_id, broker_id, version)

    def write(self, log_dir: Path) -> None:
        """Record this identity in ``log_dir`` (atomically). Raises OSError."""
        text = (
            "# Identity of the broker using this log directory; do not edit.\n"
            f"version={self.version}\nbroker.id={self.broker_id}\ncluster.id={self.cluster_id}\n"
        )
        write_atomically(log_dir / META_PROPERTIES_FILE_NAME, text.encode("utf-8"))

    @classmethod
    def reconcile(
        cls,
        stored: Mapping[Path, MetaProperties | None],
        broker_id: int,
        cluster_id: str | None,
    ) -> MetaProperties:
        """The identity this broker runs with, given what each log directory stores and the
        configured ``broker.id``/``cluster.id`` (None: keep the stored one or generate one).

        Raises InconsistentClusterIdError when a directory names another broker or cluster
        than the config or than the other directories.
        """
        present = {log_dir: meta for log_dir, meta in stored.items() if meta is not None}
        for log_dir, meta in present.items():
            if meta.broker_id != broker_id:
                raise InconsistentClusterIdError(
                    f"{log_dir / META_PROPERTIES_FILE_NAME} says broker.id={meta.broker_id}, but "
                    f"this broker is configured with broker.id={broker_id}"
                )
            if cluster_id is not None and meta.cluster_id != cluster_id:
                raise InconsistentClusterIdError(
                    f"{log_dir / META_PROPERTIES_FILE_NAME} says cluster.id={meta.cluster_id}, "
                    f"but this broker is configured with cluster.id={cluster_id}"
                )
        stored_ids = {meta.cluster_id for meta in present.values()}
        if len(stored_ids) > 1:
            listing = ", ".join(f"{d}: {m.cluster_id}" for d, m in present.items())
            raise InconsistentClusterIdError(
                f"the log directories belong to different clusters ({listing})"
            )
        cluster_id = cluster_id or next(iter(stored_ids), None) or generate_cluster_id()
        return cls(cluster_id, broker_id)


def generate_cluster_id() -> str:
    """A fresh cluster id in Kafka's form: a random UUID, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
