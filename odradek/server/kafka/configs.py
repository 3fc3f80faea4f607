"""KafkaConfigApis: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on Kafka's
protocol. A topic's configs are read from the AdminManager with Kafka's data, refused first
without DescribeConfigs on the topic (ApiAuthorization's rule, the msgpack protocol's too),
and changed there, refused first without AlterConfigs on the topic; the broker's own
settings and a group's configs (their defaults: odradek's groups are classic ones, which these
keys do not configure) are described read-only."""

from __future__ import annotations

from typing import Any

from odradek.config.broker_config import BrokerConfig
from odradek.config.broker_configs import BROKER_CONFIG_DEF, TOPIC_CONFIG_SYNONYMS
from odradek.config.config_entry import ConfigEntry as StoredConfigEntry
from odradek.config.config_source import ConfigSource
from odradek.config.group_configs import GROUP_CONFIG_KEYS
from odradek.config.topic_configs import TOPIC_CONFIG_DEF
from odradek.errors import InvalidConfigError, InvalidRequestError, KafkaError
from odradek.protocol.kafka import api_versions as apis
from odradek.security.acl import AclOperation
from odradek.server.admin.admin_manager import AdminManager
from odradek.server.apis import ApiRouter
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.request_context import RequestContext

INVALID_REQUEST, INVALID_CONFIG = InvalidRequestError.code, InvalidConfigError.code
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, GROUP_RESOURCE = 2, 4, 8, 32
CLUSTER_RESOURCES = frozenset({BROKER_RESOURCE, BROKER_LOGGER_RESOURCE})
"""Config resources Kafka authorizes on the cluster."""
CONFIG_SOURCE_CODES = {"DYNAMIC_TOPIC_CONFIG": 1, "STATIC_BROKER_CONFIG": 4, "DEFAULT_CONFIG": 5}
"""Kafka's ``ConfigSource`` numbers by name."""
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
"""IncrementalAlterConfigs' operations."""
CONFIG_TYPE_CODES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
"""Kafka's ``ConfigResource.Type`` numbers of DescribeConfigs v3+."""


