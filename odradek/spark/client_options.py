"""Client settings as ``kafka.<Kafka config name>`` options, as Spark's Kafka source takes them.

``kafka.compression.type=zstd`` becomes the client setting ``compression_type="zstd"``, typed
after the setting's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from odradek.client.config import ClientConfig
from odradek.spark.option_values import parse_bool, parse_int

PREFIX = "kafka."


def client_configs(options: Mapping[str, str], config_class: type[ClientConfig]) -> dict[str, Any]:
    """The ``kafka.*`` options as keyword arguments for a client configured by ``config_class``."""
    defaults = {field.name: field.default for field in fields(config_class)}
    configs: dict[str, Any] = {}
    for option, text in options.items():
        if not option.startswith(PREFIX):
            continue
        name = option.removeprefix(PREFIX).replace(".", "_")
        if name not in defaults:
            raise ValueError(f"option {option} is not a setting of {config_class.__name__}")
        configs[name] = _typed(text, defaults[name], option)
    return configs


def take_bootstrap(options: Mapping[str, str], configs: dict[str, Any]) -> str:
    """The ``bootstrap`` option, else ``kafka.bootstrap.servers`` (taken out of ``configs``)."""
    kafka_bootstrap = configs.pop("bootstrap_servers", None)
    bootstrap = options.get("bootstrap") or kafka_bootstrap
    if not bootstrap:
        raise ValueError("option bootstrap (the broker's host:port) is required")
    return bootstrap


def common_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """The settings in ``configs`` that every client takes (for the admin client)."""
    common = {field.name for field in fields(ClientConfig)}
    return {name: value for name, value in configs.items() if name in common}


def _typed(text: str, default: Any, option: str) -> Any:
    if isinstance(default, bool):
        return parse_bool(text, option)
    if isinstance(default, int):
        return parse_int(text, option)
    return text
