"""DeleteRecords (key 21): move partitions' log start up, through the same code as the HTTP door's
``DELETE .../records`` (agents/delete_records.py, which states Kafka's rules).

Per partition: offset -1 deletes up to the high watermark; the answer's low watermark is the log start
afterwards, or -1 with the error (Kafka's INVALID_LOW_WATERMARK). Deleting needs admin on the topic, as
deleting the topic does. ``timeout_ms`` is not waited on: the metadata commit is the whole operation.
"""

from __future__ import annotations

import asyncio

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from agents.delete_records import delete_records
from agents.permissions import KAFKA, TOPIC, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.errors import StrataError

_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Partition = _Topic.DeleteRecordsPartitionResult
HIGH_WATERMARK = -1  # Kafka's DeleteRecordsRequest.HIGH_WATERMARK
INVALID_LOW_WATERMARK = -1


async def handle_delete_records(ctx: BrokerContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            try:
                ctx.require(KAFKA[ApiKey.DELETE_RECORDS].need(TOPIC), topic.name)
                before = None if p.offset == HIGH_WATERMARK else p.offset
                state = await asyncio.to_thread(
                    delete_records, ctx.metadata, topic.name, p.partition_index, before, ctx.clock.now_ms()
                )
                low, code = state.log_start_offset, errors.NONE
            except StrataError as exc:
                low, code = INVALID_LOW_WATERMARK, errors.kafka_error(exc)
            partitions.append(
                _Partition(partition_index=p.partition_index, low_watermark=low, error_code=code)
            )
        topics.append(_Topic(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse[req.API_VERSION](throttle_time_ms=0, topics=topics)
