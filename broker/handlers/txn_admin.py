"""What ``kafka-transactions`` asks: DescribeTransactions (65), ListTransactions (66, v0-1) and
DescribeProducers (61), read from the transaction rows every agent shares.

States are Kafka's names; Strata's coordinator has no Prepare* states (one metadata transaction ends a
transaction), so those never appear, and filtering on them finds nothing (they are known states, not
``unknown_state_filters``). A listing leaves out the ids the principal may not describe, as Kafka's.
"""

from __future__ import annotations

from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)

from agents.permissions import KAFKA, TOPIC, TRANSACTIONAL_ID, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.errors import StrataError

# Kafka's TransactionState names (ListTransactions filters on them).
KAFKA_STATES = frozenset(
    {
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "PrepareEpochFence",
        "Dead",
    }
)
_DESCRIBE = KAFKA[ApiKey.DESCRIBE_TRANSACTIONS]
_LIST = KAFKA[ApiKey.LIST_TRANSACTIONS]
_PRODUCERS = KAFKA[ApiKey.DESCRIBE_PRODUCERS]
_DState = DescribeTransactionsResponse.TransactionState
_LState = ListTransactionsResponse.TransactionState
_PTopic = DescribeProducersResponse.TopicResponse
_PPartition = _PTopic.PartitionResponse
_PState = _PPartition.ProducerState


async def handle_describe_transactions(
    ctx: BrokerContext, req: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    states = []
    for txn_id in req.transactional_ids:
        if not ctx.may(_DESCRIBE.need(TRANSACTIONAL_ID), txn_id):
            states.append(_empty(txn_id, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        try:
            described = await ctx.agent.transactions.describe(txn_id)
        except StrataError as exc:
            states.append(_empty(txn_id, errors.kafka_group_error(exc)))
            continue
        by_topic: dict[str, list[int]] = {}
        for p in described.partitions:
            if ctx.may(_DESCRIBE.need(TOPIC), p.topic):
                by_topic.setdefault(p.topic, []).append(p.partition)
        txn = described.txn
        states.append(
            _DState(
                error_code=errors.NONE,
                transactional_id=txn_id,
                transaction_state=txn.state.value,
                transaction_timeout_ms=txn.timeout_ms,
                transaction_start_time_ms=-1 if txn.started_ms is None else txn.started_ms,
                producer_id=txn.producer_id,
                producer_epoch=txn.epoch,
                topics=[_DState.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
        )
    return DescribeTransactionsResponse[req.API_VERSION](throttle_time_ms=0, transaction_states=states)


def _empty(txn_id: str, code: int) -> object:
    return _DState(
        error_code=code,
        transactional_id=txn_id,
        transaction_state="",
        transaction_timeout_ms=0,
        transaction_start_time_ms=-1,
        producer_id=-1,
        producer_epoch=-1,
        topics=[],
    )


async def handle_list_transactions(
    ctx: BrokerContext, req: ListTransactionsRequest
) -> ListTransactionsResponse:
    version = req.API_VERSION
    wanted_states = set(req.state_filters)
    wanted_ids = set(req.producer_id_filters)
    # v1 (KIP-994): only transactions running longer than this many milliseconds; -1 for all.
    longer_than = req.duration_filter if version >= 1 else -1
    try:
        found = await ctx.agent.transactions.list_all()
    except StrataError as exc:
        return ListTransactionsResponse[version](
            throttle_time_ms=0,
            error_code=errors.kafka_group_error(exc),
            unknown_state_filters=[],
            transaction_states=[],
        )
    now = ctx.clock.now_ms()
    listed = [
        _LState(
            transactional_id=t.transactional_id, producer_id=t.producer_id, transaction_state=t.state.value
        )
        for t in found
        if (not wanted_states or t.state.value in wanted_states)
        and (not wanted_ids or t.producer_id in wanted_ids)
        and (longer_than < 0 or (t.started_ms is not None and now - t.started_ms > longer_than))
        and ctx.may(_LIST.need(TRANSACTIONAL_ID), t.transactional_id)
    ]
    return ListTransactionsResponse[version](
        throttle_time_ms=0,
        error_code=errors.NONE,
        unknown_state_filters=sorted(wanted_states - KAFKA_STATES),
        transaction_states=listed,
    )


async def handle_describe_producers(
    ctx: BrokerContext, req: DescribeProducersRequest
) -> DescribeProducersResponse:
    topics = []
    for topic in req.topics:
        partitions = []
        allowed = ctx.may(_PRODUCERS.need(TOPIC), topic.name)
        for index in topic.partition_indexes:
            if not allowed:
                partitions.append(_partition(index, errors.TOPIC_AUTHORIZATION_FAILED, []))
                continue
            try:
                producers = await ctx.agent.transactions.producers(topic.name, index)
            except StrataError as exc:
                partitions.append(_partition(index, errors.kafka_error(exc), []))
                continue
            partitions.append(
                _partition(
                    index,
                    errors.NONE,
                    [
                        _PState(
                            producer_id=p.producer_id,
                            producer_epoch=p.epoch,
                            last_sequence=p.last_sequence,
                            last_timestamp=p.last_timestamp_ms,
                            coordinator_epoch=0,
                            current_txn_start_offset=p.txn_start_offset,
                        )
                        for p in producers
                    ],
                )
            )
        topics.append(_PTopic(name=topic.name, partitions=partitions))
    return DescribeProducersResponse[req.API_VERSION](throttle_time_ms=0, topics=topics)


def _partition(index: int, code: int, producers: list[object]) -> object:
    return _PPartition(partition_index=index, error_code=code, error_message=None, active_producers=producers)
