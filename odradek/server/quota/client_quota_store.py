"""ClientQuotaStore: the client quotas of the broker, in ``__client_quotas.json`` in its log
directory.

Written atomically on every change, like the ACLs and SCRAM credentials; the broker and
``odradek quotas`` share the file, and each sees the other's changes (the file is stat'ed and
reloaded when it changed).
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from odradek.server.quota.client_quota_entity import QUOTA_KEYS, ClientQuotaEntity
from odradek.storage.atomic_file import write_atomically

QUOTAS_FILE = "__client_quotas.json"
FORMAT_VERSION = 1

Quotas = dict[ClientQuotaEntity, dict[str, float]]
QuotaChange = tuple[ClientQuotaEntity, Mapping[str, float | None]]
"""An entity and, per quota key, its new value (None removes it)."""


def validate_quota(key: str, value: float | None) -> None:
    """Raises ValueError for an unknown key or a value that is not a positive number."""
    if key not in QUOTA_KEYS:
        raise ValueError(f"unknown quota {key!r}; known: {', '.join(QUOTA_KEYS)}")
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number, not {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{key} must be a positive number, not {value}")


class ClientQuotaStore:
    """The quotas kept in ``directory/__client_quotas.json``."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / QUOTAS_FILE
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._quotas: Quotas = {}
        self.generation = 0
        """Grows whenever the quotas read or written change."""

    def quotas(self) -> Quotas:
        """Every entity's quotas (a copy)."""
        with self._lock:
            self._refresh()
            return {entity: dict(values) for entity, values in self._quotas.items()}

    def refresh(self) -> bool:
        """Reload if the file changed; whether the quotas changed."""
        with self._lock:
            before = self.generation
            self._refresh()
            return self.generation != before

    def alter(self, changes: Iterable[QuotaChange]) -> None:
        """Apply ``changes`` (validated first: nothing is applied if one is invalid, raising
        ValueError); durable on return."""
        changes = list(changes)
        for _, values in changes:
            for key, value in values.items():
                validate_quota(key, value)
        with self._lock:
            self._refresh()
            quotas = {entity: dict(values) for entity, values in self._quotas.items()}
            for entity, values in changes:
                current = quotas.setdefault(entity, {})
                for key, value in values.items():
                    if value is None:
                        current.pop(key, None)
                    else:
                        current[key] = float(value)
                if not current:
                    del quotas[entity]
            self._write(quotas)

    def _refresh(self) -> None:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            if self._quotas or self._stamp is not None:
                self._quotas, self._stamp = {}, None
                self.generation += 1
            return
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        if stamp != self._stamp:
            self._quotas = _parse(self.path.read_bytes(), self.path)
            self._stamp = stamp
            self.generation += 1

    def _write(self, quotas: Quotas) -> None:
        document = {
            "version": FORMAT_VERSION,
            "quotas": [
                {"entity": entity.as_mapping(), "quotas": values}
                for entity, values in sorted(quotas.items(), key=lambda item: str(item[0]))
            ],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(document, indent=1).encode() + b"\n")
        self._quotas, self._stamp = quotas, None
        self.generation += 1


def _parse(data: bytes, path: Path) -> Quotas:
    try:
        quotas: Quotas = {}
        for entry in json.loads(data)["quotas"]:
            values = {str(key): float(value) for key, value in entry["quotas"].items()}
            for key, value in values.items():
                validate_quota(key, value)
            quotas[ClientQuotaEntity.from_mapping(entry["entity"])] = values
        return quotas
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path} is not a client quota file: {error}") from None
