"""CredentialStore: the SCRAM credentials of the broker's users, in its log directory.

The file ``__scram_credentials.json`` holds, per user and mechanism, the salt, the iteration
count and the derived keys (never a password). Every change rewrites it atomically (a crash
leaves the old or the new file). The broker and ``odradek users`` share the file: a change made
by either is seen by the other at its next look (the broker stats the file before each
authentication and reloads it when it changed).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from pathlib import Path

from odradek.security.scram_credential import SCRAM_MECHANISMS, ScramCredential
from odradek.storage.atomic_file import write_atomically

logger = logging.getLogger(__name__)

CREDENTIALS_FILE = "__scram_credentials.json"
FORMAT_VERSION = 1


class CredentialStore:
    """Users' SCRAM credentials, kept in ``directory/__scram_credentials.json``."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CREDENTIALS_FILE
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        with self._lock:
            self._refresh()
            return self._users.get(user, {}).get(mechanism)

    def credentials(self, user: str) -> dict[str, ScramCredential]:
        with self._lock:
            self._refresh()
            return dict(self._users.get(user, {}))

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user's credentials by mechanism."""
        with self._lock:
            self._refresh()
            return {user: dict(by_mechanism) for user, by_mechanism in self._users.items()}

    def upsert(self, user: str, credential: ScramCredential) -> None:
        """Add or replace ``user``'s credential of its mechanism; durable on return."""
        if not user:
            raise ValueError("a user name cannot be empty")
        with self._lock:
            self._refresh()
            users = {name: dict(by_mechanism) for name, by_mechanism in self._users.items()}
            users.setdefault(user, {})[credential.mechanism] = credential
            self._write(users)

    def delete(self, user: str, mechanism: str | None = None) -> bool:
        """Remove ``user``'s credential of ``mechanism`` (None: all); False when none was."""
        with self._lock:
            self._refresh()
            users = {name: dict(by_mechanism) for name, by_mechanism in self._users.items()}
            existing = users.get(user, {})
            removed = (
                list(existing) if mechanism is None else [m for m in existing if m == mechanism]
            )
            if not removed:
                return False
            for name in removed:
                del existing[name]
            if not existing:
                users.pop(user, None)
            self._write(users)
            return True

    def _refresh(self) -> None:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._users, self._stamp = {}, None
            return
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        if stamp == self._stamp:
            return
        self._users = _parse(self.path.read_bytes(), self.path)
        self._stamp = stamp

    def _write(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        document = {
            "version": FORMAT_VERSION,
            "users": {
                user: {
                    mechanism: {
                        "salt": _b64(c.salt),
                        "stored_key": _b64(c.stored_key),
                        "server_key": _b64(c.server_key),
                        "iterations": c.iterations,
                    }
                    for mechanism, c in sorted(by_mechanism.items())
                }
                for user, by_mechanism in sorted(users.items())
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(document, indent=1).encode() + b"\n")
        self._users, self._stamp = users, None


def _parse(data: bytes, path: Path) -> dict[str, dict[str, ScramCredential]]:
    """The file's users; a file that cannot be read as such raises ValueError naming it (the
    broker then refuses every SCRAM login rather than guess)."""
    try:
        document = json.loads(data)
        users = {}
        for user, by_mechanism in document["users"].items():
            users[user] = {
                mechanism: ScramCredential(
                    mechanism,
                    base64.b64decode(entry["salt"]),
                    base64.b64decode(entry["stored_key"]),
                    base64.b64decode(entry["server_key"]),
                    int(entry["iterations"]),
                )
                for mechanism, entry in by_mechanism.items()
                if mechanism in SCRAM_MECHANISMS
            }
        return users
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path} is not a credentials file: {error}") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
