"""The transaction APIs' error codes on the wire as Kafka answers them, on Strata and the reference broker.

Raw requests (tests/kafka/wire.py with kafka-python's protocol classes) at the versions clients send:

==================  ===========  ============  ========  =======  ========
API                 librdkafka   kafka-python  aiokafka  kafkajs  fenced →
==================  ===========  ============  ========  =======  ========
InitProducerId      4            4             0         1
AddPartitionsToTxn  0            3             0         1        47 < v2 ≤ 90
AddOffsetsToTxn     0            3             0         1        47 < v2 ≤ 90
EndTxn              1            3             0         1        47 < v2 ≤ 90
TxnOffsetCommit     3            3             0         1
==================  ===========  ============  ========  =======  ========

(a stale epoch is INVALID_PRODUCER_EPOCH (47) below v2 and PRODUCER_FENCED (90) from v2, KIP-588). Where
Kafka's answer depends on timing, the test says why it accepts two: after EndTxn, Kafka's coordinator is in
PrepareCommit/PrepareAbort until the markers are written, and answers CONCURRENT_TRANSACTIONS to anything
about that transactional id meanwhile; a client retries, and so do these tests, until the final answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
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

from tests.fixtures.targets import Target, unique
from tests.kafka.transactions import create_topics
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

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


@pytest.mark.parametrize("version", [1, 3, 4])
def test_find_coordinator_for_a_transactional_id(target: Target, version: int) -> None:
    with Wire(target.port) as wire:
        error, node, host, port = find_coordinator(wire, unique("txn"), 1, version)
    assert error == NONE
    assert node >= 0
    assert f"{host}:{port}" == target.bootstrap


@pytest.mark.parametrize("version", [0, 1, 4])
def test_init_producer_id_with_a_transactional_id(target: Target, version: int) -> None:
    txn = unique("txn")
    with Wire(target.port) as wire:
        find_coordinator(wire, txn, 1)
        first = init_producer_id(wire, txn, version)
        assert (first.error_code, first.producer_epoch) == (NONE, 0)
        assert first.producer_id >= 0
        # The same id again, as a restarted producer asks: the same producer id, the next epoch.
        again = init_producer_id(wire, txn, version)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, first.producer_id, 1)
        # Another transactional id has a producer id of its own.
        other = init_producer_id(wire, unique("txn"), version)
        assert other.error_code == NONE
        assert other.producer_id != first.producer_id


@pytest.mark.parametrize("version", [0, 1, 4])
def test_init_producer_id_refuses_a_bad_timeout_or_an_empty_id(target: Target, version: int) -> None:
    with Wire(target.port) as wire:
        txn = unique("txn")
        find_coordinator(wire, txn, 1)
        # transaction.max.timeout.ms is 900000 by default.
        refused = init_producer_id(wire, txn, version, timeout_ms=900_001)
        assert (refused.error_code, refused.producer_id) == (INVALID_TRANSACTION_TIMEOUT, -1)
        refused = init_producer_id(wire, txn, version, timeout_ms=2147483647)
        assert (refused.error_code, refused.producer_id) == (INVALID_TRANSACTION_TIMEOUT, -1)
        assert init_producer_id(wire, txn, version, timeout_ms=900_000).error_code == NONE
        assert init_producer_id(wire, "", version).error_code == INVALID_REQUEST


@pytest.mark.parametrize("version", [0, 1, 3])
def test_end_txn_with_nothing_in_the_transaction_is_an_invalid_state(target: Target, version: int) -> None:
    txn = unique("txn")
    with Wire(target.port) as wire:
        pid, epoch = begun(wire, txn)
        assert end_txn(wire, txn, pid, epoch, True, version) == INVALID_TXN_STATE
        assert end_txn(wire, txn, pid, epoch, False, version) == INVALID_TXN_STATE


@pytest.mark.parametrize("version", [0, 1, 3])
def test_an_unknown_producer_id_has_no_mapping(target: Target, version: int) -> None:
    topic, txn, group = unique("tx-raw"), unique("txn"), unique("group")
    create_topics(target.bootstrap, {topic: 1})
    with Wire(target.port) as wire:
        pid, epoch = begun(wire, txn)
        find_coordinator(wire, group, 0)
        stranger = pid + 1000
        assert end_txn(wire, txn, stranger, epoch, True, version) == INVALID_PRODUCER_ID_MAPPING
        assert end_txn(wire, unique("never-seen"), pid, epoch, True, version) == INVALID_PRODUCER_ID_MAPPING
        assert add_partitions(wire, txn, stranger, epoch, topic, [0], version) == {
            0: INVALID_PRODUCER_ID_MAPPING
        }
        assert add_partitions(wire, unique("never-seen"), pid, epoch, topic, [0], version) == {
            0: INVALID_PRODUCER_ID_MAPPING
        }
        assert add_offsets(wire, txn, stranger, epoch, group, version) == INVALID_PRODUCER_ID_MAPPING
        # The transaction is untouched: still empty.
        assert end_txn(wire, txn, pid, epoch, True, version) == INVALID_TXN_STATE


@pytest.mark.parametrize(
    ("version", "fenced"),
    [(0, INVALID_PRODUCER_EPOCH), (1, INVALID_PRODUCER_EPOCH), (2, PRODUCER_FENCED), (3, PRODUCER_FENCED)],
)
def test_a_stale_epoch_is_fenced(target: Target, version: int, fenced: int) -> None:
    topic, txn, group = unique("tx-raw"), unique("txn"), unique("group")
    create_topics(target.bootstrap, {topic: 1})
    with Wire(target.port) as wire:
        pid, stale = begun(wire, txn)
        find_coordinator(wire, group, 0)
        current = init_producer_id(wire, txn)  # a new instance of the producer: the epoch is bumped
        assert (current.error_code, current.producer_id, current.producer_epoch) == (NONE, pid, stale + 1)
        assert add_partitions(wire, txn, pid, stale, topic, [0], version) == {0: fenced}
        assert add_offsets(wire, txn, pid, stale, group, version) == fenced
        assert end_txn(wire, txn, pid, stale, True, version) == fenced
        assert end_txn(wire, txn, pid, stale, False, version) == fenced
        # The current epoch is unaffected.
        assert add_partitions(wire, txn, pid, stale + 1, topic, [0], version) == {0: NONE}
        assert end_txn(wire, txn, pid, stale + 1, False, version) == NONE


@pytest.mark.parametrize("version", [3, 7, 9])
def test_a_transactional_produce_to_a_partition_not_in_the_transaction_is_refused(
    target: Target, version: int
) -> None:
    """Kafka >= 3.6 (KIP-890 part 1) checks with the coordinator that the partition is in the transaction
    before it appends, and answers INVALID_TXN_STATE ("Partition was not added to the transaction") at every
    Produce version; nothing is written."""
    topic, txn = unique("tx-raw"), unique("txn")
    create_topics(target.bootstrap, {topic: 2})
    with Wire(target.port) as wire:
        pid, epoch = begun(wire, txn)
        # Nothing added yet (the transaction is Empty).
        assert produce(wire, txn, topic, 0, transactional_batch(pid, epoch, 0, [b"x"]), version) == (
            INVALID_TXN_STATE,
            -1,
        )
        # Partition 1 added, then a write to partition 0 (the transaction is Ongoing).
        assert add_partitions(wire, txn, pid, epoch, topic, [1]) == {1: NONE}
        assert produce(wire, txn, topic, 0, transactional_batch(pid, epoch, 0, [b"x"]), version) == (
            INVALID_TXN_STATE,
            -1,
        )
        assert latest_offset(wire, topic, READ_UNCOMMITTED) == 0
        assert produce(wire, txn, topic, 1, transactional_batch(pid, epoch, 0, [b"y"]), version) == (NONE, 0)
        assert end_txn(wire, txn, pid, epoch, True) == NONE


def test_end_txn_repeated_and_crossed(target: Target) -> None:
    topic, txn = unique("tx-raw"), unique("txn")
    create_topics(target.bootstrap, {topic: 1})
    with Wire(target.port) as wire:
        pid, epoch = begun(wire, txn)
        assert add_partitions(wire, txn, pid, epoch, topic, [0]) == {0: NONE}
        assert produce(wire, txn, topic, 0, transactional_batch(pid, epoch, 0, [b"a"])) == (NONE, 0)
        assert end_txn(wire, txn, pid, epoch, True) == NONE
        # A commit retried (its answer was lost) succeeds again; an abort of it is an invalid transition.
        assert end_txn_settled(wire, txn, pid, epoch, True) == NONE
        assert end_txn(wire, txn, pid, epoch, False) == INVALID_TXN_STATE

        assert add_partitions(wire, txn, pid, epoch, topic, [0]) == {0: NONE}
        assert produce(wire, txn, topic, 0, transactional_batch(pid, epoch, 1, [b"b"])) == (NONE, 2)
        assert end_txn(wire, txn, pid, epoch, False) == NONE
        # Kafka 4.4 answers CONCURRENT_TRANSACTIONS to the commit while the abort is in PrepareAbort (its
        # pending transition is checked first), INVALID_TXN_STATE once it is CompleteAbort.
        assert end_txn_settled(wire, txn, pid, epoch, True) == INVALID_TXN_STATE
        assert end_txn(wire, txn, pid, epoch, False) == NONE
        assert latest_offset(wire, topic, READ_COMMITTED) == 4  # a, commit marker, b, abort marker


def test_init_producer_id_aborts_the_open_transaction(target: Target) -> None:
    topic, txn = unique("tx-raw"), unique("txn")
    create_topics(target.bootstrap, {topic: 1})
    with Wire(target.port) as wire:
        pid, epoch = begun(wire, txn)
        assert add_partitions(wire, txn, pid, epoch, topic, [0]) == {0: NONE}
        assert produce(wire, txn, topic, 0, transactional_batch(pid, epoch, 0, [b"left-open"])) == (NONE, 0)
        # Kafka fences the open transaction (bumps the epoch, aborts) and answers CONCURRENT_TRANSACTIONS
        # until the abort is complete; the client retries and gets the same producer id at a newer epoch
        # (Kafka 4.4: two bumps, one for the fencing abort and one for this producer).
        first = init_producer_id(wire, txn)
        assert first.error_code in (CONCURRENT_TRANSACTIONS, NONE)
        fresh = retry(lambda: init_producer_id(wire, txn), lambda r: r.error_code, (CONCURRENT_TRANSACTIONS,))
        assert fresh.error_code == NONE
        assert fresh.producer_id == pid
        assert fresh.producer_epoch > epoch
        assert end_txn(wire, txn, pid, epoch, True, version=3) == PRODUCER_FENCED
        # The record is aborted: the abort marker follows it, and read_committed skips it.
        assert latest_offset(wire, topic, READ_COMMITTED) == 2
        answer = fetch(wire, topic, READ_COMMITTED)
        assert (answer.high_watermark, answer.last_stable_offset) == (2, 2)
        assert aborted(answer) == [(pid, 0)]


@pytest.mark.parametrize("version", [0, 1, 3])
def test_transactional_offsets_are_unstable_until_the_commit(target: Target, version: int) -> None:
    topic, txn, group = unique("tx-raw"), unique("txn"), unique("group")
    create_topics(target.bootstrap, {topic: 1})
    with Wire(target.port) as wire:
        pid, epoch = begun(wire, txn)
        find_coordinator(wire, group, 0)
        # Kafka 4.4 verifies with the transaction coordinator that the group was added (KIP-890 part 1).
        assert txn_offset_commit(wire, txn, group, pid, epoch, topic, 5, version) == INVALID_TXN_STATE
        assert add_offsets(wire, txn, pid, epoch, group) == NONE
        assert txn_offset_commit(wire, txn, group, pid, epoch, topic, 5, version) == NONE
        assert (
            txn_offset_commit(wire, txn, group, pid + 1000, epoch, topic, 6, version)
            == INVALID_PRODUCER_ID_MAPPING
        )
        # Pending: OffsetFetch v7+ with require_stable answers UNSTABLE_OFFSET_COMMIT (retriable), without
        # it the last committed offset (none).
        assert offset_fetch(wire, group, topic, require_stable=True) == (-1, UNSTABLE_OFFSET_COMMIT)
        assert offset_fetch(wire, group, topic, require_stable=False) == (-1, NONE)
        assert offset_fetch(wire, group, topic, require_stable=False, version=6) == (-1, NONE)
        assert end_txn(wire, txn, pid, epoch, True) == NONE
        # Kafka answers UNSTABLE_OFFSET_COMMIT until the commit marker reached the offsets partition.
        stable = retry(
            lambda: offset_fetch(wire, group, topic, require_stable=True),
            lambda a: a[1],
            (UNSTABLE_OFFSET_COMMIT,),
        )
        assert stable == (5, NONE)

        # An aborted transaction's offsets are dropped.
        assert add_offsets(wire, txn, pid, epoch, group) in (NONE, CONCURRENT_TRANSACTIONS)
        assert (
            retry(lambda: add_offsets(wire, txn, pid, epoch, group), lambda c: c, (CONCURRENT_TRANSACTIONS,))
            == NONE
        )
        assert txn_offset_commit(wire, txn, group, pid, epoch, topic, 9, version) == NONE
        assert end_txn(wire, txn, pid, epoch, False) == NONE
        settled = retry(
            lambda: offset_fetch(wire, group, topic, require_stable=True),
            lambda a: a[1],
            (UNSTABLE_OFFSET_COMMIT,),
        )
        assert settled == (5, NONE)


@pytest.mark.parametrize(("fetch_version", "list_version"), [(4, 2), (11, 5)])
def test_read_committed_fetch_and_list_offsets(target: Target, fetch_version: int, list_version: int) -> None:
    topic, txn = unique("tx-raw"), unique("txn")
    create_topics(target.bootstrap, {topic: 1})
    with Wire(target.port) as wire:
        pid, epoch = begun(wire, txn)
        assert add_partitions(wire, txn, pid, epoch, topic, [0]) == {0: NONE}
        assert produce(wire, txn, topic, 0, transactional_batch(pid, epoch, 0, [b"a", b"b"])) == (NONE, 0)
        # Open: the last stable offset is the transaction's first offset; read_committed gets no records.
        on_committed = fetch(wire, topic, READ_COMMITTED, version=fetch_version)
        assert (on_committed.high_watermark, on_committed.last_stable_offset) == (2, 0)
        assert aborted(on_committed) == []
        assert not on_committed.records
        on_uncommitted = fetch(wire, topic, READ_UNCOMMITTED, version=fetch_version)
        assert on_uncommitted.high_watermark == 2
        assert on_uncommitted.records
        assert latest_offset(wire, topic, READ_COMMITTED, list_version) == 0
        assert latest_offset(wire, topic, READ_UNCOMMITTED, list_version) == 2

        assert end_txn(wire, txn, pid, epoch, False) == NONE
        # Kafka writes the abort marker after it answers EndTxn: wait for it.
        retry(lambda: latest_offset(wire, topic, READ_COMMITTED, list_version), lambda o: o, (0,))
        on_committed = fetch(wire, topic, READ_COMMITTED, version=fetch_version)
        assert (on_committed.high_watermark, on_committed.last_stable_offset) == (3, 3)
        assert aborted(on_committed) == [(pid, 0)]
        assert on_committed.records  # the aborted batch and the marker: the consumer drops them itself
        # read_uncommitted gets no aborted-transactions list (null).
        assert aborted(fetch(wire, topic, READ_UNCOMMITTED, version=fetch_version)) is None
        assert latest_offset(wire, topic, READ_UNCOMMITTED, list_version) == 3

        assert add_partitions(wire, txn, pid, epoch, topic, [0]) == {0: NONE}
        assert produce(wire, txn, topic, 0, transactional_batch(pid, epoch, 2, [b"c"])) == (NONE, 3)
        assert end_txn(wire, txn, pid, epoch, True) == NONE
        retry(lambda: latest_offset(wire, topic, READ_COMMITTED, list_version), lambda o: o, (3,))
        assert latest_offset(wire, topic, READ_COMMITTED, list_version) == 5
        # The aborted transaction (offsets 0..2, its marker included) is listed for a fetch that starts at
        # or before its last offset, not for one that starts after it.
        assert aborted(fetch(wire, topic, READ_COMMITTED, offset=2, version=fetch_version)) == [(pid, 0)]
        after = fetch(wire, topic, READ_COMMITTED, offset=3, version=fetch_version)
        assert (after.high_watermark, after.last_stable_offset) == (5, 5)
        assert aborted(after) == []
