"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44) for topics,
brokers (per broker and the cluster default) and broker loggers (Kafka's ConfigHelper,
ConfigAdminManager and ZkAdminManager).

Topic overrides live in /config/topics/<t>, broker overrides in /config/brokers/<id> and
/config/brokers/<default>; a write is followed by a /config/changes notification, which
every broker applies (TopicConfigs, DynamicBrokerConfig). Describing reads the topic
overrides from ZooKeeper, so a describe right after an alter sees the new value.
Logger levels (BROKER_LOGGER) change at once and are not persisted, as in Kafka.
"""

from __future__ import annotations

import logging
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Generic, TypeVar

from moldau.errors import (
    ClusterAuthorizationFailedError,
    InvalidConfigurationError,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.generated.alter_configs_request import AlterConfigsRequest
from moldau.protocol.generated.alter_configs_response import AlterConfigsResponse
from moldau.protocol.generated.describe_configs_response import DescribeConfigsResponse
from moldau.protocol.generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from moldau.protocol.generated.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from moldau.security.acls import AclOperation, ResourceType
from moldau.storage.config import ConfigError as StorageConfigError
from moldau.storage.config import LogConfig

from .. import logging_setup
from ..config import EXTENSION_KEYS, KEYS, ConfigError, convert
from ..dynamic_config import (
    ALL_DYNAMIC_CONFIGS,
    DEFAULT_CONFIG,
    DEFAULT_ENTITY,
    DYNAMIC_BROKER_LOGGER_CONFIG,
    TOPIC_CONFIG,
    TOPIC_TO_BROKER,
    DynamicBrokerConfig,
    DynamicConfigError,
    config_type,
    is_sensitive,
    render,
)
from ..topic_names import validate_topic_name

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from moldau.cluster.zk_async import AsyncZk
    from moldau.protocol.generated.describe_configs_request import DescribeConfigsRequest
    from moldau.security.tls import TlsContextHolder

    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext
    from ..topic_configs import TopicConfigs

log = logging.getLogger("kafka.server.ZkAdminManager")

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
RESOURCE_TYPE_NAMES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER",
                       16: "CLIENT_METRICS", 32: "GROUP"}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
CONFIG_TYPE_IDS = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6,
                   "list": 7, "class": 8, "password": 9}
VALID_LOG_LEVELS = ("DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN")  # sorted, as Kafka
CLUSTER_NAME = "kafka-cluster"

# The topic configs Moldau knows (LogConfig's fields), by Kafka name, sorted.
TOPIC_CONFIG_NAMES = sorted(f.name.replace("_", ".") for f in fields(LogConfig)
                            if not f.name.startswith("_"))

Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym
DescribeResult = DescribeConfigsResponse.DescribeConfigsResult
AlterResource = AlterConfigsRequest.AlterConfigsResource
AlterEntry = AlterConfigsRequest.AlterableConfig
IncrementalResource = IncrementalAlterConfigsRequest.AlterConfigsResource
IncrementalEntry = IncrementalAlterConfigsRequest.AlterableConfig
# the resource of either alter request (both have AlterConfigsResource's shape)
ResourceT = TypeVar("ResourceT", AlterResource, IncrementalResource)
# the per-resource answer of either alter response
ResultT = TypeVar("ResultT", AlterConfigsResponse.AlterConfigsResourceResponse,
                  IncrementalAlterConfigsResponse.AlterConfigsResourceResponse)


class _TopicNotFound(UnknownTopicOrPartitionError):
    """DescribeConfigs of a topic that does not exist: Kafka 3.9 answers it with an empty
    error message (the client shows none), not the error's default text."""


def resource_str(resource_type: int, name: str) -> str:
    """ConfigResource.toString: ConfigResource(type=TOPIC, name='orders')."""
    return f"ConfigResource(type={RESOURCE_TYPE_NAMES.get(resource_type, 'UNKNOWN')}, " \
           f"name='{name}')"


# --------------------------------------------------------------------------- topics


