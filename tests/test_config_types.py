"""The key-table machinery: value types, validators, keys and the table's look-ups."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.config.config_def import ConfigDef
from odradek.config.config_key import ConfigKey
from odradek.config.config_type import ConfigType
from odradek.config.importance import Importance
from odradek.config.setting import Setting
from odradek.config.validator import Validator
from odradek.errors import InvalidConfigError
from odradek.int_limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

INT, LONG, DOUBLE = ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE
BOOLEAN, STRING, LIST = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.LIST


@pytest.mark.parametrize(
    ("config_type", "text", "expected"),
    [
        (INT, "42", 42),
        (INT, " -7 ", -7),
        (INT, "+5", 5),
        (INT, str(INT32_MAX), INT32_MAX),
        (INT, str(INT32_MIN), INT32_MIN),
        (LONG, str(INT64_MAX), INT64_MAX),
        (LONG, str(INT64_MIN), INT64_MIN),
        (DOUBLE, "0.5", 0.5),
        (DOUBLE, "1e3", 1000.0),
        (DOUBLE, ".25", 0.25),
        (DOUBLE, "-2", -2.0),
        (BOOLEAN, "true", True),
        (BOOLEAN, " FALSE ", False),
        (BOOLEAN, "True", True),
        (STRING, "  CreateTime ", "CreateTime"),
        (STRING, "", ""),
        (LIST, "delete", ("delete",)),
        (LIST, " compact , delete ", ("compact", "delete")),
    ],
)
def test_parses_text(config_type: ConfigType, text: str, expected: object) -> None:
    assert config_type.parse(text) == expected


@pytest.mark.parametrize(
    ("config_type", "value"),
    [
        (INT, 7),
        (LONG, -1),
        (DOUBLE, 1),
        (DOUBLE, 0.75),
        (BOOLEAN, False),
        (LIST, ["a", "b"]),
        (LIST, ("a",)),
    ],
)
def test_accepts_typed_values(config_type: ConfigType, value: object) -> None:
    parsed = config_type.parse(value)
    assert parsed == (tuple(value) if isinstance(value, list) else value)


@pytest.mark.parametrize(
    ("config_type", "value", "reason"),
    [
        (INT, "", "not a whole number"),
        (INT, "abc", "not a whole number"),
        (INT, "4.0", "not a whole number"),
        (INT, "1_000", "not a whole number"),
        (INT, "0x10", "not a whole number"),
        (INT, "1e3", "not a whole number"),
        (INT, True, "not a whole number"),
        (INT, 1.5, "not a whole number"),
        (INT, str(INT32_MAX + 1), "out of range of a 32-bit int"),
        (INT, str(INT32_MIN - 1), "out of range of a 32-bit int"),
        (LONG, str(INT64_MAX + 1), "out of range of a 64-bit long"),
        (LONG, INT64_MIN - 1, "out of range of a 64-bit long"),
        (DOUBLE, "half", "not a decimal number"),
        (DOUBLE, "1_0.5", "not a decimal number"),
        (DOUBLE, "nan", "not a decimal number"),
        (DOUBLE, "inf", "not a decimal number"),
        (DOUBLE, float("inf"), "not a finite number"),
        (DOUBLE, "1e999", "not a finite number"),
        (DOUBLE, False, "not a decimal number"),
        (BOOLEAN, "yes", "not a boolean"),
        (BOOLEAN, "1", "not a boolean"),
        (BOOLEAN, 1, "not a boolean"),
        (STRING, 5, "not a string"),
        (LIST, "", "an empty list"),
        (LIST, "  ", "an empty list"),
        (LIST, [], "an empty list"),
        (LIST, "a,,b", "a list with an empty item"),
        (LIST, "a,", "a list with an empty item"),
        (LIST, [1, 2], "not a comma-separated list"),
    ],
)
def test_rejects_what_is_not_of_the_type(
    config_type: ConfigType, value: object, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        config_type.parse(value)


@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX))
def test_long_round_trips_through_text(value: int) -> None:
    assert LONG.parse(LONG.render(value)) == value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_round_trips_through_text(value: float) -> None:
    parsed = DOUBLE.parse(DOUBLE.render(value))
    assert parsed == value and math.copysign(1, parsed) == math.copysign(1, value)


@pytest.mark.parametrize(
    ("config_type", "value", "text"),
    [
        (BOOLEAN, True, "true"),
        (BOOLEAN, False, "false"),
        (LIST, ("compact", "delete"), "compact,delete"),
    ],
)
def test_renders_as_kafka_writes_it(config_type: ConfigType, value: object, text: str) -> None:
    assert config_type.render(value) == text
    assert config_type.parse(text) == value


@pytest.mark.parametrize(
    ("validator", "good", "bad", "description"),
    [
        (Validator.at_least(14), [14, 2**40], [13, -1], "at least 14"),
        (Validator.between(0, 1), [0.0, 0.5, 1.0], [-0.01, 1.01], "at least 0 and at most 1"),
        (Validator.above(0, 1), [1e-9, 1.0], [0.0, -1.0, 1.5], "greater than 0 and at most 1"),
        (Validator.above(0), [0.1], [0, -3], "greater than 0"),
        (Validator.between(0.5, 2.5), [0.5], [2.6], "at least 0.5 and at most 2.5"),
        (Validator.one_of("a", "b"), ["a", ("a", "b")], ["c", "A", ("a", "c")], "one of: a, b"),
        (Validator.matching("[a-z]+"), ["abc"], ["", "ab1", "a b"], "matching [a-z]+"),
    ],
)
def test_validators(validator: Validator, good: list, bad: list, description: str) -> None:
    assert all(validator.is_valid(value) for value in good)
    assert not any(validator.is_valid(value) for value in bad)
    assert validator.describe() == description


def _key(**changes: object) -> ConfigKey:
    fields = dict(
        name="segment.bytes",
        type=INT,
        default=100,
        importance=Importance.MEDIUM,
        doc="Size of a segment.",
        validator=Validator.at_least(14),
    )
    fields.update(changes)
    return ConfigKey(**fields)  # type: ignore[arg-type]


def test_key_error_names_key_value_origin_and_what_is_allowed() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        _key().parse(Setting("segment.bytes", "10", "server.properties:3"))
    assert str(caught.value) == (
        "INVALID_CONFIG: invalid value '10' for segment.bytes (from server.properties:3); "
        "allowed: at least 14 (int)"
    )


def test_key_error_for_a_value_of_the_wrong_type_says_why() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        _key().parse(Setting("segment.bytes", "1GB", "--set"))
    message = str(caught.value)
    assert "'1GB'" in message and "(from --set)" in message
    assert "not a whole number (a 32-bit int)" in message
    assert "allowed: at least 14 (int)" in message


def test_list_key_validates_each_item() -> None:
    key = _key(name="cleanup.policy", type=LIST, validator=Validator.one_of("delete", "compact"))
    assert key.parse(Setting("cleanup.policy", "compact,delete", "x")) == ("compact", "delete")
    with pytest.raises(InvalidConfigError, match="allowed: each one of: delete, compact"):
        key.parse(Setting("cleanup.policy", "compact,remove", "x"))


def test_key_without_validator_accepts_any_value_of_its_type() -> None:
    key = _key(name="host", type=STRING, validator=None)
    assert key.parse(Setting("host", " 0.0.0.0 ", "x")) == "0.0.0.0"
    assert key.valid_values() == "any"
    assert _key(type=BOOLEAN, validator=None).valid_values() == "true, false"


def test_key_attribute_and_render() -> None:
    key = _key(name="log.retention.check.interval.ms", type=LONG)
    assert key.attribute == "log_retention_check_interval_ms"
    assert key.render(300000) == "300000"
    assert key.render(None) is None


def test_table_parses_settings_and_the_last_of_a_key_wins() -> None:
    table = ConfigDef([_key(), _key(name="index.interval.bytes", validator=None)])
    values = table.parse(
        [
            Setting("segment.bytes", "100", "a"),
            Setting("index.interval.bytes", "7", "a"),
            Setting("segment.bytes", "200", "b"),
        ]
    )
    assert values == {"segment.bytes": 200, "index.interval.bytes": 7}
    assert table.default("segment.bytes") == 100
    assert [key.name for key in table] == ["segment.bytes", "index.interval.bytes"]


def test_table_refuses_an_unknown_key_and_suggests_the_close_one() -> None:
    table = ConfigDef([_key()])
    with pytest.raises(InvalidConfigError) as caught:
        table.parse([Setting("segment.byte", "100", "server.properties:9")])
    assert str(caught.value) == (
        "INVALID_CONFIG: unknown config 'segment.byte' (from server.properties:9); "
        "did you mean segment.bytes?"
    )


def test_table_refuses_an_unknown_key_without_a_guess_when_none_is_close() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        ConfigDef([_key()]).parse([Setting("bootstrap.servers", "x", "--set")])
    assert "unknown config 'bootstrap.servers' (from --set)" in str(caught.value)
    assert "did you mean" not in str(caught.value)
