"""The transaction APIs' requests for the permission walk (tests/kafka/test_permission_table.py): one
request per need, answered with the need's denial code when only that permission is missing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
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

from agents.permissions import ApiKey
from storage.acl_model import ResourceType
from storage.metadata.coordination import TransactionStore

TXN = "tx"
# (request, response class, the answer's code for the need; FILTERED where a listing leaves it out)
Ask = tuple[Any, Any, Callable[[Any], int]]


def txn_case(
    key: int,
    resource: ResourceType,
    topic: str,
    group: str,
    record: bytes,
    filtered: int,
    store: TransactionStore,
) -> Ask | None:
    """The request for a need of a transaction API (or Produce's transactional id); None for other APIs.
    The describing APIs get an open transaction to describe, writing to ``topic``."""
    if key == ApiKey.PRODUCE and resource is ResourceType.TRANSACTIONAL_ID:
        T = ProduceRequest.TopicProduceData
        req = ProduceRequest[7](
            transactional_id=TXN,
            acks=1,
            timeout_ms=10_000,
            topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=record)])],
        )
        return req, ProduceResponse, lambda a: a.responses[0].partition_responses[0].error_code
    if key == ApiKey.ADD_PARTITIONS_TO_TXN:
        t = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])
        req = AddPartitionsToTxnRequest[3](
            v3_and_below_transactional_id=TXN,
            v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[t],
        )
        return (
            req,
            AddPartitionsToTxnResponse,
            lambda a: a.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        )
    if key == ApiKey.ADD_OFFSETS_TO_TXN:
        req = AddOffsetsToTxnRequest[3](transactional_id=TXN, producer_id=1, producer_epoch=0, group_id=group)
        return req, AddOffsetsToTxnResponse, lambda a: a.error_code
    if key == ApiKey.END_TXN:
        req = EndTxnRequest[3](transactional_id=TXN, producer_id=1, producer_epoch=0, committed=True)
        return req, EndTxnResponse, lambda a: a.error_code
    if key == ApiKey.TXN_OFFSET_COMMIT:
        T2 = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        p = T2.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=None
        )
        req = TxnOffsetCommitRequest[3](
            transactional_id=TXN,
            group_id=group,
            producer_id=1,
            producer_epoch=0,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=[T2(name=topic, partitions=[p])],
        )
        return req, TxnOffsetCommitResponse, lambda a: a.topics[0].partitions[0].error_code
    if key == ApiKey.DESCRIBE_PRODUCERS:
        t3 = DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])
        return (
            DescribeProducersRequest[0](topics=[t3]),
            DescribeProducersResponse,
            lambda a: a.topics[0].partitions[0].error_code,
        )
    if key in (ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS):
        txn_id = f"{TXN}-{topic}"
        given, _ = store.init_transactional_producer(txn_id, 60_000, 900_000, None, 0)
        assert store.add_partitions_to_txn(txn_id, given.producer_id, given.epoch, [(topic, 0)], 0) == {}
        if key == ApiKey.LIST_TRANSACTIONS:
            return (
                ListTransactionsRequest[1](state_filters=[], producer_id_filters=[], duration_filter=-1),
                ListTransactionsResponse,
                lambda a: 0 if any(s.transactional_id == txn_id for s in a.transaction_states) else filtered,
            )
        if resource is ResourceType.TOPIC:  # the transaction's partitions of topics one may not describe
            return (
                DescribeTransactionsRequest[0](transactional_ids=[txn_id]),
                DescribeTransactionsResponse,
                lambda a: 0 if any(t.topic == topic for t in a.transaction_states[0].topics) else filtered,
            )
        return (
            DescribeTransactionsRequest[0](transactional_ids=[txn_id]),
            DescribeTransactionsResponse,
            lambda a: a.transaction_states[0].error_code,
        )
    return None