# topic configs without a broker synonym, with their types (LogConfig validates values)
TOPIC_ONLY_CONFIGS = {"leader.replication.throttled.replicas": "list",
                      "follower.replication.throttled.replicas": "list",
                      "remote.storage.enable": "boolean",
                      "remote.log.copy.disable": "boolean",
                      "remote.log.delete.on.disable": "boolean"}


def topic_config_type(name: str) -> str:
    if name in TOPIC_ONLY_CONFIGS:
        return TOPIC_ONLY_CONFIGS[name]
    return KEYS[TOPIC_TO_BROKER[name]].type


def validate_topic_configs(props: dict[str, str], base: LogConfig,
                           resource: str | None = None) -> LogConfig:
    """Kafka's LogConfig.validate: names must be topic configs (INVALID_CONFIG "Unknown
    topic config name: x"), values must parse and pass the validators. Returns the topic's
    LogConfig with these overrides on `base`. `resource` prefixes value errors as
    AlterConfigs does ("Invalid config value for resource ...: ...")."""
    for name in props:
        if name not in TOPIC_TO_BROKER and name not in TOPIC_ONLY_CONFIGS:
            raise InvalidConfigurationError(f"Unknown topic config name: {name}")
    try:
        for name, value in props.items():
            if name in TOPIC_TO_BROKER:  # typed like its broker synonym
                key = replace(KEYS[TOPIC_TO_BROKER[name]], name=name, validator=None)
                convert(key, value)
        return LogConfig.from_properties(dict(props), base)
    except (ConfigError, StorageConfigError) as exc:
        message = str(exc)
        if resource is not None:
            message = f"Invalid config value for resource {resource}: {message}"
        raise InvalidConfigurationError(message) from None


def topic_value(config: LogConfig, name: str) -> str | None:
    return render(name, getattr(config, name.replace(".", "_")))


def topic_entry(dynamic: DynamicBrokerConfig, config: LogConfig, overrides: dict[str, str],
                name: str, include_synonyms: bool) -> Entry:
    """ConfigHelper.createTopicConfigEntry: the topic override first, then the broker
    synonyms (dynamic per broker, dynamic default, static, default)."""
    value = topic_value(config, name)
    synonyms: list[tuple[str, str | None, int]] = []
    if name in overrides:
        synonyms.append((name, value, TOPIC_CONFIG))
    synonyms.extend(dynamic.topic_synonyms(name))
    source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
    return Entry(
        name=name, value=value, read_only=False, config_source=source, is_sensitive=False,
        synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in synonyms]
        if include_synonyms else [],
        config_type=CONFIG_TYPE_IDS.get(topic_config_type(name), 0), documentation=None)


# --------------------------------------------------------------------------- brokers


def broker_entry(dynamic: DynamicBrokerConfig, name: str, per_broker: bool,
                 include_synonyms: bool) -> Entry:
    """ConfigHelper.createBrokerConfigEntry."""
    sensitive = is_sensitive(name)
    value = dynamic.effective_string(name) if per_broker else dynamic.default_props.get(name)
    if sensitive:
        value = None
    synonyms = dynamic.synonyms(name, per_broker)
    source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
    return Entry(
        name=name, value=value, read_only=name not in ALL_DYNAMIC_CONFIGS,
        config_source=source, is_sensitive=sensitive,
        synonyms=[Synonym(name=n, value=None if sensitive else v, source=s)
                  for n, v, s in synonyms] if include_synonyms else [],
        config_type=CONFIG_TYPE_IDS.get(config_type(name) or "", 0), documentation=None)


def broker_id_of(name: str, what: str = "Node") -> int:
    try:
        broker_id = int(name)
    except ValueError:
        raise InvalidRequestError(f"{what} id must be an integer, but it is: {name}") from None
    return broker_id


# --------------------------------------------------------------------------- DescribeConfigs