class KafkaConfigApis:
    """The config APIs of Kafka's protocol."""

    def __init__(
        self,
        router: ApiRouter,
        admin_manager: AdminManager,
        broker_config: BrokerConfig,
        node_id: int,
        authorizer: Authorizer | None = None,
    ) -> None:
        self._authorizer = authorizer or Authorizer()
        self._apis = router
        self._admin = admin_manager
        self._broker_config = broker_config
        self._node_id = node_id

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.DESCRIBE_CONFIGS: self._describe_configs,
            apis.ALTER_CONFIGS: self._alter_configs,
            apis.INCREMENTAL_ALTER_CONFIGS: self._incremental_alter_configs,
        }

    async def _describe_configs(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        results = []
        for resource in body["resources"]:
            name = resource["resource_name"]
            kind = resource["resource_type"]
            if kind == BROKER_RESOURCE:
                denial = self._authorizer.cluster_denial(context, "DescribeConfigs")
                results.append(
                    self._broker_configs(resource, body)
                    if denial is None
                    else {
                        "error_code": denial.code,
                        "error_message": denial.message,
                        "resource_type": kind,
                        "resource_name": name,
                        "configs": [],
                    }
                )
                continue
            if kind == GROUP_RESOURCE:
                results.append(self._group_configs(resource, body, context))
                continue
            if kind != TOPIC_RESOURCE:
                results.append(self._not_described(resource, context))
                continue
            found = self.topic_configs(context, name)
            keys = resource.get("configuration_keys")
            broker_values = (
                {e.name: e for e in self._broker_config.describe()}
                if body.get("include_synonyms", False)
                else None
            )
            configs = [
                _config_entry(entry, broker_values, body.get("include_documentation", False))
                for entry in _entries(found)
                if not keys or entry.name in keys
            ]
            error = found if isinstance(found, KafkaError) else None
            results.append(
                {
                    "error_code": error.code if error is not None else 0,
                    "error_message": error.message if error is not None else None,
                    "resource_type": kind,
                    "resource_name": name,
                    "configs": configs,
                }
            )
        return {"results": results}

    def topic_configs(
        self, context: RequestContext, name: str
    ) -> list[StoredConfigEntry] | KafkaError:
        """Topic ``name``'s configs from the AdminManager, or why not: refused first without
        DescribeConfigs on the topic (ApiAuthorization's rule, as for the msgpack protocol)."""
        (denial,) = self._apis.authorization.topic_denials(context, apis.DESCRIBE_CONFIGS, [name])
        found = denial if denial is not None else self._admin.topic_configs(name)
        if isinstance(found, KafkaError):
            self._apis.count_entry_errors(apis.DESCRIBE_CONFIGS, (found.code,))
        return found

    def _broker_configs(self, resource: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """This broker's settings (read-only: they change with a restart)."""
        name = resource["resource_name"]
        result = {"resource_type": BROKER_RESOURCE, "resource_name": name, "configs": []}
        if name not in ("", str(self._node_id)):
            result.update(error_code=INVALID_REQUEST, error_message=f"no broker {name} here")
            return result
        keys = resource.get("configuration_keys")
        result["configs"] = [
            {
                "name": entry.name,
                "value": entry.value,
                "read_only": True,
                "config_source": CONFIG_SOURCE_CODES[entry.source.name],
                "is_sensitive": False,
                "synonyms": [
                    {
                        "name": entry.name,
                        "value": entry.value,
                        "source": CONFIG_SOURCE_CODES[entry.source.name],
                    }
                ]
                if body.get("include_synonyms", False)
                else [],
                "config_type": CONFIG_TYPE_CODES.get(BROKER_CONFIG_DEF[entry.name].type.value, 0),
                "documentation": entry.doc if body.get("include_documentation") else None,
            }
            for entry in self._broker_config.describe()
            if not keys or entry.name in keys
        ]
        return result

    def _group_configs(
        self, resource: dict[str, Any], body: dict[str, Any], context: RequestContext
    ) -> dict[str, Any]:
        """A group's configs as Kafka describes them, with DescribeConfigs on the group: every
        name but the empty one gets the defaults, whether or not the group exists."""
        name = resource["resource_name"]
        result = {"resource_type": GROUP_RESOURCE, "resource_name": name, "configs": []}
        denial = self._authorizer.group_denial(context, AclOperation.DESCRIBE_CONFIGS, name)
        if denial is not None:
            result.update(error_code=denial.code, error_message=denial.message)
            return result
        if not name:
            result.update(error_code=INVALID_REQUEST, error_message="Group name must not be empty")
            return result
        keys = resource.get("configuration_keys")
        synonyms, documentation = body.get("include_synonyms"), body.get("include_documentation")
        default = CONFIG_SOURCE_CODES["DEFAULT_CONFIG"]
        result.update(error_code=0, error_message="")
        result["configs"] = [
            {
                "name": key.name,
                "value": key.default,
                "read_only": False,
                "config_source": default,
                "is_default": True,
                "is_sensitive": False,
                "synonyms": [{"name": key.broker_synonym, "value": key.default, "source": default}]
                if synonyms
                else [],
                "config_type": key.config_type,
                "documentation": key.doc if documentation else None,
            }
            for key in GROUP_CONFIG_KEYS
            if not keys or key.name in keys
        ]
        return result

    async def _alter_configs(self, request: KafkaRequest, context: RequestContext) -> dict:
        """AlterConfigs replaces a topic's overrides with the ones given (all others go)."""
        body = request.body
        responses = []
        for resource in body["resources"]:
            if resource["resource_type"] != TOPIC_RESOURCE:
                responses.append(self._not_altered(resource, context))
                continue
            name = resource["resource_name"]
            given = {c["name"]: c["value"] for c in resource["configs"]}
            described = _entries(self.topic_configs(context, name))
            current = [e.name for e in described if e.source is ConfigSource.DYNAMIC_TOPIC_CONFIG]
            changes = {key: None for key in current}
            changes.update(given)
            responses.append(await self._alter(context, resource, changes, body["validate_only"]))
        return {"responses": responses}

    async def _incremental_alter_configs(
        self, request: KafkaRequest, context: RequestContext
    ) -> dict:
        body = request.body
        responses = []
        for resource in body["resources"]:
            if resource["resource_type"] != TOPIC_RESOURCE:
                responses.append(self._not_altered(resource, context))
                continue
            name = resource["resource_name"]
            values = {e.name: e.value for e in _entries(self.topic_configs(context, name))}
            changes: dict[str, str | None] = {}
            error = None
            for config in resource["configs"]:
                key, operation, value = config["name"], config["config_operation"], config["value"]
                if operation == SET:
                    changes[key] = value
                elif operation == DELETE:
                    changes[key] = None
                elif operation in (APPEND, SUBTRACT):
                    items = [v for v in (changes.get(key, values.get(key)) or "").split(",") if v]
                    for item in (value or "").split(","):
                        if operation == APPEND and item and item not in items:
                            items.append(item)
                        elif operation == SUBTRACT and item in items:
                            items.remove(item)
                    changes[key] = ",".join(items)
                else:
                    error = f"unknown config operation {operation} for {key}"
            if error is not None:
                responses.append(
                    {
                        "error_code": INVALID_REQUEST,
                        "error_message": error,
                        "resource_type": TOPIC_RESOURCE,
                        "resource_name": name,
                    }
                )
                continue
            responses.append(await self._alter(context, resource, changes, body["validate_only"]))
        return {"responses": responses}

    def _not_altered(self, resource: dict[str, Any], context: RequestContext) -> dict[str, Any]:
        """A resource other than a topic: a broker's (or its loggers') settings are refused
        without AlterConfigs on the cluster, as Kafka refuses them, before anything else."""
        if resource["resource_type"] == GROUP_RESOURCE:
            return self._group_not_altered(resource, context)
        return self._unsupported(resource, context, AclOperation.ALTER_CONFIGS, altering=True)

    def _group_not_altered(
        self, resource: dict[str, Any], context: RequestContext
    ) -> dict[str, Any]:
        """A group's configs: refused without AlterConfigs on the group, an unknown key as
        Kafka refuses it (INVALID_CONFIG); Kafka stores the known ones, odradek refuses them
        (INVALID_REQUEST), since they configure group protocols it does not serve."""
        name = resource["resource_name"]
        result = {"resource_type": GROUP_RESOURCE, "resource_name": name}
        denial = self._authorizer.group_denial(context, AclOperation.ALTER_CONFIGS, name)
        if denial is not None:
            return {**result, "error_code": denial.code, "error_message": denial.message}
        known = {key.name for key in GROUP_CONFIG_KEYS}
        for config in resource["configs"]:
            if config["name"] not in known:
                message = f"Unknown group config name: {config['name']}"
                return {**result, "error_code": INVALID_CONFIG, "error_message": message}
        message = (
            f"group {name}'s configs are read-only: they set the consumer, share and streams "
            "group protocols (consumer.*, share.*, streams.*, errors.deadletterqueue.*), and "
            "odradek's groups are classic ones, which none of them configure"
        )
        return {**result, "error_code": INVALID_REQUEST, "error_message": message}

    def _not_described(self, resource: dict[str, Any], context: RequestContext) -> dict[str, Any]:
        """A resource served neither as a topic nor as this broker (its loggers): refused
        without DescribeConfigs on the cluster first, as Kafka refuses it."""
        return self._unsupported(resource, context, AclOperation.DESCRIBE_CONFIGS)

    def _unsupported(
        self,
        resource: dict[str, Any],
        context: RequestContext,
        operation: AclOperation,
        altering: bool = False,
    ) -> dict[str, Any]:
        if resource["resource_type"] in CLUSTER_RESOURCES:
            denial = self._authorizer.cluster_denial(context, operation)
            if denial is not None:
                return {
                    "error_code": denial.code,
                    "error_message": denial.message,
                    "resource_type": resource["resource_type"],
                    "resource_name": resource["resource_name"],
                    "configs": [],
                }
        return _unsupported_resource(resource, altering)

    async def _alter(
        self,
        context: RequestContext,
        resource: dict[str, Any],
        changes: dict[str, str | None],
        validate_only: bool,
    ) -> dict[str, Any]:
        name = resource["resource_name"]
        (denial,) = self._apis.authorization.topic_denials(context, apis.ALTER_CONFIGS, [name])
        error = (
            denial
            if denial is not None
            else await self._admin.alter_topic_configs(name, changes, validate_only)
        )
        if error is not None:
            self._apis.count_entry_errors(apis.ALTER_CONFIGS, (error.code,))
        return {
            "error_code": error.code if error is not None else 0,
            "error_message": error.message if error is not None else None,
            "resource_type": TOPIC_RESOURCE,
            "resource_name": name,
        }


RESOURCE_TYPE_NAMES = {
    2: "TOPIC",
    4: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
    32: "GROUP",
}
"""Kafka's ``ConfigResource.Type`` names by number."""


def _unsupported_resource(resource: dict[str, Any], altering: bool = False) -> dict[str, Any]:
    """INVALID_REQUEST, as Kafka answers a resource type it does not serve, saying which are
    served."""
    kind = resource["resource_type"]
    name = RESOURCE_TYPE_NAMES.get(kind)
    message = f"resource type {kind}{f' ({name})' if name else ''} is not supported: "
    if altering:
        message += (
            "configs of topics (2) can be altered, a broker's (4) and a group's (32) are read-only"
        )
    else:
        message += "configs of topics (2), brokers (4) and groups (32) can be described"
    return {
        "error_code": INVALID_REQUEST,
        "error_message": message,
        "resource_type": kind,
        "resource_name": resource["resource_name"],
        "configs": [],
    }


def _entries(found: list[StoredConfigEntry] | KafkaError) -> list[StoredConfigEntry]:
    """A topic's configs as looked up: none when it was refused."""
    return [] if isinstance(found, KafkaError) else found


def _config_entry(
    entry: Any, broker_values: dict[str, Any] | None, documentation: bool
) -> dict[str, Any]:
    """A topic config as DescribeConfigs gives it; ``broker_values`` (the broker's settings by
    name) when synonyms are asked for."""
    source = CONFIG_SOURCE_CODES[entry.source.name]
    key = TOPIC_CONFIG_DEF[entry.name] if entry.name in TOPIC_CONFIG_DEF else None
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": False,
        "config_source": source,
        "is_default": entry.is_default,
        "is_sensitive": False,
        "synonyms": [] if broker_values is None else _synonyms(entry, broker_values),
        "config_type": CONFIG_TYPE_CODES.get(key.type.value, 0) if key is not None else 0,
        "documentation": key.doc if documentation and key is not None else None,
    }


def _synonyms(entry: Any, broker_values: dict[str, Any]) -> list[dict[str, Any]]:
    """Where a topic config's value could come from, in Kafka's precedence order: the topic's
    override, the broker settings that set its default (``log.retention.ms`` before
    ``log.retention.hours``), then Kafka's default."""
    synonyms = []
    if entry.source is ConfigSource.DYNAMIC_TOPIC_CONFIG:
        synonyms.append({"name": entry.name, "value": entry.value, "source": 1})
    broker_keys = TOPIC_CONFIG_SYNONYMS.get(entry.name, ())
    for synonym in broker_keys:
        found = broker_values.get(synonym.name)
        if found is not None and found.source.name == "STATIC_BROKER_CONFIG":
            synonyms.append({"name": synonym.name, "value": found.value, "source": 4})
    if broker_keys:
        last = broker_keys[-1].name
        default = BROKER_CONFIG_DEF[last].render(BROKER_CONFIG_DEF.default(last))
        synonyms.append({"name": last, "value": default, "source": 5})
    return synonyms
