"""`odradek serve`: settings from flags, --set, a config file and defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from odradek.cli import serve as serve_module
from odradek.cli.main import cli
from odradek.config.broker_config import BrokerConfig


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[BrokerConfig]:
    """The configs `serve` would start a broker with (no broker is started)."""
    configs: list[BrokerConfig] = []

    async def record(config: BrokerConfig) -> None:
        configs.append(config)

    monkeypatch.setattr(serve_module, "_run", record)
    monkeypatch.setattr(serve_module, "_configure_logging", lambda config: None)
    return configs


def test_defaults(started: list[BrokerConfig]) -> None:
    result = CliRunner().invoke(cli, ["serve"], env={})
    assert result.exit_code == 0, result.output
    (config,) = started
    assert config.log_dir_paths == (Path("./data"),)
    assert (config.host, config.port, config.metrics_port) == ("127.0.0.1", 9092, 9644)


def test_flags_and_set_override_the_config_file(
    started: list[BrokerConfig], tmp_path: Path
) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("log.dirs=/from/file\nport=1111\nnum.partitions=3\nlog.level=DEBUG\n")
    arguments = [
        "serve",
        "--config",
        str(properties),
        "--port",
        "2222",
        "--metrics-port",
        "3333",
        "--set",
        "num.partitions=5",
        "--set",
        "log.retention.hours=1",
        "--log-level",
        "warning",
    ]
    result = CliRunner().invoke(cli, arguments, env={})
    assert result.exit_code == 0, result.output
    (config,) = started
    assert config.log_dir_paths == (Path("/from/file"),)
    assert (config.port, config.metrics_port) == (2222, 3333)
    assert (config.num_partitions, config.log_retention_hours) == (5, 1)
    assert config.log_level == "WARNING"


def test_data_dir_flag_wins(started: list[BrokerConfig], tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["serve", "--data-dir", str(tmp_path)], env={})
    assert result.exit_code == 0, result.output
    assert started[0].log_dir_paths == (tmp_path,)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--set", "num.partitions"], "is not KEY=VALUE"),
        (["--set", "num.partitions=many"], "num.partitions"),
        (["--set", "no.such.setting=1"], "no.such.setting"),
        (["--port", "70000"], "port"),
    ],
)
def test_bad_settings_are_refused_before_starting(
    started: list[BrokerConfig], arguments: list[str], message: str
) -> None:
    result = CliRunner().invoke(cli, ["serve", *arguments], env={})
    assert result.exit_code != 0
    assert message in result.output
    assert not started
