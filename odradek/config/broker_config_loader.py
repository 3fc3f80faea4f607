"""Loading the broker's config: defaults < properties file < environment < ``--set``.

Environment variables: ``ODRADEK_`` then the key in upper case with ``_`` for ``.``
(``ODRADEK_LOG_RETENTION_MS=1000`` sets ``log.retention.ms``). Other programs share the prefix
(``ODRADEK_BOOTSTRAP`` is a client setting), so a prefixed variable that names no broker key is
ignored with a warning, unless it is one typo away from a broker key (close by
``ConfigDef.closest``): then it is an error that names the key it probably meant.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from odradek.config.broker_config import BrokerConfig
from odradek.config.broker_configs import BROKER_CONFIG_DEF
from odradek.config.properties_file import read_properties
from odradek.config.setting import Setting
from odradek.errors import InvalidConfigError

logger = logging.getLogger(__name__)

ENV_PREFIX = "ODRADEK_"
OVERRIDE_ORIGIN = "--set"


def load_broker_config(
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """The broker config from its sources, each overriding the ones before it.

    ``env`` is the environment to read (pass ``os.environ``; None reads none) and ``overrides``
    the CLI's ``--set key=value`` pairs. Raises InvalidConfigError naming the bad setting's
    source: file and line, environment variable, or ``--set``.
    """
    settings = [
        *(read_properties(config_file) if config_file is not None else []),
        *env_settings(env or {}),
        *(Setting(name, value, OVERRIDE_ORIGIN) for name, value in (overrides or {}).items()),
    ]
    return BrokerConfig.from_settings(settings)


def env_settings(env: Mapping[str, str]) -> list[Setting]:
    """The broker settings among ``env``'s ``ODRADEK_`` variables (see the module doc)."""
    settings = []
    for variable, value in sorted(env.items()):
        if not variable.startswith(ENV_PREFIX):
            continue
        name = variable[len(ENV_PREFIX) :].lower().replace("_", ".")
        if name in BROKER_CONFIG_DEF:
            settings.append(Setting(name, value, f"environment variable {variable}"))
            continue
        suggestion = BROKER_CONFIG_DEF.closest(name)
        if suggestion is not None:
            raise InvalidConfigError(
                f"environment variable {variable} names no broker config; did you mean "
                f"{env_variable(suggestion)} ({suggestion})?"
            )
        logger.warning("ignoring environment variable %s: %s is no broker config", variable, name)
    return settings


def env_variable(name: str) -> str:
    """The environment variable that sets broker key ``name``."""
    return ENV_PREFIX + name.upper().replace(".", "_")
