"""One entry of a config table: a Kafka setting's name, type, default, constraint and meaning."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.config.config_type import ConfigType
from odradek.config.importance import Importance
from odradek.config.setting import Setting
from odradek.config.validator import Validator
from odradek.errors import InvalidConfigError


@dataclass(frozen=True)
class ConfigKey:
    """A setting as Kafka's ``ConfigDef.ConfigKey`` defines it.

    ``default`` is a typed value; None means "not set" (a key whose value is then taken from
    another, e.g. ``log.roll.ms`` falls back to ``log.roll.hours``).
    """

    name: str
    type: ConfigType
    default: object
    importance: Importance
    doc: str
    validator: Validator | None = None

    @property
    def attribute(self) -> str:
        """The dataclass attribute holding this key: the name with dots as underscores."""
        return self.name.replace(".", "_")

    def valid_values(self) -> str:
        """The values this key accepts, in words (docs and error messages)."""
        if self.validator is not None:
            each = "each " if self.type is ConfigType.LIST else ""
            return each + self.validator.describe()
        return "true, false" if self.type is ConfigType.BOOLEAN else "any"

    def parse(self, setting: Setting) -> object:
        """The typed, validated value of ``setting``.

        Raises InvalidConfigError naming the key, the value, its origin and what is allowed.
        """
        try:
            value = self.type.parse(setting.value)
        except ValueError as error:
            raise self._invalid(setting, str(error)) from None
        if self.validator is not None and not self.validator.is_valid(value):
            raise self._invalid(setting)
        return value

    def render(self, value: object) -> str | None:
        """The text form of a typed value of this key (None stays None: not set)."""
        return None if value is None else self.type.render(value)

    def _invalid(self, setting: Setting, reason: str = "") -> InvalidConfigError:
        because = f": {reason}" if reason else ""
        return InvalidConfigError(
            f"invalid value {setting.value!r} for {self.name} (from {setting.origin}){because}; "
            f"allowed: {self.valid_values()} ({self.type.value})"
        )
