"""Renders docs/config.md from the key tables (run ``REGENERATE`` to update it)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from odradek.config.broker_config_loader import ENV_PREFIX, env_variable
from odradek.config.broker_configs import BROKER_CONFIG_DEF, TOPIC_CONFIG_SYNONYMS
from odradek.config.config_def import ConfigDef
from odradek.config.config_key import ConfigKey
from odradek.config.importance import Importance
from odradek.config.topic_configs import TOPIC_CONFIG_DEF
from odradek.int_limits import INT64_MAX

REGENERATE = "python -m odradek.config.docs > docs/config.md"

_INTRO = f"""\
# Configuration

<!-- Generated from odradek/config by `{REGENERATE}`; do not edit. -->

Names, meanings and defaults are Kafka's (3.x); odradek adds its listener and logging keys
(`host`, `port`, `metrics.host`, `metrics.port`, `log.level`, `log.format`) and limits on what
clients may cost it (`message.decompression.max.ratio`, `socket.request.timeout.ms`; and
`queued.max.request.bytes`, Kafka's, is bounded by default).

## Where broker settings come from

Later sources override earlier ones: defaults < properties file < environment < command line
(`--set` and the flags `--data-dir`, `--host`, `--port`, `--metrics-port`, `--log-level`).

- **Properties file** (Kafka's `server.properties`): Java properties as Kafka reads them:
  `key=value`, `key: value` or `key value`; `#` and `!` start comment lines; a trailing `\\`
  continues a line; `\\t`, `\\n`, `\\uHHHH` escapes. A key given twice keeps its last value.
- **Environment**: `{ENV_PREFIX}` plus the key in upper case with `_` for `.`, e.g.
  `{env_variable("log.retention.ms")}=1000`. An `{ENV_PREFIX}` variable that names no broker key
  is ignored with a warning (clients share the prefix, e.g. `{ENV_PREFIX}BOOTSTRAP`), unless it
  is a near miss of a broker key (e.g. `{ENV_PREFIX}LOG_RETENTON_MS`): that is an error.
- **`--set key=value`** on the command line, repeatable.
- **In the Docker image** the broker's settings are `ENV` variables of the image
  (`{ENV_PREFIX}LISTENERS`, `{ENV_PREFIX}ADVERTISED_LISTENERS`, `{ENV_PREFIX}LOG_DIRS`, ...) and its
  command is plain `serve`, so `docker run -e` (or compose's `environment:`) replaces any of them
  without repeating the command: a broker published on another port says so with
  `-p 127.0.0.1:19092:9092 -e {env_variable("advertised.listeners")}=PLAINTEXT://localhost:19092`.
  Arguments after the image name (`serve --set key=value`) win over both.

Unknown keys and invalid values stop the broker with an error naming the key, the value, what is
allowed and where it was set (file and line, variable, or `--set`).

Where Kafka has several keys for one setting, the finer one wins when set: `log.roll.ms` over
`log.roll.hours`, `log.retention.ms` over `log.retention.minutes` over `log.retention.hours`,
`log.flush.interval.ms` over `log.flush.scheduler.interval.ms`.

## Topic settings

A topic's own settings (set at creation or with AlterConfigs) override the broker defaults
named in the "Broker default" column. DescribeConfigs reports a setting as DYNAMIC_TOPIC_CONFIG
when the topic sets it, STATIC_BROKER_CONFIG when the broker's configuration sets its default,
else DEFAULT_CONFIG.
"""

_UNITS_MS = ((86400000, "day"), (3600000, "hour"), (60000, "minute"), (1000, "second"))
_UNITS_BYTES = ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"))
_IMPORTANCE_ORDER = list(Importance)


def render() -> str:
    """The whole of docs/config.md."""
    broker_key_of = {
        topic_name: ", ".join(f"`{synonym.name}`" for synonym in synonyms)
        for topic_name, synonyms in TOPIC_CONFIG_SYNONYMS.items()
    }
    topic_rows = _table(
        TOPIC_CONFIG_DEF, "Broker default", lambda key: broker_key_of.get(key.name, "")
    )
    broker_rows = _table(BROKER_CONFIG_DEF, "Environment variable", _env_cell)
    return f"{_INTRO}\n{topic_rows}\n## Broker settings\n\n{broker_rows}"


def _env_cell(key: ConfigKey) -> str:
    return f"`{env_variable(key.name)}`"


def _table(config_def: ConfigDef, extra_title: str, extra_cell: Callable[[ConfigKey], str]) -> str:
    header = f"| Name | Type | Default | Valid values | Importance | {extra_title} | Description |"
    lines = [header, "|" + "---|" * 7]
    for key in sorted(config_def, key=lambda k: (_IMPORTANCE_ORDER.index(k.importance), k.name)):
        cells = (
            f"`{key.name}`",
            key.type.value,
            _default_text(key),
            key.valid_values(),
            key.importance.value,
            extra_cell(key),
            key.doc,
        )
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _default_text(key: ConfigKey) -> str:
    text = key.render(key.default)
    if text is None:
        return "unset"
    if isinstance(key.default, int) and not isinstance(key.default, bool):
        return text + _in_units(key.name, key.default)
    return text


def _in_units(name: str, value: int) -> str:
    """A readable equivalent, e.g. `` (7 days)`` for 604800000 ms; empty when none is exact."""
    units = _UNITS_MS if name.endswith(".ms") else _UNITS_BYTES
    if name.endswith((".ms", "bytes", ".size")) and 0 < value < INT64_MAX:
        for size, unit in units:
            if value >= size and value % size == 0:
                count = value // size
                plural = "s" if count != 1 and units is _UNITS_MS else ""
                return f" ({count} {unit}{plural})"
    return ""


if __name__ == "__main__":
    sys.stdout.write(render())
