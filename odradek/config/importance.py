"""How much a setting matters to an operator (Kafka's ``ConfigDef.Importance``)."""

from __future__ import annotations

from enum import Enum


class Importance(Enum):
    """Orders the generated documentation: the settings most people touch come first."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
