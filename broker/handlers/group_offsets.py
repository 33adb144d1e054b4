"""OffsetCommit (8), OffsetFetch (9) and OffsetDelete (47): a group's committed positions, the same rows
the HTTP API's group offsets read and write, so a group's position is visible from both front doors.

OffsetCommit: a member commits with its generation (a commit from an old generation, or during a
rebalance, is refused: ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS); generation -1 with no member id is a
"simple" commit, accepted while the group has no members (``group_state.check_commit``). The group's error,
if any, is every partition's error. Partitions of unknown topics are refused one by one; the rest commit.
Metadata strings over ``offset.metadata.max.bytes`` (4096) get OFFSET_METADATA_TOO_LARGE, as Kafka's.
OffsetFetch: v1-7; topics null (v2+) means every committed partition; a partition without a commit
answers offset -1 and no error.
OffsetDelete: as Kafka's, refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) for topics the group's members
subscribe to; an unknown group is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from kafka.protocol.consumer.group import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from agents.permissions import GROUP, KAFKA, TOPIC, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.errors import StrataError
from storage.metadata.rows import OffsetToCommit

# Kafka's offset.metadata.max.bytes default.
MAX_METADATA = 4096

_CTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_CPartition = _CTopic.OffsetCommitResponsePartition
_FTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_FPartition = _FTopic.OffsetFetchResponsePartition


_COMMIT = KAFKA[ApiKey.OFFSET_COMMIT]
_FETCH = KAFKA[ApiKey.OFFSET_FETCH]
_DELETE = KAFKA[ApiKey.OFFSET_DELETE]


async def handle_offset_commit(ctx: BrokerContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    version = req.API_VERSION
    codes: dict[tuple[str, int], int] = {}
    offsets = []
    for topic in req.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            metadata = p.committed_metadata
            if metadata is not None and len(metadata.encode()) > MAX_METADATA:
                codes[key] = errors.OFFSET_METADATA_TOO_LARGE
                continue
            if not ctx.may(_COMMIT.need(TOPIC), topic.name):
                codes[key] = errors.TOPIC_AUTHORIZATION_FAILED
                continue
            epoch = p.committed_leader_epoch if version >= 6 else -1
            offsets.append(OffsetToCommit(topic.name, p.partition_index, p.committed_offset, metadata, epoch))
    try:
        ctx.require(_COMMIT.need(GROUP), req.group_id)
        refused = await ctx.agent.groups.commit(
            req.group_id,
            req.member_id,
            req.group_instance_id if version >= 7 else None,
            req.generation_id_or_member_epoch,
            offsets,
        )
        for o in offsets:
            exc = refused.get((o.topic, o.partition))
            codes[(o.topic, o.partition)] = errors.NONE if exc is None else errors.kafka_error(exc)
    except StrataError as exc:
        code = errors.kafka_group_error(exc)
        for o in offsets:
            codes[(o.topic, o.partition)] = code
    topics = [
        _CTopic(
            name=topic.name,
            partitions=[
                _CPartition(
                    partition_index=p.partition_index, error_code=codes[(topic.name, p.partition_index)]
                )
                for p in topic.partitions
            ],
        )
        for topic in req.topics
    ]
    return OffsetCommitResponse[version](throttle_time_ms=0, topics=topics)


async def handle_offset_fetch(ctx: BrokerContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    version = req.API_VERSION
    try:
        ctx.require(_FETCH.need(GROUP), req.group_id)
        committed = {(o.topic, o.partition): o for o in await ctx.agent.groups.offsets(req.group_id)}
        # v7 require_stable: a partition with offsets of an open transaction is UNSTABLE_OFFSET_COMMIT
        # (retriable) until the transaction ends, so a read_committed consumer never starts from offsets
        # the transaction may still change (KIP-447).
        unstable = (
            await ctx.agent.transactions.pending_offsets(req.group_id)
            if version >= 7 and req.require_stable
            else set()
        )
    except StrataError as exc:
        return OffsetFetchResponse[version](
            throttle_time_ms=0, topics=[], error_code=errors.kafka_group_error(exc), groups=[]
        )
    if req.topics is None:  # v2+: every partition the group committed
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(committed):
            if ctx.may(_FETCH.need(TOPIC), topic):  # Kafka leaves out topics not describable
                wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in req.topics}
    topics = []
    for name, partitions in wanted.items():
        rows = []
        readable = ctx.may(_FETCH.need(TOPIC), name)
        for index in partitions:
            o = committed.get((name, index)) if readable else None
            code = errors.NONE if readable else errors.TOPIC_AUTHORIZATION_FAILED
            if readable and (name, index) in unstable:
                o, code = None, errors.UNSTABLE_OFFSET_COMMIT
            rows.append(
                _FPartition(
                    partition_index=index,
                    committed_offset=-1 if o is None else o.offset,
                    committed_leader_epoch=-1 if o is None else o.leader_epoch,
                    metadata="" if o is None or o.metadata is None else o.metadata,
                    error_code=code,
                )
            )
        topics.append(_FTopic(name=name, partitions=rows))
    return OffsetFetchResponse[version](throttle_time_ms=0, topics=topics, error_code=errors.NONE, groups=[])


_DTopic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_DPartition = _DTopic.OffsetDeleteResponsePartition


async def handle_offset_delete(ctx: BrokerContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    version = req.API_VERSION
    # Kafka: DELETE on the group, and READ on each topic (a partition of a topic not readable is refused).
    unreadable = {t.name for t in req.topics if not ctx.may(_DELETE.need(TOPIC), t.name)}
    partitions = [
        (t.name, p.partition_index) for t in req.topics for p in t.partitions if t.name not in unreadable
    ]
    try:
        ctx.require(_DELETE.need(GROUP), req.group_id)
        kept = await ctx.agent.groups.delete_offsets(req.group_id, partitions)
    except StrataError as exc:
        return OffsetDeleteResponse[version](
            error_code=errors.kafka_group_error(exc), throttle_time_ms=0, topics=[]
        )
    topics = [
        _DTopic(
            name=t.name,
            partitions=[
                _DPartition(
                    partition_index=p.partition_index,
                    error_code=errors.TOPIC_AUTHORIZATION_FAILED
                    if t.name in unreadable
                    else errors.GROUP_SUBSCRIBED_TO_TOPIC
                    if (t.name, p.partition_index) in kept
                    else errors.NONE,
                )
                for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    return OffsetDeleteResponse[version](error_code=errors.NONE, throttle_time_ms=0, topics=topics)
