"""odradek's error table (odradek/errors.py) against Kafka's own
(``org.apache.kafka.common.protocol.Errors``, read from the reference Kafka's jar): every code
odradek defines has Kafka's name and number, so no client ever reads one error as another (as
UNKNOWN_LEADER_EPOCH sent as 76, which is UNSUPPORTED_COMPRESSION_TYPE, once was)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_reference import kafka_classpath, run_java

from odradek import errors
from odradek.errors import KafkaError

ERROR_CODES_PROGRAM = Path(__file__).parent / "java" / "ErrorCodes.java"
PROTOCOL_DOC = Path(__file__).parents[1] / "docs" / "protocol.md"


def odradek_errors() -> Iterator[type[KafkaError]]:
    """Every KafkaError class odradek defines, at any depth."""
    pending = list(KafkaError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        yield cls


def odradek_table() -> dict[int, str]:
    return {cls.code: cls.error_name for cls in odradek_errors()}


def test_each_code_has_one_name_and_one_class_on_the_wire() -> None:
    names: dict[int, set[str]] = {}
    for cls in odradek_errors():
        names.setdefault(cls.code, set()).add(cls.error_name)
        assert errors.error_for_code(cls.code).code == cls.code, cls
        assert errors.error_name_for(cls.code) == cls.error_name, cls
    assert {code: n for code, n in names.items() if len(n) > 1} == {}


@pytest.mark.reference_kafka
def test_every_code_odradek_defines_is_kafkas() -> None:
    done = run_java(kafka_classpath(), str(ERROR_CODES_PROGRAM), [])
    assert done.returncode == 0, done.stderr[-3000:]
    kafka = {int(code): name for code, name in (line.split() for line in done.stdout.splitlines())}
    assert kafka[75] == "UNKNOWN_LEADER_EPOCH"  # the program reads the table it should
    ours = odradek_table()
    assert {
        code: (name, kafka.get(code)) for code, name in ours.items() if kafka.get(code) != name
    } == {}


def test_the_protocol_docs_error_tables_are_odradeks() -> None:
    """docs/protocol.md section 4 lists codes with names; each is odradek's (so Kafka's)."""
    ours = odradek_table()
    rows = re.findall(r"^\| (-?\d+) \| ([A-Z_]+) \|", PROTOCOL_DOC.read_text(), re.MULTILINE)
    assert rows
    assert {
        int(code): name for code, name in rows if int(code) and ours.get(int(code)) != name
    } == {}
