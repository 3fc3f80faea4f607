"""Loading the broker config: properties files, environment, --set, and their precedence."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from odradek.config.broker_config_loader import env_settings, env_variable, load_broker_config
from odradek.config.properties_file import parse_properties, read_properties
from odradek.errors import InvalidConfigError


def _props(text: str) -> dict[str, str]:
    return {setting.name: setting.value for setting in parse_properties(text, "f")}  # type: ignore[misc]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a:1", {"a": "1"}),
        ("a 1", {"a": "1"}),
        ("a\t=\t1", {"a": "1"}),
        ("  a =  1", {"a": "1"}),
        ("a = 1 ", {"a": "1 "}),
        ("a==1", {"a": "=1"}),
        ("a = = 1", {"a": "= 1"}),
        ("a : b = c", {"a": "b = c"}),
        ("a=", {"a": ""}),
        ("a", {"a": ""}),
        ("a\\=b=c", {"a=b": "c"}),
        ("a\\ b c", {"a b": "c"}),
        ("a\\:b:c", {"a:b": "c"}),
        ("a=\\t\\n\\u00e9\\q", {"a": "\t\né" + "q"}),
        ("a=c:\\\\data", {"a": "c:\\data"}),
        ("a=x#y", {"a": "x#y"}),
        ("a=one\ntwo=2", {"a": "one", "two": "2"}),
        ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
        ("a=1\na=2", {"a": "2"}),
        ("a=é", {"a": "é"}),
    ],
)
def test_properties_lines(text: str, expected: dict[str, str]) -> None:
    assert _props(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# comment\n! also\n\n   \n  # indented\na=1", {"a": "1"}),
        ("a=1,\\\n    2,\\\n    3", {"a": "1,2,3"}),
        ("a=1\\\n# not a comment\nb=2", {"a": "1# not a comment", "b": "2"}),
        ("a=1\\\n\nb=2", {"a": "1", "b": "2"}),
        ("a=ends\\\\\nb=2", {"a": "ends\\", "b": "2"}),
        ("a=odd\\\\\\\n  more", {"a": "odd\\more"}),
        ("a=last\\", {"a": "last"}),
        ("# a=1 \\\nb=2", {"b": "2"}),
        ("log.dirs=/a,\\\r\n  /b", {"log.dirs": "/a,/b"}),
    ],
)
def test_properties_comments_and_continuations(text: str, expected: dict[str, str]) -> None:
    assert _props(text) == expected


def test_properties_settings_know_their_line() -> None:
    settings = parse_properties("# head\n\na=1\nb=2,\\\n  3\nc=4\n", "server.properties")
    assert [(s.name, s.origin) for s in settings] == [
        ("a", "server.properties:3"),
        ("b", "server.properties:4"),
        ("c", "server.properties:6"),
    ]


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(InvalidConfigError, match="malformed \\\\uHHHH escape at f:2"):
        parse_properties("a=1\nb=\\u12g4", "f")


def test_missing_config_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(InvalidConfigError, match=f"cannot read config file {missing}"):
        read_properties(missing)


def test_undecodable_config_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"host=caf\xe9\n")
    with pytest.raises(InvalidConfigError, match="cannot read config file"):
        read_properties(path)


def test_file_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "broker.id=1\n\nlog.segment.bytes=10\n")
    with pytest.raises(InvalidConfigError) as caught:
        load_broker_config(path)
    assert f"invalid value '10' for log.segment.bytes (from {path}:3)" in str(caught.value)


def test_unknown_key_in_file_names_the_line_and_suggests(tmp_path: Path) -> None:
    path = _write(tmp_path, "log.retention.hour=1\n")
    with pytest.raises(InvalidConfigError) as caught:
        load_broker_config(path)
    assert f"unknown config 'log.retention.hour' (from {path}:1)" in str(caught.value)
    assert "did you mean log.retention.hours?" in str(caught.value)


def test_a_kafka_style_server_properties_loads(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "############################# Server Basics #############################\n"
        "broker.id=3\n"
        "# A comma separated list of directories\n"
        "log.dirs=/var/lib/odradek/a,/var/lib/odradek/b\n"
        "num.partitions=4\n"
        "log.retention.hours=72\n"
        "log.segment.bytes=1073741824\n"
        "log.retention.check.interval.ms=300000\n",
    )
    config = load_broker_config(path)
    assert (config.broker_id, config.num_partitions) == (3, 4)
    assert config.log_dir_paths == (Path("/var/lib/odradek/a"), Path("/var/lib/odradek/b"))
    assert config.log_config().retention_ms == 72 * 3600 * 1000


def test_nothing_given_is_all_defaults() -> None:
    config = load_broker_config()
    assert config.port == 9092 and config.static_keys == frozenset()


def test_precedence_is_defaults_file_env_then_set(tmp_path: Path) -> None:
    path = _write(tmp_path, "port=1001\nmetrics.port=2001\nnum.partitions=3\n")
    env = {"ODRADEK_PORT": "1002", "ODRADEK_METRICS_PORT": "2002"}
    config = load_broker_config(path, env, {"port": "1003"})
    assert config.port == 1003
    assert config.metrics_port == 2002
    assert config.num_partitions == 3
    assert config.broker_id == 0
    assert config.static_keys == {"port", "metrics.port", "num.partitions"}


def test_retention_units_keep_their_precedence_across_sources(tmp_path: Path) -> None:
    path = _write(tmp_path, "log.retention.ms=1000\n")
    config = load_broker_config(path, {"ODRADEK_LOG_RETENTION_HOURS": "5"})
    assert config.log_config().retention_ms == 1000


def test_env_maps_variables_to_keys() -> None:
    settings = env_settings(
        {"ODRADEK_LOG_RETENTION_MS": "1000", "ODRADEK_LOG_CLEANER_ENABLE": "false", "PATH": "/bin"}
    )
    assert [(s.name, s.value, s.origin) for s in settings] == [
        ("log.cleaner.enable", "false", "environment variable ODRADEK_LOG_CLEANER_ENABLE"),
        ("log.retention.ms", "1000", "environment variable ODRADEK_LOG_RETENTION_MS"),
    ]
    assert env_variable("log.retention.ms") == "ODRADEK_LOG_RETENTION_MS"


def test_env_errors_name_the_variable() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        load_broker_config(env={"ODRADEK_NUM_PARTITIONS": "many"})
    assert "for num.partitions (from environment variable ODRADEK_NUM_PARTITIONS)" in str(
        caught.value
    )


def test_set_errors_name_set() -> None:
    with pytest.raises(InvalidConfigError, match="for port \\(from --set\\)"):
        load_broker_config(overrides={"port": "http"})


def test_unrelated_prefixed_variables_are_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="odradek.config.broker_config_loader"):
        env = {"ODRADEK_BOOTSTRAP": "localhost:9092", "ODRADEK_PORT": "1"}
        config = load_broker_config(env=env)
    assert config.port == 1
    assert "ignoring environment variable ODRADEK_BOOTSTRAP" in caplog.text


def test_a_misspelt_prefixed_variable_is_an_error_with_the_right_name() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        load_broker_config(env={"ODRADEK_LOG_RETENTON_MS": "1000"})
    message = str(caught.value)
    assert "environment variable ODRADEK_LOG_RETENTON_MS names no broker config" in message
    assert "did you mean ODRADEK_LOG_RETENTION_MS (log.retention.ms)?" in message


def test_unknown_set_key_is_an_error() -> None:
    with pytest.raises(InvalidConfigError, match="unknown config 'segment.bytes' \\(from --set\\)"):
        load_broker_config(overrides={"segment.bytes": "1024"})
