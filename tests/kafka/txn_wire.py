"""Raw transaction requests for tests/kafka/test_transactions_wire.py: one function per API, built with
kafka-python's protocol classes at a given version and sent over a ``Wire``, answering the error codes (and
offsets) the tests assert on. ``retry`` repeats a call while Kafka's answer is one it gives only for a while
(a coordinator still loading, a transaction still completing).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.kafka.wire import Wire

# Kafka's error codes (clients/src/main/java/org/apache/kafka/common/protocol/Errors.java).
NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90

# A fresh Kafka creates __transaction_state and __consumer_offsets at the first question about a
# coordinator and answers these until it has; clients retry them.
NOT_READY = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)
SETTLE_S = 15.0
READ_COMMITTED, READ_UNCOMMITTED = 1, 0
LATEST = -1


def retry(call: Callable[[], Any], code: Callable[[Any], int], retriable: tuple[int, ...]) -> Any:
    """``call()`` again while its answer's ``code`` is one of ``retriable``; the first other answer."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        answer = call()
        if code(answer) not in retriable:
            return answer
        assert time.monotonic() < deadline, f"still {code(answer)} after {SETTLE_S} s"
        time.sleep(0.05)


def find_coordinator(wire: Wire, key: str, key_type: int, version: int = 3) -> tuple[int, int, str, int]:
    """(error, node id, host, port) of the coordinator of ``key``."""

    def ask() -> tuple[int, int, str, int]:
        if version >= 4:
            r = wire.call(
                FindCoordinatorRequest[version](key_type=key_type, coordinator_keys=[key]),
                FindCoordinatorResponse,
            )
            c = r.coordinators[0]
            assert c.key == key
            return c.error_code, c.node_id, c.host, c.port
        r = wire.call(FindCoordinatorRequest[version](key=key, key_type=key_type), FindCoordinatorResponse)
        return r.error_code, r.node_id, r.host, r.port

    found: tuple[int, int, str, int] = retry(ask, lambda a: a[0], NOT_READY)
    return found


def init_producer_id(
    wire: Wire, txn: str, version: int = 4, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1
) -> Any:
    def ask() -> Any:
        request = InitProducerIdRequest[version](
            transactional_id=txn, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch
        )
        return wire.call(request, InitProducerIdResponse)

    return retry(ask, lambda r: r.error_code, NOT_READY)


def begun(wire: Wire, txn: str) -> tuple[int, int]:
    """A transactional id initialised: its (producer id, epoch)."""
    find_coordinator(wire, txn, 1)
    r = init_producer_id(wire, txn)
    assert r.error_code == NONE, r
    return r.producer_id, r.producer_epoch


def add_partitions(
    wire: Wire, txn: str, pid: int, epoch: int, topic: str, partitions: list[int], version: int = 0
) -> dict[int, int]:
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    request = AddPartitionsToTxnRequest[version](
        v3_and_below_transactional_id=txn,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T(name=topic, partitions=partitions)],
    )
    r = wire.call(request, AddPartitionsToTxnResponse)
    return {
        p.partition_index: p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def add_offsets(wire: Wire, txn: str, pid: int, epoch: int, group: str, version: int = 0) -> int:
    request = AddOffsetsToTxnRequest[version](
        transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group
    )
    code: int = wire.call(request, AddOffsetsToTxnResponse).error_code
    return code


def end_txn(wire: Wire, txn: str, pid: int, epoch: int, commit: bool, version: int = 1) -> int:
    request = EndTxnRequest[version](
        transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit
    )
    code: int = wire.call(request, EndTxnResponse).error_code
    return code


def end_txn_settled(wire: Wire, txn: str, pid: int, epoch: int, commit: bool, version: int = 1) -> int:
    """EndTxn's answer once the previous end is complete: Kafka answers CONCURRENT_TRANSACTIONS until then."""
    code: int = retry(
        lambda: end_txn(wire, txn, pid, epoch, commit, version), lambda c: c, (CONCURRENT_TRANSACTIONS,)
    )
    return code


def txn_offset_commit(
    wire: Wire, txn: str, group: str, pid: int, epoch: int, topic: str, offset: int, version: int = 3
) -> int:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    request = TxnOffsetCommitRequest[version](
        transactional_id=txn,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            T(name=topic, partitions=[P(partition_index=0, committed_offset=offset, committed_metadata="")])
        ],
    )
    [code] = [p.error_code for t in wire.call(request, TxnOffsetCommitResponse).topics for p in t.partitions]
    assert isinstance(code, int)
    return code


def offset_fetch(
    wire: Wire, group: str, topic: str, require_stable: bool, version: int = 7
) -> tuple[int, int]:
    """(committed offset, partition error) of partition 0."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    request = OffsetFetchRequest[version](
        group_id=group, topics=[T(name=topic, partition_indexes=[0])], require_stable=require_stable
    )
    r = wire.call(request, OffsetFetchResponse)
    assert r.error_code == NONE
    [answer] = [(p.committed_offset, p.error_code) for t in r.topics for p in t.partitions]
    return answer


def transactional_batch(pid: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, sequence, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce(
    wire: Wire, txn: str, topic: str, partition: int, batch: bytes, version: int = 9
) -> tuple[int, int]:
    """(error, base offset) of a transactional produce to one partition."""
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    request = ProduceRequest[version](
        transactional_id=txn,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[T(name=topic, partition_data=[P(index=partition, records=batch)])],
    )

    def ask() -> tuple[int, int]:
        [answer] = [
            (p.error_code, p.base_offset)
            for t in wire.call(request, ProduceResponse).responses
            for p in t.partition_responses
        ]
        return answer

    # A topic just created on Kafka may not be led by its broker yet: NOT_LEADER_OR_FOLLOWER, nothing
    # appended, and a client retries.
    answer: tuple[int, int] = retry(ask, lambda a: a[0], (NOT_LEADER_OR_FOLLOWER,))
    return answer


def fetch(wire: Wire, topic: str, isolation: int, offset: int = 0, version: int = 11) -> Any:
    """Partition 0's answer to a Fetch from ``offset``."""
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    request = FetchRequest[version](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            T(
                topic=topic,
                partitions=[
                    P(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    answer = wire.call(request, FetchResponse).responses[0].partitions[0]
    assert answer.error_code == NONE
    return answer


def latest_offset(wire: Wire, topic: str, isolation: int, version: int = 2) -> int:
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition
    request = ListOffsetsRequest[version](
        replica_id=-1,
        isolation_level=isolation,
        topics=[T(name=topic, partitions=[P(partition_index=0, timestamp=LATEST)])],
    )
    answer = wire.call(request, ListOffsetsResponse).topics[0].partitions[0]
    assert answer.error_code == NONE
    offset: int = answer.offset
    return offset


def aborted(answer: Any) -> list[tuple[int, int]] | None:
    if answer.aborted_transactions is None:
        return None
    return [(a.producer_id, a.first_offset) for a in answer.aborted_transactions]
