"""docs/kafka-compatibility.md's tables of every Kafka API and config key cannot drift from the
code: the generated section equals what tools/kafka-compatibility/kafka_compatibility.py
renders, and, read back from the doc itself, every row agrees with the versions the Kafka
listener advertises and serves (odradek/protocol/kafka/api_versions.py) and with the topic and
broker keys odradek defines (odradek/config). The Kafka side (kafka-4.4.tsv) is checked against
the reference broker in tests/test_kafka_reference_model.py."""

from __future__ import annotations

import re

import pytest
from kafka_reference import compatibility_tool

from odradek.config.broker_configs import BROKER_CONFIG_DEF
from odradek.config.topic_configs import TOPIC_CONFIG_DEF
from odradek.protocol.kafka.api_versions import ADVERTISED

compatibility = compatibility_tool()
DOC = compatibility.DOC.read_text()


def _rows(heading: str) -> list[list[str]]:
    """The cells of the table under ``### heading`` in the generated section."""
    section = compatibility.documented(DOC)
    part = section.split(f"### {heading}\n", 1)[1].split("\n### ", 1)[0]
    lines = [line for line in part.splitlines() if line.startswith("| ")][1:]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


def test_the_generated_tables_are_up_to_date() -> None:
    assert compatibility.documented(DOC) == compatibility.render(), (
        "docs/kafka-compatibility.md is stale: run .venv/bin/python "
        "tools/kafka-compatibility/kafka_compatibility.py write"
    )


def _versions(text: str) -> tuple[int, int]:
    low, _, high = text.removeprefix("v").partition("-")
    return int(low), int(high or low)


def test_every_api_row_says_what_the_kafka_listener_serves() -> None:
    rows = {int(re.search(r"\((\d+)\)$", row[0]).group(1)): row for row in _rows("APIs")}
    snapshot = compatibility.load_snapshot()
    assert set(rows) == set(snapshot.apis) | set(ADVERTISED), "an API without its row"
    for key, row in rows.items():
        served = ADVERTISED.get(key)
        if served is None:
            assert row[2] == "not served", row
            continue
        match = re.fullmatch(r"(v[\d-]+)(?: \((v[\d-]+) advertised\))?", row[2])
        assert match, row
        assert _versions(match.group(1)) == (served.min_served, served.max_version), row
        advertised = _versions(match.group(2)) if match.group(2) else _versions(match.group(1))
        assert advertised == (served.min_version, served.max_version), row


@pytest.mark.parametrize(
    ("heading", "definitions", "kafkas"),
    [
        ("Topic configs", TOPIC_CONFIG_DEF, "topic_keys"),
        ("Broker configs", BROKER_CONFIG_DEF, "broker_keys"),
    ],
)
def test_every_config_row_says_whether_odradek_takes_the_key(heading, definitions, kafkas) -> None:
    rows = {row[0].strip("`"): row[1] for row in _rows(heading)}
    ours = {key.name for key in definitions}
    kafka = getattr(compatibility.load_snapshot(), kafkas)
    assert set(rows) == ours | kafka, "a key without its row"
    for name, status in rows.items():
        if name not in ours:
            assert status == "refused", (name, status)
        else:
            assert status != "refused", (name, status)
            assert status == "odradek's own" or name in kafka, (name, status)


def test_every_remark_names_a_row_and_ignored_keys_are_accepted() -> None:
    remarks = compatibility.load_remarks()
    api_names = {re.sub(r" \(\d+\)$", "", row[0]) for row in _rows("APIs")}
    assert set(remarks["api"]) <= api_names, set(remarks["api"]) - api_names
    for scope, definitions, heading in (
        ("topic-config", TOPIC_CONFIG_DEF, "Topic configs"),
        ("broker-config", BROKER_CONFIG_DEF, "Broker configs"),
    ):
        keys = {row[0].strip("`") for row in _rows(heading)}
        assert set(remarks.get(scope, {})) <= keys, set(remarks[scope]) - keys
        for name, remark in remarks.get(scope, {}).items():
            if remark.get("status") == "ignored":
                assert name in definitions, f"{name} is marked ignored but odradek refuses it"


def test_the_doc_no_longer_contradicts_itself() -> None:
    """It said "no ACLs yet" and "no groups yet" beside the rows of ACL and group APIs."""
    assert "no ACLs yet" not in DOC
    assert "no groups yet" not in DOC
