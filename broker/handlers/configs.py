"""DescribeConfigs (key 32), AlterConfigs (key 33) and IncrementalAlterConfigs (key 44) for topics, with the
HTTP API's rules.

Topic configs use Kafka's names, defaults and validation (storage/topic_config.py); a stored override is
reported with source DYNAMIC_TOPIC_CONFIG and a default with DEFAULT_CONFIG, as Kafka reports them. The
broker resource describes the listener's settings (read-only, STATIC_BROKER_CONFIG); altering it is refused.
APPEND and SUBTRACT work on list configs (cleanup.policy) only, as in Kafka. A request naming one config
twice for a resource is INVALID_REQUEST for that resource, as Kafka answers it. The legacy AlterConfigs
replaces a topic's whole set of overrides, as Kafka's does: a config it does not name returns to its
default. librdkafka 2.0.2's ``AlterConfigs`` admin call (and its test 0092) uses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from agents.permissions import CLUSTER, KAFKA, ApiKey, Rule
from agents.permissions import TOPIC as TOPIC_RESOURCE
from broker import errors
from broker.context import BrokerContext
from storage.errors import BadRequest, InvalidConfig, StrataError
from storage.topic_config import (
    KNOWN_CONFIGS,
    check_aliases,
    check_config_name,
    effective_configs,
    validate_configs,
    validate_topic_name,
)

TOPIC = 2
BROKER = 4
# ConfigSource
_DYNAMIC_TOPIC_CONFIG = 1
_STATIC_BROKER_CONFIG = 4
_DEFAULT_CONFIG = 5
# ConfigType (DescribeConfigs v3+): the type Kafka's broker declares for each config (LogConfig,
# KafkaConfig); every config not named here is a LONG there too.
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7
_TYPES = {
    "cleanup.policy": _LIST,
    "follower.replication.throttled.replicas": _LIST,
    "leader.replication.throttled.replicas": _LIST,
    "min.cleanable.dirty.ratio": _DOUBLE,
    "max.message.bytes": _INT,
    "segment.bytes": _INT,
    "segment.index.bytes": _INT,
    "index.interval.bytes": _INT,
    "min.insync.replicas": _INT,
    "preallocate": _BOOLEAN,
    "unclean.leader.election.enable": _BOOLEAN,
    "message.downconversion.enable": _BOOLEAN,
    "message.timestamp.type": _STRING,
    "message.format.version": _STRING,
    "compression.type": _STRING,
    "compression.gzip.level": _INT,
    "compression.lz4.level": _INT,
    "compression.zstd.level": _INT,
    "max.decompressed.message.bytes": _INT,
    # Schema validation on produce: Confluent Server declares its two as BOOLEAN and STRING, as Redpanda
    # declares its aliases; Strata's level is a STRING.
    **{
        name: _BOOLEAN if name.endswith("validation") else _STRING
        for name in KNOWN_CONFIGS
        if name.startswith(("confluent.", "redpanda.", "strata.")) and not name.startswith("strata.iceberg.")
    },
    # The topic as an Iceberg table (storage/lake_config.py): strings, but its interval, flags and buckets.
    **{name: _STRING for name in KNOWN_CONFIGS if name.startswith("strata.iceberg.")},
    "strata.iceberg.commit.interval.ms": _LONG,
    "strata.iceberg.max.retention.hold.ms": _LONG,
    "strata.iceberg.snapshot.retention.ms": _LONG,
    "strata.iceberg.delete.with.topic": _BOOLEAN,
    "strata.iceberg.upsert": _BOOLEAN,
    "strata.iceberg.upsert.buckets": _INT,
    "auto.create.topics.enable": _BOOLEAN,
    "num.partitions": _INT,
    "socket.request.max.bytes": _INT,
}
_LIST_CONFIGS = frozenset(name for name, kind in _TYPES.items() if kind == _LIST)
# IncrementalAlterConfigs operations
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3

_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Altered = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
_Replaced = AlterConfigsResponse.AlterConfigsResourceResponse
_DESCRIBE = KAFKA[ApiKey.DESCRIBE_CONFIGS]
_ALTER = KAFKA[ApiKey.ALTER_CONFIGS]
_INCREMENTAL = KAFKA[ApiKey.INCREMENTAL_ALTER_CONFIGS]


async def handle_describe_configs(ctx: BrokerContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = [await _describe(ctx, r) for r in req.resources]
    return DescribeConfigsResponse[req.API_VERSION](throttle_time_ms=0, results=results)


async def _describe(ctx: BrokerContext, resource: Any) -> Any:
    try:
        if resource.resource_type == TOPIC:
            ctx.require(_DESCRIBE.need(TOPIC_RESOURCE), resource.resource_name)
            name = validate_topic_name(resource.resource_name)
            info = await asyncio.to_thread(ctx.metadata.get_topic, name)
            values = effective_configs(info.configs, name, ctx.agent.config_defaults)
            sources = {k: _DYNAMIC_TOPIC_CONFIG if k in info.configs else _DEFAULT_CONFIG for k in values}
            read_only = False
        elif resource.resource_type == BROKER:
            ctx.require(_DESCRIBE.need(CLUSTER))
            config = ctx.config
            values = {
                "auto.create.topics.enable": str(config.auto_create_topics).lower(),
                "num.partitions": str(config.num_partitions),
                "socket.request.max.bytes": str(config.max_request_bytes),
            }
            sources = dict.fromkeys(values, _STATIC_BROKER_CONFIG)
            read_only = True
        else:
            return _describe_error(resource, errors.INVALID_REQUEST, "only topic and broker configs exist")
    except StrataError as exc:
        return _describe_error(resource, errors.kafka_error(exc), exc.message)
    keys = resource.configuration_keys
    wanted = sorted(values) if keys is None else [k for k in keys if k in values]
    entries = [
        _Entry(
            name=k,
            value=values[k],
            read_only=read_only,
            config_source=sources[k],
            is_sensitive=False,
            synonyms=[],
            config_type=_TYPES.get(k, _LONG),
            documentation=None,
        )
        for k in wanted
    ]
    return _Result(
        error_code=errors.NONE,
        error_message=None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=entries,
    )


def _describe_error(resource: Any, code: int, message: str) -> Any:
    return _Result(
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=[],
    )


async def handle_incremental_alter_configs(
    ctx: BrokerContext, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = [
        await _alter(
            ctx,
            _INCREMENTAL,
            resource,
            req.validate_only,
            _Altered,
            lambda current, r: _changes(current, r.configs),
        )
        for resource in req.resources
    ]
    return IncrementalAlterConfigsResponse[req.API_VERSION](throttle_time_ms=0, responses=responses)


async def handle_alter_configs(ctx: BrokerContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = [
        await _alter(ctx, _ALTER, resource, req.validate_only, _Replaced, _replacement)
        for resource in req.resources
    ]
    return AlterConfigsResponse[req.API_VERSION](throttle_time_ms=0, responses=responses)


async def _alter(
    ctx: BrokerContext,
    rule: Rule,
    resource: Any,
    validate_only: bool,
    result: Any,
    changes_of: Callable[[Mapping[str, str], Any], dict[str, str | None]],
) -> Any:
    """One resource of an alter request: validated as a whole, applied unless ``validate_only``."""
    code, message = errors.NONE, None
    try:
        if resource.resource_type == BROKER:
            ctx.require(rule.need(CLUSTER))
        if resource.resource_type != TOPIC:
            raise InvalidConfig("only topic configs can be altered; broker settings are STRATA_* settings")
        ctx.require(rule.need(TOPIC_RESOURCE), resource.resource_name)
        name = validate_topic_name(resource.resource_name)
        named = [c.name for c in resource.configs]
        if len(set(named)) != len(named):
            raise BadRequest(f"config keys named twice: {sorted({n for n in named if named.count(n) > 1})}")
        info = await asyncio.to_thread(ctx.metadata.get_topic, name)
        changes = changes_of(info.configs, resource)
        # The topic's configs as they would be: an alias pair set apart by two requests disagrees too.
        after = {**info.configs, **changes}
        check_aliases({k: v for k, v in after.items() if v is not None})
        if not validate_only:
            await asyncio.to_thread(ctx.metadata.update_topic_configs, name, changes)
            ctx.agent.forget_topic(name)
    except StrataError as exc:
        code, message = errors.kafka_error(exc), exc.message
    return result(
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


def _replacement(current: Mapping[str, str], resource: Any) -> dict[str, str | None]:
    """AlterConfigs: the given configs set, every other override reset to its default."""
    given: dict[str, str] = {}
    for config in resource.configs:
        given[check_config_name(config.name)] = config.value if config.value is not None else ""
    changes: dict[str, str | None] = dict.fromkeys(current)
    changes.update(validate_configs(given))
    return changes


def _changes(current: Any, ops: Any) -> dict[str, str | None]:
    """The validated changes for update_topic_configs (None resets to the default). InvalidConfig if any
    operation is bad: then nothing is applied."""
    effective = effective_configs(current)
    changes: dict[str, str | None] = {}
    for op in ops:
        name = check_config_name(op.name)
        if op.config_operation == _SET:
            changes.update(validate_configs({name: op.value if op.value is not None else ""}))
        elif op.config_operation == _DELETE:
            changes[name] = None
        elif op.config_operation in (_APPEND, _SUBTRACT):
            if name not in _LIST_CONFIGS:
                raise InvalidConfig(f"{name} is not a list config; APPEND and SUBTRACT need one")
            items = [x for x in (changes.get(name) or effective[name]).replace(" ", "").split(",") if x]
            given = [x for x in (op.value or "").replace(" ", "").split(",") if x]
            if op.config_operation == _APPEND:
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            changes.update(validate_configs({name: ",".join(items)}))
        else:
            raise InvalidConfig(f"unknown config operation {op.config_operation}")
    return changes
