"""A table of config keys (Kafka's ``ConfigDef``): look-up, parsing and "did you mean"."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator

from odradek.config.config_key import ConfigKey
from odradek.config.setting import Setting
from odradek.errors import InvalidConfigError

_SUGGESTION_CUTOFF = 0.8


class ConfigDef:
    """The keys one kind of config accepts (topic or broker), in definition order."""

    def __init__(self, keys: Iterable[ConfigKey]) -> None:
        self._keys = {key.name: key for key in keys}

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __iter__(self) -> Iterator[ConfigKey]:
        return iter(self._keys.values())

    def default(self, name: str) -> object:
        """The default of key ``name`` (dataclass fields take their defaults from here)."""
        return self._keys[name].default

    def closest(self, name: str) -> str | None:
        """The known key ``name`` is most likely a misspelling of, if any is close enough."""
        matches = difflib.get_close_matches(name, self._keys, n=1, cutoff=_SUGGESTION_CUTOFF)
        return matches[0] if matches else None

    def parse(self, settings: Iterable[Setting]) -> dict[str, object]:
        """Typed values by key name; a later setting of a key replaces an earlier one.

        Raises InvalidConfigError for an unknown key or an invalid value, naming its origin.
        """
        values: dict[str, object] = {}
        for setting in settings:
            key = self._keys.get(setting.name)
            if key is None:
                raise self._unknown(setting)
            values[setting.name] = key.parse(setting)
        return values

    def _unknown(self, setting: Setting) -> InvalidConfigError:
        suggestion = self.closest(setting.name)
        hint = f"; did you mean {suggestion}?" if suggestion else ""
        return InvalidConfigError(f"unknown config {setting.name!r} (from {setting.origin}){hint}")
