"""Metadata (key 3) and DescribeCluster (key 60): this agent is the only broker and leads every partition.

"The only broker" is shown as ``lanes`` broker ids, lane i at the advertised port + i (broker/config.py
says why): partitions' leaders are spread over them, so a client opens that many connections to this
agent.

Leader epoch -1: clients then skip leader-epoch validation (OffsetForLeaderEpoch is not offered). Every
agent behind one load-balanced address can share the node id, since any agent accepts any partition.
Auto-creation follows Kafka's ``auto.create.topics.enable`` and ``num.partitions``.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

from agents.permissions import AUTO_CREATE, CLUSTER, KAFKA, TOPIC, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.errors import StrataError, TopicExists, UnknownTopic
from storage.metadata.rows import TopicInfo
from storage.topic_config import validate_topic_name

_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition
_ZERO_UUID = uuid.UUID(int=0)
_RULE = KAFKA[ApiKey.METADATA]
_DESCRIBE = _RULE.need(TOPIC)
_AUTO_CREATE = _RULE.need(TOPIC, AUTO_CREATE)
_CLUSTER = KAFKA[ApiKey.DESCRIBE_CLUSTER].need(CLUSTER)


async def handle_metadata(ctx: BrokerContext, req: MetadataRequest) -> MetadataResponse:
    version = req.API_VERSION
    node = ctx.config.node_id
    if req.topics is None or (version == 0 and not req.topics):
        # Every topic this principal may describe (Kafka lists only those, without an error).
        names = [n for n in await asyncio.to_thread(ctx.metadata.list_topics) if ctx.may(_DESCRIBE, n)]
        auto_create = False
    else:
        names = [t.name for t in req.topics]
        auto_create = ctx.config.auto_create_topics and (version < 4 or req.allow_auto_topic_creation)
    topics = [await _topic(ctx, name, auto_create) for name in names]
    return MetadataResponse[version](
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=lane, host=host, port=port, rack=None)
            for lane, host, port in ctx.brokers
        ],
        cluster_id=ctx.config.cluster_id,
        controller_id=node,
        topics=topics,
    )


async def _topic(ctx: BrokerContext, name: str, auto_create: bool) -> Any:
    try:
        info = await _lookup(ctx, name, auto_create)
    except StrataError as exc:
        return _Topic(
            error_code=errors.kafka_error(exc),
            name=name,
            topic_id=_ZERO_UUID,
            is_internal=False,
            partitions=[],
        )
    leader = ctx.leader
    partitions = [
        _Partition(
            error_code=0,
            partition_index=p,
            leader_id=(node := leader(name, p)),
            leader_epoch=-1,
            replica_nodes=[node],
            isr_nodes=[node],
            offline_replicas=[],
        )
        for p in range(info.partitions)
    ]
    return _Topic(
        error_code=0, name=name, topic_id=ctx.topic_id(info), is_internal=False, partitions=partitions
    )


async def _lookup(ctx: BrokerContext, name: str, auto_create: bool) -> TopicInfo:
    validate_topic_name(name)
    ctx.require(_DESCRIBE, name)
    try:
        return await asyncio.to_thread(ctx.metadata.get_topic, name)
    except UnknownTopic:
        if not auto_create:
            raise
    # Auto-creation creates a topic: only for a principal allowed to (CREATE on the name or the cluster);
    # refused, Kafka answers TOPIC_AUTHORIZATION_FAILED.
    ctx.require(_AUTO_CREATE, name)
    try:
        now = ctx.clock.now_ms()
        await asyncio.to_thread(ctx.metadata.create_topic, name, ctx.config.num_partitions, {}, now)
    except TopicExists:
        pass  # another client or agent created it first
    return await asyncio.to_thread(ctx.metadata.get_topic, name)


async def handle_describe_cluster(ctx: BrokerContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    if not ctx.may(_CLUSTER):
        return DescribeClusterResponse[req.API_VERSION](
            throttle_time_ms=0,
            error_code=errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message="not allowed to describe the cluster",
            endpoint_type=1,
            cluster_id=ctx.config.cluster_id,
            controller_id=-1,
            brokers=[],
        )
    brokers = [
        DescribeClusterResponse.DescribeClusterBroker(broker_id=lane, host=host, port=port, rack=None)
        for lane, host, port in ctx.brokers
    ]
    return DescribeClusterResponse[req.API_VERSION](
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=ctx.config.cluster_id,
        controller_id=ctx.config.node_id,
        brokers=brokers,
    )