class DescribeConfigsHandler:
    MIN_VERSION, MAX_VERSION = 0, 4

    def __init__(self, broker_id: int, metadata: MetadataCache, zk: AsyncZk,
                 topic_configs: TopicConfigs, dynamic_config: DynamicBrokerConfig) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.zk = zk
        self.topic_configs = topic_configs
        self.dynamic_config = dynamic_config

    async def __call__(self, ctx: RequestContext,
                       request: DescribeConfigsRequest) -> DescribeConfigsResponse:
        dynamic = self.dynamic_config
        version = ctx.api_version
        include_synonyms = request.include_synonyms if version >= 1 else False
        results = []
        for resource in request.resources:
            rtype, name = resource.resource_type, resource.resource_name
            try:
                if rtype == TOPIC:
                    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name):
                        raise TopicAuthorizationFailedError(
                            f"Topic authorization failed for {name}")
                    entries = await self._topic(dynamic, name, include_synonyms)
                elif rtype in (BROKER, BROKER_LOGGER):
                    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER,
                                         CLUSTER_NAME):
                        raise ClusterAuthorizationFailedError("Cluster authorization failed.")
                    if rtype == BROKER:
                        entries = self._broker(dynamic, name, include_synonyms)
                    else:
                        entries = self._logger(name)
                else:
                    raise InvalidRequestError(f"Unsupported resource type: "
                                              f"{RESOURCE_TYPE_NAMES.get(rtype, 'UNKNOWN')}")
                keys = resource.configuration_keys
                if keys:
                    wanted = set(keys)
                    entries = [e for e in entries if e.name in wanted]
                if version == 0:
                    for entry in entries:
                        entry.is_default = entry.config_source == DEFAULT_CONFIG
                results.append(DescribeResult(error_code=0, error_message=None,
                                              resource_type=rtype, resource_name=name,
                                              configs=entries))
            except KafkaError as exc:
                log.info("Error processing describe configs request for resource %s: %s",
                         resource_str(rtype, name), exc)
                message = "" if isinstance(exc, _TopicNotFound) else str(exc) or None
                results.append(DescribeResult(error_code=exc.code, error_message=message,
                                              resource_type=rtype, resource_name=name,
                                              configs=[]))
        return DescribeConfigsResponse(results=results)

    async def _topic(self, dynamic: DynamicBrokerConfig, name: str,
                     include_synonyms: bool) -> list[Entry]:
        validate_topic_name(name)  # INVALID_TOPIC_EXCEPTION, as Kafka's Topic.validate
        if name not in self.metadata.topics:
            raise _TopicNotFound()
        overrides = await self.zk.call(self.zk.client.get_entity_config, "topics", name)
        try:
            config = LogConfig.from_properties(dict(overrides), dynamic.log_config())
        except StorageConfigError:
            config = self.topic_configs.log_config(name)
        return [topic_entry(dynamic, config, overrides, key, include_synonyms)
                for key in TOPIC_CONFIG_NAMES]

    def _broker(self, dynamic: DynamicBrokerConfig, name: str,
                include_synonyms: bool) -> list[Entry]:
        if not name:
            names = sorted(dynamic.default_props)
            return [broker_entry(dynamic, n, False, include_synonyms) for n in names]
        if broker_id_of(name, "Broker") != self.broker_id:
            raise InvalidRequestError(f"Unexpected broker id, expected "
                                      f"{self.broker_id} or empty string, but received "
                                      f"{name}")
        names = sorted(set(dynamic.current.values) | set(dynamic.merged_props()))
        # A moldau.* key is listed only when set, as Kafka lists a key it does not know
        # (ConfigHelper's originals): Kafka's tools see what a Kafka broker would show.
        return [broker_entry(dynamic, n, True, include_synonyms) for n in names
                if n not in EXTENSION_KEYS or dynamic.current.values.get(n) is not None]

    def _logger(self, name: str) -> list[Entry]:
        if not name:
            raise InvalidRequestError("Broker id must not be empty")
        if broker_id_of(name, "Broker") != self.broker_id:
            raise InvalidRequestError(f"Unexpected broker id, expected "
                                      f"{self.broker_id} but received {name}")
        return [Entry(name=logger, value=level, read_only=False,
                      config_source=DYNAMIC_BROKER_LOGGER_CONFIG, is_sensitive=False,
                      synonyms=[], config_type=0, documentation=None)
                for logger, level in logging_setup.logger_levels().items()]


# --------------------------------------------------------------------------- alter (shared)


