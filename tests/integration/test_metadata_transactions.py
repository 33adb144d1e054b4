"""Transactions in the metadata store, on SQLite and PostgreSQL: the coordinator's APIs, markers and the
LSO, KIP-890 part 1's check inside ``commit_flush``, fencing, the timeout sweep, and two stores racing."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from storage.errors import (
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    ProducerConflict,
    ProducerFenced,
    UnknownTopic,
)
from storage.metadata import LEVEL_INGEST, MetadataStore, NewChunk, NewFile, open_metadata_store
from storage.metadata.rows import (
    GroupRow,
    IdempotencyEntry,
    OffsetToCommit,
    ProducerBatch,
    ProducerIdAndEpoch,
)
from storage.metadata.txn_state import AbortedTxn, TxnState
from tests.fixtures.metadata import lock_waiters

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000
DAY = 86_400_000
MAX = 900_000


def flush(
    store: MetadataStore,
    pid: int,
    epoch: int,
    seq: int,
    count: int,
    partition: int = 0,
    transactional: bool = True,
) -> int:
    """One flush of one producer batch on t/partition; its base offset."""
    result = store.commit_flush(
        NewFile(f"L0/{uuid.uuid4().hex}", 4096, LEVEL_INGEST, NOW),
        [NewChunk("t", partition, count, 0, 100 * count, NOW - 5, NOW, 0)],
        [],
        NOW,
        [ProducerBatch(0, 0, 0, count, pid, epoch, seq, transactional)],
        DAY,
    )
    return result.base_offsets[0]


def plain(store: MetadataStore, count: int, partition: int = 0) -> int:
    result = store.commit_flush(
        NewFile(f"L0/{uuid.uuid4().hex}", 4096, LEVEL_INGEST, NOW),
        [NewChunk("t", partition, count, 0, 100 * count, NOW - 5, NOW, 0)],
        [],
        NOW,
    )
    return result.base_offsets[0]


def accept_any(_: GroupRow | None) -> None:
    """A group check that accepts (the members' checks are group_state's, tested there)."""


@pytest.fixture
def store(metadata_store: MetadataStore) -> MetadataStore:
    metadata_store.create_topic("t", 2, {}, NOW)
    return metadata_store


def begin(store: MetadataStore, txn_id: str = "tx", partitions: tuple[int, ...] = (0,)) -> ProducerIdAndEpoch:
    given, _ = store.init_transactional_producer(txn_id, 60_000, MAX, None, NOW)
    assert (
        store.add_partitions_to_txn(
            txn_id, given.producer_id, given.epoch, [("t", p) for p in partitions], NOW
        )
        == {}
    )
    return given


def test_commit_gives_one_marker_offset_and_moves_the_lso(store: MetadataStore) -> None:
    p = begin(store)
    assert plain(store, 2) == 0
    assert flush(store, p.producer_id, p.epoch, 0, 3) == 2
    assert plain(store, 1) == 5
    state = store.partition_state("t", 0)
    assert (state.high_watermark, state.last_stable_offset) == (6, 2)
    ended = store.end_txn("tx", p.producer_id, p.epoch, True, NOW)
    assert ended.partitions == [("t", 0)]
    state = store.partition_state("t", 0)
    assert (state.high_watermark, state.last_stable_offset, state.last_marker_offset) == (7, 7, 6)
    [marker] = store.txn_markers("t", 0, 0, 10)
    assert (marker.offset, marker.producer_id, marker.is_commit) == (6, p.producer_id, True)
    assert store.aborted_txns("t", 0, 0, 10) == []
    # A retry of the commit whose answer was lost: NONE, nothing more written. Abort now: INVALID_TXN_STATE.
    assert not store.end_txn("tx", p.producer_id, p.epoch, True, NOW).changed
    with pytest.raises(InvalidTxnState):
        store.end_txn("tx", p.producer_id, p.epoch, False, NOW)
    assert store.partition_state("t", 0).high_watermark == 7


def test_abort_records_the_aborted_range(store: MetadataStore) -> None:
    p = begin(store, partitions=(0, 1))
    flush(store, p.producer_id, p.epoch, 0, 4)  # partition 1 is added but never written: no marker there
    store.end_txn("tx", p.producer_id, p.epoch, False, NOW)
    assert store.aborted_txns("t", 0, 0, 100) == [AbortedTxn(p.producer_id, 0, 4)]
    assert store.aborted_txns("t", 0, 5, 100) == []
    assert store.partition_state("t", 1).high_watermark == 0
    assert store.describe_transaction("tx").txn.state is TxnState.COMPLETE_ABORT


def test_a_transactional_batch_outside_the_transaction_is_refused(store: MetadataStore) -> None:
    p = begin(store, partitions=(0,))
    with pytest.raises(ProducerConflict) as refused:
        flush(store, p.producer_id, p.epoch, 0, 1, partition=1)
    assert isinstance(refused.value.rejected[0], InvalidTxnState)
    store.end_txn("tx", p.producer_id, p.epoch, True, NOW)
    # After the end, a late batch of the ended transaction cannot open a hanging one.
    with pytest.raises(ProducerConflict) as late:
        flush(store, p.producer_id, p.epoch, 0, 1)
    assert isinstance(late.value.rejected[0], InvalidTxnState)
    assert store.partition_state("t", 0).open_txn_offset is None


def test_a_new_incarnation_fences_and_aborts_the_old_one(store: MetadataStore) -> None:
    old = begin(store)
    flush(store, old.producer_id, old.epoch, 0, 2)
    new, aborted = store.init_transactional_producer("tx", 60_000, MAX, None, NOW)
    assert (new.producer_id, new.epoch) == (old.producer_id, old.epoch + 1)
    assert aborted == [("t", 0)]
    assert store.aborted_txns("t", 0, 0, 10) == [AbortedTxn(old.producer_id, 0, 2)]
    for call in (
        lambda: store.end_txn("tx", old.producer_id, old.epoch, True, NOW),
        lambda: store.add_partitions_to_txn("tx", old.producer_id, old.epoch, [("t", 0)], NOW),
    ):
        with pytest.raises(ProducerFenced):
            call()
    with pytest.raises(ProducerConflict) as zombie:
        flush(store, old.producer_id, old.epoch, 2, 1)
    assert isinstance(zombie.value.rejected[0], InvalidProducerEpoch)
    # The zombie cannot take the new epoch over by presenting its old pair (KIP-360 retries only).
    with pytest.raises(ProducerFenced):
        store.init_transactional_producer("tx", 60_000, MAX, old, NOW)
    with pytest.raises(InvalidTxnState):
        store.end_txn("tx", new.producer_id, new.epoch, True, NOW)  # Empty: nothing to commit


def test_kip_360_bump_and_its_retry(store: MetadataStore) -> None:
    first, _ = store.init_transactional_producer("tx", 60_000, MAX, None, NOW)
    bumped, _ = store.init_transactional_producer("tx", 60_000, MAX, first, NOW)
    assert bumped == ProducerIdAndEpoch(first.producer_id, first.epoch + 1)
    again, _ = store.init_transactional_producer("tx", 60_000, MAX, first, NOW)
    assert again == bumped


def test_errors_of_the_coordinator(store: MetadataStore) -> None:
    with pytest.raises(InvalidTransactionTimeout):
        store.init_transactional_producer("tx", MAX + 1, MAX, None, NOW)
    with pytest.raises(InvalidProducerIdMapping):
        store.end_txn("nobody", 1, 0, True, NOW)
    p = begin(store)
    with pytest.raises(InvalidProducerIdMapping):
        store.add_partitions_to_txn("tx", p.producer_id + 1000, p.epoch, [("t", 0)], NOW)
    refused = store.add_partitions_to_txn("tx", p.producer_id, p.epoch, [("t", 0), ("nope", 0)], NOW)
    assert isinstance(refused[("nope", 0)], UnknownTopic)


def test_offsets_become_visible_with_the_commit_only(store: MetadataStore) -> None:
    p = begin(store)
    store.add_offsets_to_txn("tx", p.producer_id, p.epoch, "g", NOW)
    offsets = [OffsetToCommit("t", 1, 42)]
    assert store.txn_offset_commit("tx", "g", p.producer_id, p.epoch, accept_any, offsets, NOW) == {}
    assert store.pending_txn_offsets("g") == {("t", 1)}
    assert store.group_offsets("g") == []
    store.end_txn("tx", p.producer_id, p.epoch, True, NOW)
    assert [(o.topic, o.partition, o.offset) for o in store.group_offsets("g")] == [("t", 1, 42)]
    assert store.pending_txn_offsets("g") == set()
    # An aborted transaction's offsets go nowhere.
    p2 = begin(store, "tx2")
    store.add_offsets_to_txn("tx2", p2.producer_id, p2.epoch, "g", NOW)
    store.txn_offset_commit(
        "tx2", "g", p2.producer_id, p2.epoch, accept_any, [OffsetToCommit("t", 1, 99)], NOW
    )
    store.end_txn("tx2", p2.producer_id, p2.epoch, False, NOW)
    assert [o.offset for o in store.group_offsets("g")] == [42]


def test_describing_every_transaction_at_once_equals_describing_each(store: MetadataStore) -> None:
    p = begin(store, "tx-b", partitions=(1, 0))
    store.add_offsets_to_txn("tx-b", p.producer_id, p.epoch, "g2", NOW)
    store.add_offsets_to_txn("tx-b", p.producer_id, p.epoch, "g1", NOW)
    q = begin(store, "tx-a")
    store.end_txn("tx-a", q.producer_id, q.epoch, True, NOW)
    store.init_transactional_producer("tx-c", 60_000, MAX, None, NOW)
    every = store.describe_transactions()
    assert [d.txn.transactional_id for d in every] == ["tx-a", "tx-b", "tx-c"]
    assert every == [store.describe_transaction(i) for i in ("tx-a", "tx-b", "tx-c")]
    assert [(x.topic, x.partition) for x in every[1].partitions] == [("t", 0), ("t", 1)]
    assert every[1].groups == ["g1", "g2"]


def test_the_sweep_aborts_and_fences_a_timed_out_transaction(store: MetadataStore) -> None:
    given, _ = store.init_transactional_producer("tx", 1_000, MAX, None, NOW)
    store.add_partitions_to_txn("tx", given.producer_id, given.epoch, [("t", 0)], NOW)
    flush(store, given.producer_id, given.epoch, 0, 2)
    assert store.abort_timed_out_transactions(NOW + 500) == []
    assert store.abort_timed_out_transactions(NOW + 1_001) == [("t", 0)]
    state = store.partition_state("t", 0)
    assert (state.high_watermark, state.last_stable_offset) == (3, 3)
    with pytest.raises(ProducerFenced):
        store.end_txn("tx", given.producer_id, given.epoch, True, NOW + 2_000)
    assert store.describe_transaction("tx").txn.epoch == given.epoch + 1


def test_two_stores_racing_to_end_one_transaction_mark_it_once(metadata_url: str) -> None:
    a, b = open_metadata_store(metadata_url), open_metadata_store(metadata_url)
    try:
        a.create_topic("t", 2, {}, NOW)
        p = begin(a, partitions=(0, 1))
        flush(a, p.producer_id, p.epoch, 0, 1, partition=0)
        flush(a, p.producer_id, p.epoch, 1, 1, partition=1)
        results: list[object] = []

        def end(store: MetadataStore) -> None:
            try:
                results.append(store.end_txn("tx", p.producer_id, p.epoch, True, NOW).changed)
            except InvalidTxnState as exc:  # pragma: no cover - would be the bug
                results.append(exc)

        threads = [threading.Thread(target=end, args=(s,)) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results, key=str) == [False, True]
        assert [a.partition_state("t", q).high_watermark for q in (0, 1)] == [2, 2]
    finally:
        a.close()
        b.close()


def test_the_lso_never_falls_below_the_log_start(store: MetadataStore) -> None:
    p = begin(store)
    plain(store, 2)
    flush(store, p.producer_id, p.epoch, 0, 3)  # the open transaction begins at 2
    plain(store, 1)
    assert store.partition_state("t", 0).last_stable_offset == 2
    store.apply_retention("t", 0, 4, NOW)  # DeleteRecords past where it began
    state = store.partition_state("t", 0)
    assert (state.log_start_offset, state.last_stable_offset, state.high_watermark) == (4, 4, 6)


def test_markers_and_aborted_ranges_go_with_the_records_below_the_log_start(store: MetadataStore) -> None:
    for txn_id, commit in (("tx-1", False), ("tx-2", True), ("tx-3", False)):
        p = begin(store, txn_id)
        flush(store, p.producer_id, p.epoch, 0, 2)
        store.end_txn(txn_id, p.producer_id, p.epoch, commit, NOW)
    # Offsets: tx-1 data 0-1, abort marker 2; tx-2 data 3-4, commit 5; tx-3 data 6-7, abort 8.
    assert [m.offset for m in store.txn_markers("t", 0, 0, 100)] == [2, 5, 8]
    store.apply_retention("t", 0, 5, NOW)
    assert [m.offset for m in store.txn_markers("t", 0, 0, 100)] == [5, 8]
    assert [(a.first_offset, a.last_offset) for a in store.aborted_txns("t", 0, 0, 100)] == [(6, 8)]
    store.apply_retention("t", 0, 9, NOW)
    assert store.txn_markers("t", 0, 0, 100) == []
    assert store.aborted_txns("t", 0, 0, 100) == []
    assert store.partition_state("t", 0).high_watermark == 9


def _wait_for_lock_waits(observer: psycopg.Connection, count: int) -> None:
    """Until ``count`` sessions of this database wait for a lock (fails after 5 s)."""
    for _ in range(500):
        if lock_waiters(observer) >= count:
            return
        threading.Event().wait(0.01)
    pytest.fail(f"{count} sessions never waited for a lock")


@pytest.mark.postgres
def test_an_abort_waits_for_a_flush_writing_the_transactions_first_batch(postgres_schema_url: str) -> None:
    """A flush commit has checked a transaction's first batch in a partition and not yet committed when a
    new incarnation's InitProducerId aborts the transaction (a producer abandoned mid-send, as a crashed
    client's). The abort must wait for the flush and mark the batch aborted; ending the transaction without
    a marker there would leave a committed-looking batch that read_committed consumers return."""
    flusher, coordinator = open_metadata_store(postgres_schema_url), open_metadata_store(postgres_schema_url)
    try:
        flusher.create_topic("t", 2, {}, NOW)
        p = begin(flusher, partitions=(0, 1))
        with (
            ThreadPoolExecutor(2) as pool,  # outermost: on a failure the holder lets go before we join
            psycopg.connect(postgres_schema_url) as holder,
            psycopg.connect(postgres_schema_url, autocommit=True) as observer,
        ):
            # The holder inserts the flush's idempotency key: the flush, which has by then locked the
            # partition and the transaction's row there, waits for it just before it commits.
            holder.execute(
                "INSERT INTO idempotency (key, topic, offsets, created_ms) VALUES ('k', 't', '[]', %s)",
                (NOW,),
            )
            flush = pool.submit(
                flusher.commit_flush,
                NewFile(f"L0/{uuid.uuid4().hex}", 4096, LEVEL_INGEST, NOW),
                [NewChunk("t", 1, 1, 0, 100, NOW - 5, NOW, 0)],
                [IdempotencyEntry("k", "t", [(0, 0)])],
                NOW,
                [ProducerBatch(0, 0, 0, 1, p.producer_id, p.epoch, 0, True)],
                DAY,
            )
            _wait_for_lock_waits(observer, 1)
            init = pool.submit(coordinator.init_transactional_producer, "tx", 60_000, MAX, None, NOW)
            _wait_for_lock_waits(observer, 2)
            holder.rollback()  # the key was never there: the flush goes on and commits
            assert flush.result(timeout=30).base_offsets == [0]
            assert init.result(timeout=30)[0] == ProducerIdAndEpoch(p.producer_id, p.epoch + 1)
        assert flusher.aborted_txns("t", 1, 0, 100) == [AbortedTxn(p.producer_id, 0, 1)]
        [marker] = flusher.txn_markers("t", 1, 0, 100)
        assert (marker.offset, marker.is_commit) == (1, False)
        state = flusher.partition_state("t", 1)
        assert (state.high_watermark, state.last_stable_offset) == (2, 2)
    finally:
        flusher.close()
        coordinator.close()
