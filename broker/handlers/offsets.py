"""ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3, KIP-734) and by timestamp.

By timestamp: the first offset, in offset order, whose record timestamp is >= the one asked for, found
through the chunk rows' min/max timestamps and one chunk read; offset -1 if there is none (as Kafka).
Leader epoch -1 throughout, so clients skip epoch validation.

As Kafka's broker: a partition asked twice in one request gets one answer, INVALID_REQUEST; max
timestamp below version 7 (the version that brought it) is UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from collections import Counter

from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse

from agents.permissions import KAFKA, TOPIC, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.errors import StrataError, UnknownPartition

_Topic = ListOffsetsResponse.ListOffsetsTopicResponse
_Partition = _Topic.ListOffsetsPartitionResponse
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


MAX_TIMESTAMP_FROM_VERSION = 7


READ_COMMITTED = 1


async def handle_list_offsets(ctx: BrokerContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    # isolation_level (v2+): read_committed's latest offset is the last stable offset, as Kafka's.
    committed = req.API_VERSION >= 2 and req.isolation_level == READ_COMMITTED
    topics = []
    for topic in req.topics:
        partitions = []
        asked = Counter(p.partition_index for p in topic.partitions)
        answered: set[int] = set()
        for p in topic.partitions:
            if p.partition_index in answered:
                continue
            answered.add(p.partition_index)
            offset, timestamp = -1, -1
            if asked[p.partition_index] > 1:
                code = errors.INVALID_REQUEST
            elif p.timestamp == MAX_TIMESTAMP and req.API_VERSION < MAX_TIMESTAMP_FROM_VERSION:
                code = errors.UNSUPPORTED_VERSION
            else:
                try:
                    offset, timestamp = await _lookup(
                        ctx, topic.name, p.partition_index, p.timestamp, committed
                    )
                    code = errors.NONE
                except StrataError as exc:
                    offset, timestamp, code = -1, -1, errors.kafka_error(exc)
            partitions.append(
                _Partition(
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=-1,
                )
            )
        topics.append(_Topic(name=topic.name, partitions=partitions))
    return ListOffsetsResponse[req.API_VERSION](throttle_time_ms=0, topics=topics)


async def _lookup(
    ctx: BrokerContext, topic: str, partition: int, spec: int, read_committed: bool
) -> tuple[int, int]:
    ctx.require(KAFKA[ApiKey.LIST_OFFSETS].need(TOPIC), topic)
    fetcher = ctx.agent.fetcher
    cached = await ctx.agent.topic(topic)
    if not 0 <= partition < cached.info.partitions:
        raise UnknownPartition(f"topic {topic!r} has no partition {partition}")
    if spec == LATEST:
        state = await fetcher.state(topic, partition)
        return (state.last_stable_offset if read_committed else state.high_watermark), -1
    if spec == EARLIEST:
        return (await fetcher.state(topic, partition)).log_start_offset, -1
    found = (
        await fetcher.max_timestamp_offset(topic, partition)
        if spec == MAX_TIMESTAMP
        else await fetcher.offset_for_timestamp(topic, partition, spec)
    )
    return found if found is not None else (-1, -1)