def _check_resource_list(resources: Sequence[AlterResource | IncrementalResource]
                         ) -> dict[int, KafkaError]:
    """Each (type, name) at most once; duplicate config keys; null values."""
    errors: dict[int, KafkaError] = {}
    seen: dict[tuple[int, str], int] = {}
    for i, resource in enumerate(resources):
        key = (resource.resource_type, resource.resource_name)
        if key in seen:
            for j in (seen[key], i):
                errors[j] = InvalidRequestError("Each resource must appear at most once.")
        seen[key] = i
    return errors


def _check_entries(configs: Sequence[AlterEntry | IncrementalEntry]) -> None:
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    # an incremental DELETE names no value
    nulls = [c.name for c in configs if c.value is None
             and not (isinstance(c, IncrementalEntry) and c.config_operation == DELETE)]
    if nulls:
        raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))


class _AlterBase(Generic[ResourceT]):
    """AlterConfigs and IncrementalAlterConfigs: the same resources and answers, each
    resource changed by the subclass's `_one`."""

    def __init__(self, broker_id: int, metadata: MetadataCache, zk: AsyncZk,
                 dynamic_config: DynamicBrokerConfig,
                 tls_holders: Mapping[str, TlsContextHolder]) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.zk = zk
        self.dynamic_config = dynamic_config
        self.tls_holders = tls_holders  # a new key store is checked against the listener's

    def _check_broker_name(self, name: str) -> bool:
        """True for a per-broker resource (our id), False for the cluster default ("")."""
        if not name:
            return False
        if broker_id_of(name) != self.broker_id:
            raise InvalidRequestError(f"Unexpected broker id, expected "
                                      f"{self.broker_id}, but received {name}")
        return True

    WHAT: str  # for the log line

    async def _alter_each(self, ctx: RequestContext, resources: Sequence[ResourceT],
                          validate_only: bool, result: type[ResultT]) -> list[ResultT]:
        """Every resource changed (or refused), in order, each answered with a `result`
        (the response's AlterConfigsResourceResponse)."""
        dynamic = self.dynamic_config
        errors = _check_resource_list(resources)
        responses = []
        for i, resource in enumerate(resources):
            rtype, name = resource.resource_type, resource.resource_name
            error: KafkaError | None = errors.get(i)
            if error is None:
                try:
                    await self._one(ctx, resource, validate_only, dynamic)
                except KafkaError as exc:
                    error = exc
            if error is not None:
                log.info("Error processing %s request for resource %s: %s", self.WHAT,
                         resource_str(rtype, name), error)
            responses.append(result(
                error_code=error.code if error else 0,
                error_message=(str(error) or None) if error else None,
                resource_type=rtype, resource_name=name))
        return responses

    async def _one(self, ctx: RequestContext, resource: ResourceT, validate_only: bool,
                   dynamic: DynamicBrokerConfig) -> None:
        raise NotImplementedError

    async def _alter_topic(self, name: str, props: dict[str, str], validate_only: bool,
                           dynamic: DynamicBrokerConfig) -> None:
        """ZkAdminManager.alterTopicConfigs: the whole override set of the topic."""
        if not name:
            raise InvalidRequestError("Default topic resources are not allowed.")
        if name not in self.metadata.topics:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        validate_topic_configs(props, dynamic.log_config(), resource_str(TOPIC, name))
        if not validate_only:
            log.info("Updating topic %s with new configuration : %s", name,
                     ",".join(f"{k} -> {v}" for k, v in props.items()))
            await self.zk.call(self.zk.client.set_entity_config, "topics", name, props)

    async def _alter_broker(self, name: str, per_broker: bool, props: dict[str, str],
                            validate_only: bool, dynamic: DynamicBrokerConfig) -> None:
        """ConfigAdminManager's validation (INVALID_REQUEST), then the write (a failure to
        encode a password is INVALID_CONFIG, as ZkAdminManager.alterBrokerConfigs)."""
        try:
            # the listeners' new TLS stores too (Kafka: SslFactory.validateReconfiguration),
            # so a bad key store is refused before it reaches ZooKeeper
            dynamic.validate(props, per_broker, self.tls_holders)
        except DynamicConfigError as exc:
            raise InvalidRequestError(str(exc)) from None
        try:
            persistent = dynamic.to_persistent(props, per_broker)
        except DynamicConfigError as exc:
            raise InvalidConfigurationError(
                f"Invalid config value for resource {resource_str(BROKER, name)}: {exc}") \
                from None
        if validate_only:
            return
        entity = str(self.broker_id) if per_broker else DEFAULT_ENTITY
        if per_broker:
            log.info("Updating broker %s with new configuration : %s", entity,
                     dynamic._loggable(props))
            await dynamic.reload_listener_files(props)
        else:
            log.info("Updating brokers with new configuration : %s", dynamic._loggable(props))
        await self.zk.call(self.zk.client.set_entity_config, "brokers", entity, persistent)
        # apply here at once; the /config/changes notification does it again (no-op) and
        # tells the other brokers
        await dynamic.on_change("brokers", entity, self.zk)


