"""AclStore: the ACL bindings of the broker, in ``__acls.json`` in its log directory.

Written atomically on every change; the broker and ``odradek acls`` share the file, and each
sees the other's changes at its next look (the file is stat'ed and reloaded when changed).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from odradek.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.storage.atomic_file import write_atomically

ACLS_FILE = "__acls.json"
FORMAT_VERSION = 1


class AclStore:
    """The ACL bindings kept in ``directory/__acls.json``."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / ACLS_FILE
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._bindings: tuple[AclBinding, ...] = ()

    def bindings(self) -> tuple[AclBinding, ...]:
        with self._lock:
            self._refresh()
            return self._bindings

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Add ``bindings`` (those already present stay once); durable on return."""
        with self._lock:
            self._refresh()
            current = list(self._bindings)
            current += [b for b in dict.fromkeys(bindings) if b not in set(current)]
            self._write(tuple(current))

    def remove(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove the bindings each filter matches; what each one removed, in order."""
        with self._lock:
            self._refresh()
            removed_by_filter = []
            remaining = list(self._bindings)
            for acl_filter in filters:
                removed = [b for b in self._bindings if acl_filter.matches(b)]
                removed_by_filter.append(removed)
                remaining = [b for b in remaining if not acl_filter.matches(b)]
            if len(remaining) != len(self._bindings):
                self._write(tuple(remaining))
            return removed_by_filter

    def _refresh(self) -> None:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._bindings, self._stamp = (), None
            return
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        if stamp != self._stamp:
            self._bindings = _parse(self.path.read_bytes(), self.path)
            self._stamp = stamp

    def _write(self, bindings: tuple[AclBinding, ...]) -> None:
        document = {
            "version": FORMAT_VERSION,
            "acls": [
                {
                    "resource_type": b.resource_type.name,
                    "resource_name": b.resource_name,
                    "pattern_type": b.pattern_type.name,
                    "principal": b.principal,
                    "host": b.host,
                    "operation": b.operation.name,
                    "permission": b.permission.name,
                }
                for b in bindings
            ],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(document, indent=1).encode() + b"\n")
        self._bindings, self._stamp = bindings, None


def _parse(data: bytes, path: Path) -> tuple[AclBinding, ...]:
    try:
        return tuple(
            AclBinding(
                ResourceType[entry["resource_type"]],
                entry["resource_name"],
                PatternType[entry["pattern_type"]],
                entry["principal"],
                entry["host"],
                AclOperation[entry["operation"]],
                PermissionType[entry["permission"]],
            )
            for entry in json.loads(data)["acls"]
        )
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not an ACL file: {error}") from None
