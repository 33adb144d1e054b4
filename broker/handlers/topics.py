"""CreateTopics (key 19) and DeleteTopics (key 20), with the HTTP API's validation (storage/topic_config.py).

Replication is the object store's business, so any replication factor a client asks for (-1 or n >= 1)
is accepted and reported as 1. A manual replica assignment is accepted as Kafka checks it (numPartitions
and replicationFactor -1, partitions 0..n-1, every replica a broker id this agent shows) and gives the
topic n partitions; CreatePartitions likewise takes one replica list per new partition. The replicas
themselves mean nothing here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

from agents.permissions import KAFKA, TOPIC, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.errors import InvalidConfig, InvalidPartitionCount, StrataError
from storage.topic_config import MAX_PARTITIONS, effective_configs, validate_configs, validate_topic_name

_Created = CreateTopicsResponse.CreatableTopicResult
_Config = _Created.CreatableTopicConfigs
_Deleted = DeleteTopicsResponse.DeletableTopicResult
_DEFAULT_CONFIG = 5  # Kafka's ConfigSource.DEFAULT_CONFIG
_TOPIC_CONFIG = 1  # ConfigSource.TOPIC_CONFIG


async def handle_create_topics(ctx: BrokerContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    results = [await _create(ctx, req, topic) for topic in req.topics]
    return CreateTopicsResponse[req.API_VERSION](throttle_time_ms=0, topics=results)


async def _create(
    ctx: BrokerContext, req: CreateTopicsRequest, topic: CreateTopicsRequest.CreatableTopic
) -> Any:
    partitions = topic.num_partitions if topic.num_partitions != -1 else ctx.config.num_partitions
    try:
        ctx.require(KAFKA[ApiKey.CREATE_TOPICS].need(TOPIC), topic.name)
        if topic.assignments:
            checked = _assignment(ctx, topic)
            if isinstance(checked, tuple):
                return _failed(topic.name, *checked)
            partitions = checked
        name = validate_topic_name(topic.name)
        if not 1 <= partitions <= MAX_PARTITIONS:
            return _failed(topic.name, errors.INVALID_PARTITIONS, f"partitions must be 1..{MAX_PARTITIONS}")
        if topic.replication_factor == 0 or topic.replication_factor < -1:
            return _failed(
                topic.name, errors.INVALID_REPLICATION_FACTOR, "replication factor must be -1 or >= 1"
            )
        raw = {c.name: c.value for c in topic.configs if c.value is not None}
        configs = validate_configs(raw)
        if not req.validate_only:
            now = ctx.clock.now_ms()
            await asyncio.to_thread(ctx.metadata.create_topic, name, partitions, configs, now)
            info = await asyncio.to_thread(ctx.metadata.get_topic, name)
            topic_id = ctx.topic_id(info)
        else:
            topic_id = None
    except InvalidConfig as exc:
        return _failed(topic.name, errors.INVALID_CONFIG, exc.message)
    except StrataError as exc:
        return _failed(topic.name, errors.kafka_error(exc), exc.message)
    shown = effective_configs(configs, topic.name, ctx.agent.config_defaults)
    return _Created(
        name=topic.name,
        **({"topic_id": topic_id} if topic_id is not None else {}),
        error_code=errors.NONE,
        error_message=None,
        num_partitions=partitions,
        replication_factor=1,
        configs=[
            _Config(
                name=key,
                value=value,
                read_only=False,
                config_source=_TOPIC_CONFIG if key in configs else _DEFAULT_CONFIG,
                is_sensitive=False,
            )
            for key, value in sorted(shown.items())
        ],
    )


def _failed(name: str, code: int, message: str) -> Any:
    return _Created(
        name=name,
        error_code=code,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=[],
    )


async def handle_delete_topics(ctx: BrokerContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    names = [t.name for t in req.topics] if req.API_VERSION >= 6 else list(req.topic_names)
    results = []
    for name in names:
        try:
            if name is None:
                raise InvalidConfig("deleting a topic by id is not supported")
            ctx.require(KAFKA[ApiKey.DELETE_TOPICS].need(TOPIC), name)
            validate_topic_name(name)
            await asyncio.to_thread(ctx.metadata.delete_topic, name, ctx.clock.now_ms())
            ctx.agent.forget_topic(name)
            results.append(_Deleted(name=name, error_code=errors.NONE, error_message=None))
        except StrataError as exc:
            results.append(_Deleted(name=name, error_code=errors.kafka_error(exc), error_message=exc.message))
    return DeleteTopicsResponse[req.API_VERSION](throttle_time_ms=0, responses=results)


def _assignment(ctx: BrokerContext, topic: Any) -> int | tuple[int, str]:
    """The partition count of a manual assignment, or (error code, message) as Kafka's broker answers."""
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        return (
            errors.INVALID_REQUEST,
            "with a replica assignment, numPartitions and replicationFactor must be -1",
        )
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        return errors.INVALID_REPLICA_ASSIGNMENT, "assigned partitions must be 0..n-1, each once"
    problem = _unknown_replicas(ctx, topic.assignments)
    return len(indexes) if problem is None else (errors.INVALID_REPLICA_ASSIGNMENT, problem)


async def _new_partitions_problem(ctx: BrokerContext, topic: Any) -> tuple[int, str] | None:
    """CreatePartitions' assignment: one replica list per new partition, as Kafka checks it."""
    info = await asyncio.to_thread(ctx.metadata.get_topic, topic.name)
    new = topic.count - info.partitions
    if len(topic.assignments) != new:
        return (
            errors.INVALID_REPLICA_ASSIGNMENT,
            f"{len(topic.assignments)} assignments for {new} new partitions",
        )
    problem = _unknown_replicas(ctx, topic.assignments)
    return None if problem is None else (errors.INVALID_REPLICA_ASSIGNMENT, problem)


def _unknown_replicas(ctx: BrokerContext, assignments: Any) -> str | None:
    """Why an assignment names no replica or one that is not a broker id this agent shows; None if fine."""
    known = {node for node, _, _ in ctx.brokers}
    for a in assignments:
        if not a.broker_ids or not set(a.broker_ids) <= known:
            return f"a partition is assigned to {a.broker_ids}; the brokers are {sorted(known)}"
    return None


async def handle_create_partitions(
    ctx: BrokerContext, req: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    """Grow topics (CreatePartitions, key 37): the same metadata call as POST /v1/topics/{t}/partitions."""
    results = []
    for topic in req.topics:
        code, message = errors.NONE, None
        try:
            ctx.require(KAFKA[ApiKey.CREATE_PARTITIONS].need(TOPIC), topic.name)
            validate_topic_name(topic.name)
            if not 1 <= topic.count <= MAX_PARTITIONS:
                raise InvalidPartitionCount(f"partitions must be 1..{MAX_PARTITIONS}, got {topic.count}")
            problem = await _new_partitions_problem(ctx, topic) if topic.assignments else None
            if problem is not None:
                code, message = problem
            elif req.validate_only:
                info = await asyncio.to_thread(ctx.metadata.get_topic, topic.name)
                if topic.count <= info.partitions:
                    raise InvalidPartitionCount(
                        f"topic {topic.name!r} already has {info.partitions} partitions"
                    )
            else:
                await asyncio.to_thread(ctx.metadata.add_partitions, topic.name, topic.count)
                ctx.agent.forget_topic(topic.name)
        except StrataError as exc:
            code, message = errors.kafka_error(exc), exc.message
        results.append(
            CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=topic.name, error_code=code, error_message=message
            )
        )
    return CreatePartitionsResponse[req.API_VERSION](throttle_time_ms=0, results=results)