# --------------------------------------------------------------------------- AlterConfigs


class AlterConfigsHandler(_AlterBase[AlterResource]):
    MIN_VERSION, MAX_VERSION = 0, 2

    WHAT = "alter configs"

    async def __call__(self, ctx: RequestContext,
                       request: AlterConfigsRequest) -> AlterConfigsResponse:
        return AlterConfigsResponse(responses=await self._alter_each(
            ctx, request.resources, request.validate_only,
            AlterConfigsResponse.AlterConfigsResourceResponse))

    async def _one(self, ctx: RequestContext, resource: AlterResource, validate_only: bool,
                   dynamic: DynamicBrokerConfig) -> None:
        rtype, name = resource.resource_type, resource.resource_name
        _check_entries(resource.configs)
        props = {c.name: c.value for c in resource.configs}
        if rtype == TOPIC:
            if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, name):
                raise TopicAuthorizationFailedError(f"Topic authorization failed for {name}")
            await self._alter_topic(name, props, validate_only, dynamic)
        elif rtype == BROKER:
            # Kafka's ConfigAdminManager checks the broker id before authorization
            per_broker = self._check_broker_name(name)
            if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
                raise ClusterAuthorizationFailedError("Cluster authorization failed.")
            await self._alter_broker(name, per_broker, props, validate_only, dynamic)
        else:
            # legacy AlterConfigs has no BROKER_LOGGER (KIP-412 is incremental only)
            raise InvalidRequestError(f"Unknown resource type {rtype}")


# --------------------------------------------------------------------------- Incremental


def apply_incremental(ops: Sequence[IncrementalEntry], props: dict[str, str],
                      list_type: Callable[[str], bool | None],
                      list_default: Callable[[str], str]) -> dict[str, str]:
    """ConfigAdminManager.prepareIncrementalConfigs: SET, DELETE, and APPEND/SUBTRACT for
    list-typed keys (from the current value, else the key's default)."""
    out = dict(props)
    for op in ops:
        name, value, kind = op.name, op.value, op.config_operation
        if kind == SET:
            out[name] = value
        elif kind == DELETE:
            out.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            is_list = list_type(name)
            if is_list is None:
                raise InvalidConfigurationError(f"Unknown config name: {name}")
            verb = "append" if kind == APPEND else "subtract"
            if not is_list:
                raise InvalidConfigurationError(
                    f"Config value {verb} is not allowed for config key: {name}")
            current = out.get(name)
            if current is None:
                current = list_default(name)
            old = [v for v in (current or "").split(",") if v] if kind == APPEND else \
                (current or "").split(",")
            items = value.split(",")
            if kind == APPEND:
                new = old + [v for v in items if v not in old]
            else:
                new = [v for v in old if v not in items]
            out[name] = ",".join(new)
        else:
            raise InvalidRequestError(f"Unknown operations type {kind}")
    return out


def _topic_list_type(name: str) -> bool | None:
    if name not in TOPIC_TO_BROKER:
        return None
    return topic_config_type(name) == "list"


def _topic_list_default(name: str) -> str:
    return topic_value(LogConfig(), name) or ""


