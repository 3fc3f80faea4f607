"""docs/config.md is generated from the key tables and must not drift from them."""

from __future__ import annotations

from pathlib import Path

from odradek.config import docs
from odradek.config.broker_configs import BROKER_CONFIG_DEF
from odradek.config.topic_configs import TOPIC_CONFIG_DEF

DOCS_FILE = Path(__file__).resolve().parent.parent / "docs" / "config.md"


def test_docs_config_md_is_up_to_date() -> None:
    current = DOCS_FILE.read_text(encoding="utf-8") if DOCS_FILE.exists() else ""
    assert current == docs.render(), f"docs/config.md is stale; run: {docs.REGENERATE}"


def test_docs_list_every_setting_with_its_default() -> None:
    topic_section, broker_section = docs.render().split("## Broker settings")
    sections = ((topic_section, TOPIC_CONFIG_DEF), (broker_section, BROKER_CONFIG_DEF))
    for section, config_def in sections:
        rows = section.splitlines()
        for key in config_def:
            row = next(line for line in rows if line.startswith(f"| `{key.name}` |"))
            assert key.doc in row
            assert (key.render(key.default) or "unset") in row


def test_docs_show_durations_and_sizes_readably() -> None:
    rendered = docs.render()
    assert "| `retention.ms` | long | 604800000 (7 days) |" in rendered
    assert "| `segment.bytes` | int | 1073741824 (1 GiB) |" in rendered
    assert "| `log.retention.check.interval.ms` | long | 300000 (5 minutes) |" in rendered
    assert "| `flush.ms` | long | 9223372036854775807 |" in rendered
