"""The transaction APIs' error codes on the wire as Kafka answers them, on Strata and the reference broker.

Raw requests (tests/kafka/wire.py with kafka-python's protocol classes) at the versions clients send:

==================  ==========  ============  ========  =======  =========================
API                 librdkafka  kafka-python  aiokafka  kafkajs  a stale epoch gets
==================  ==========  ============  ========  =======  =========================
InitProducerId      4           4             0         1
AddPartitionsToTxn  0           3             0         1        47 at v0-1, 90 from v2
AddOffsetsToTxn     0           3             0         1        47 at v0-1, 90 from v2
EndTxn              1           3             0         1        47 at v0-1, 90 from v2
TxnOffsetCommit     3           3             0         1
==================  ==========  ============  ========  =======  =========================

(47 is INVALID_PRODUCER_EPOCH, 90 PRODUCER_FENCED: KIP-588). Kafka's Java client 4.4 uses transaction
version 2 with a broker that finalizes it, as Kafka 4.4 does (EndTxn v5, Produce v12, no AddPartitionsToTxn),
and version 1 otherwise; these tests stay at version 1.

Where Kafka's answer depends on timing, the test says why it accepts two: after EndTxn, Kafka's coordinator
is in PrepareCommit/PrepareAbort until the markers are written, and answers CONCURRENT_TRANSACTIONS to
anything about that transactional id meanwhile; a client retries, and so do these tests, until the final
answer.
"""

from __future__ import annotations

import pytest

from tests.fixtures.targets import Target, unique
from tests.kafka.transactions import create_topics
from tests.kafka.txn_wire import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    NONE,
    PRODUCER_FENCED,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    UNSTABLE_OFFSET_COMMIT,
    aborted,
    add_offsets,
    add_partitions,
    begun,
    end_txn,
    end_txn_settled,
    fetch,
    find_coordinator,
    init_producer_id,
    latest_offset,
    offset_fetch,
    produce,
    retry,
    transactional_batch,
    txn_offset_commit,
)
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration


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
