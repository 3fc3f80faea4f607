"""One described setting, as DescribeConfigs returns it (Kafka's ``ConfigEntry``)."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.config.config_source import ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """A setting's effective value as text (None: not set), where it came from, and its doc."""

    name: str
    value: str | None
    source: ConfigSource
    doc: str

    @property
    def is_default(self) -> bool:
        """True when nothing set this value (the v0 DescribeConfigs flag)."""
        return self.source is ConfigSource.DEFAULT_CONFIG