def _broker_list_type(name: str) -> bool | None:
    t = config_type(name)
    if t is None:
        return None
    return t == "list"


def _broker_list_default(name: str) -> str:
    key = KEYS.get(name)
    return (render(name, key.default) or "") if key is not None and key.default is not None \
        else ""


class IncrementalAlterConfigsHandler(_AlterBase[IncrementalResource]):
    MIN_VERSION, MAX_VERSION = 0, 1

    WHAT = "incremental alter configs"

    async def __call__(self, ctx: RequestContext, request: IncrementalAlterConfigsRequest
                       ) -> IncrementalAlterConfigsResponse:
        return IncrementalAlterConfigsResponse(responses=await self._alter_each(
            ctx, request.resources, request.validate_only,
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse))

    async def _one(self, ctx: RequestContext, resource: IncrementalResource,
                   validate_only: bool, dynamic: DynamicBrokerConfig) -> None:
        rtype, name = resource.resource_type, resource.resource_name
        ops: list[IncrementalEntry] = list(resource.configs)
        _check_entries(ops)
        zk = self.zk
        if rtype == TOPIC:
            if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, name):
                raise TopicAuthorizationFailedError(f"Topic authorization failed for {name}")
            if not name:
                raise InvalidRequestError("Default topic resources are not allowed.")
            current = await zk.call(zk.client.get_entity_config, "topics", name)
            props = apply_incremental(ops, current, _topic_list_type, _topic_list_default)
            await self._alter_topic(name, props, validate_only, dynamic)
        elif rtype == BROKER:
            # Kafka's ConfigAdminManager checks the broker id before authorization
            per_broker = self._check_broker_name(name)
            if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
                raise ClusterAuthorizationFailedError("Cluster authorization failed.")
            entity = str(self.broker_id) if per_broker else DEFAULT_ENTITY
            stored = await zk.call(zk.client.get_entity_config, "brokers", entity)
            current = dynamic.from_persistent(stored, per_broker)
            props = apply_incremental(ops, current, _broker_list_type, _broker_list_default)
            await self._alter_broker(name, per_broker, props, validate_only, dynamic)
        elif rtype == BROKER_LOGGER:
            if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
                raise ClusterAuthorizationFailedError("Cluster authorization failed.")
            self._loggers(name, ops, validate_only)
        else:
            raise InvalidRequestError(f"Unknown resource type {rtype}")

    def _loggers(self, name: str, ops: list[IncrementalEntry], validate_only: bool) -> None:
        """RuntimeLoggerManager.applyChangesForResource (KIP-412)."""
        if broker_id_of(name) != self.broker_id:
            raise InvalidRequestError(f"Unexpected node id. Expected {self.broker_id}, "
                                      f"but received {name}")
        known = logging_setup.logger_levels()
        for op in ops:
            logger, kind = op.name, op.config_operation
            if kind in (SET, DELETE) and logger not in known:
                raise InvalidConfigurationError(f"Logger {logger} does not exist!")
            if kind == SET:
                if op.value not in VALID_LOG_LEVELS:
                    raise InvalidConfigurationError(
                        f"Cannot set the log level of {logger} to {op.value} as it is not a "
                        f"supported log level. Valid log levels are "
                        f"{', '.join(VALID_LOG_LEVELS)}")
            elif kind == DELETE:
                if logger == logging_setup.ROOT_LOGGER:
                    raise InvalidRequestError("Removing the log level of the root logger is "
                                              "not allowed")
            elif kind in (APPEND, SUBTRACT):
                raise InvalidRequestError(f"{OP_NAMES[kind]} operation is not allowed for the "
                                          "BROKER_LOGGER resource")
            else:
                raise InvalidRequestError(f"Unknown operation type {kind} is not allowed for "
                                          "the BROKER_LOGGER resource")
        if validate_only:
            return
        for op in ops:
            if op.config_operation == SET:
                logging_setup.set_logger_level(op.name, op.value)
                log.warning("Updated the log level of %s to %s", op.name, op.value)
            else:
                logging_setup.set_logger_level(op.name, "DEFAULT")
                log.warning("Unset the log level of %s", op.name)
