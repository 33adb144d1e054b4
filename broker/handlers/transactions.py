"""The transaction APIs a producer sends its coordinator: AddPartitionsToTxn (24), AddOffsetsToTxn (25),
EndTxn (26) and TxnOffsetCommit (28), versions 0-3 (transaction version 1; the versions after carry
KIP-890's verification between brokers and its epoch bump per transaction, which no client here sends).

Every one is one metadata transaction (agents/transactions.py, storage/metadata/sql/transactions.py), on
whichever agent the client asked: FindCoordinator answers any agent for any transactional id. A stale
epoch is PRODUCER_FENCED from v2 (KIP-588) and INVALID_PRODUCER_EPOCH before; the metadata store down is
COORDINATOR_NOT_AVAILABLE, which clients retry after finding the coordinator again.

AddPartitionsToTxn adds all its partitions or none: an unknown one is UNKNOWN_TOPIC_OR_PARTITION, one the
principal may not write is TOPIC_AUTHORIZATION_FAILED, and the others then get OPERATION_NOT_ATTEMPTED,
as Kafka answers. TxnOffsetCommit checks the member from v3 on (KIP-447), as an OffsetCommit.
"""

from __future__ import annotations

from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from agents.permissions import GROUP, KAFKA, TOPIC, TRANSACTIONAL_ID, ApiKey
from broker import errors
from broker.context import BrokerContext
from broker.handlers.group_offsets import MAX_METADATA
from storage.errors import StrataError
from storage.metadata.rows import OffsetToCommit

# The first versions whose clients understand PRODUCER_FENCED (KIP-588).
_FENCED_FROM_VERSION = 2
_ADD_PARTITIONS = KAFKA[ApiKey.ADD_PARTITIONS_TO_TXN]
_ADD_OFFSETS = KAFKA[ApiKey.ADD_OFFSETS_TO_TXN]
_END = KAFKA[ApiKey.END_TXN]
_TXN_COMMIT = KAFKA[ApiKey.TXN_OFFSET_COMMIT]

_APTopic = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_APPartition = _APTopic.AddPartitionsToTxnPartitionResult
_TCTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_TCPartition = _TCTopic.TxnOffsetCommitResponsePartition


async def handle_add_partitions_to_txn(
    ctx: BrokerContext, req: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    version = req.API_VERSION
    txn_id = req.v3_and_below_transactional_id
    wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    codes: dict[tuple[str, int], int] = {}
    if not ctx.may(_ADD_PARTITIONS.need(TRANSACTIONAL_ID), txn_id):
        codes = dict.fromkeys(wanted, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        denied = {key for key in wanted if not ctx.may(_ADD_PARTITIONS.need(TOPIC), key[0])}
        if denied:
            codes = {
                k: errors.TOPIC_AUTHORIZATION_FAILED if k in denied else errors.OPERATION_NOT_ATTEMPTED
                for k in wanted
            }
        else:
            try:
                refused = await ctx.agent.transactions.add_partitions(
                    txn_id, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch, wanted
                )
                codes = (
                    {
                        k: errors.kafka_error(refused[k]) if k in refused else errors.OPERATION_NOT_ATTEMPTED
                        for k in wanted
                    }
                    if refused
                    else dict.fromkeys(wanted, errors.NONE)
                )
            except StrataError as exc:
                codes = dict.fromkeys(wanted, errors.kafka_txn_error(exc, version, _FENCED_FROM_VERSION))
    topics = [
        _APTopic(
            name=t.name,
            results_by_partition=[
                _APPartition(partition_index=p, partition_error_code=codes[(t.name, p)]) for p in t.partitions
            ],
        )
        for t in req.v3_and_below_topics
    ]
    return AddPartitionsToTxnResponse[version](throttle_time_ms=0, results_by_topic_v3_and_below=topics)


async def handle_add_offsets_to_txn(
    ctx: BrokerContext, req: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    version = req.API_VERSION
    if not ctx.may(_ADD_OFFSETS.need(TRANSACTIONAL_ID), req.transactional_id):
        code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.may(_ADD_OFFSETS.need(GROUP), req.group_id):
        code = errors.GROUP_AUTHORIZATION_FAILED
    else:
        try:
            await ctx.agent.transactions.add_offsets(
                req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
            )
            code = errors.NONE
        except StrataError as exc:
            code = errors.kafka_txn_error(exc, version, _FENCED_FROM_VERSION)
    return AddOffsetsToTxnResponse[version](throttle_time_ms=0, error_code=code)


async def handle_end_txn(ctx: BrokerContext, req: EndTxnRequest) -> EndTxnResponse:
    version = req.API_VERSION
    if not ctx.may(_END.need(TRANSACTIONAL_ID), req.transactional_id):
        code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        try:
            await ctx.agent.transactions.end(
                req.transactional_id, req.producer_id, req.producer_epoch, req.committed
            )
            code = errors.NONE
        except StrataError as exc:
            code = errors.kafka_txn_error(exc, version, _FENCED_FROM_VERSION)
    return EndTxnResponse[version](throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)


async def handle_txn_offset_commit(
    ctx: BrokerContext, req: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    version = req.API_VERSION
    codes: dict[tuple[str, int], int] = {}
    offsets: list[OffsetToCommit] = []
    for topic in req.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            metadata = p.committed_metadata
            if metadata is not None and len(metadata.encode()) > MAX_METADATA:
                codes[key] = errors.OFFSET_METADATA_TOO_LARGE
            elif not ctx.may(_TXN_COMMIT.need(TOPIC), topic.name):
                codes[key] = errors.TOPIC_AUTHORIZATION_FAILED
            else:
                epoch = p.committed_leader_epoch if version >= 2 else -1
                offsets.append(
                    OffsetToCommit(topic.name, p.partition_index, p.committed_offset, metadata, epoch)
                )
    whole: int | None = None
    if not ctx.may(_TXN_COMMIT.need(TRANSACTIONAL_ID), req.transactional_id):
        whole = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.may(_TXN_COMMIT.need(GROUP), req.group_id):
        whole = errors.GROUP_AUTHORIZATION_FAILED
    else:
        member = (req.member_id, req.group_instance_id, req.generation_id) if version >= 3 else None
        try:
            refused = await ctx.agent.transactions.commit_offsets(
                req.transactional_id, req.group_id, req.producer_id, req.producer_epoch, member, offsets
            )
            for o in offsets:
                exc = refused.get((o.topic, o.partition))
                codes[(o.topic, o.partition)] = errors.NONE if exc is None else errors.kafka_error(exc)
        except StrataError as exc:
            # TxnOffsetCommit has no PRODUCER_FENCED before KIP-890's v4: INVALID_PRODUCER_EPOCH.
            whole = errors.kafka_txn_error(exc, version, fenced_from=4)
    if whole is not None:
        for o in offsets:
            codes[(o.topic, o.partition)] = whole
    topics = [
        _TCTopic(
            name=t.name,
            partitions=[
                _TCPartition(partition_index=p.partition_index, error_code=codes[(t.name, p.partition_index)])
                for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    return TxnOffsetCommitResponse[version](throttle_time_ms=0, topics=topics)
