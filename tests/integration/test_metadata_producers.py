"""Idempotent producers in the metadata store, on SQLite and PostgreSQL: InitProducerId, the sequence
check inside ``commit_flush`` (duplicates, gaps, fencing), expiry, and two stores sharing one database."""

from __future__ import annotations

import uuid

import pytest

from storage.errors import (
    InvalidProducerEpoch,
    OutOfOrderSequence,
    ProducerConflict,
    ProducerFenced,
    Unavailable,
)
from storage.metadata import (
    LEVEL_INGEST,
    MetadataStore,
    NewChunk,
    NewFile,
    open_metadata_store,
    schema,
    sqlite_path,
)
from storage.metadata.postgres import PostgresBackend
from storage.metadata.rows import FlushResult, ProducerBatch, ProducerIdAndEpoch
from storage.metadata.sql import SqlMetadataStore, Tx
from storage.metadata.sql.producers import EPOCH_EXHAUSTED, MAX_SEQUENCE, in_sequence, last_sequence
from storage.metadata.sqlite import SqliteBackend

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000
DAY = 86_400_000


def new_file() -> NewFile:
    return NewFile(f"L0/{uuid.uuid4().hex}", size=4096, level=LEVEL_INGEST, created_ms=NOW)


def chunk(topic: str, partition: int, count: int) -> NewChunk:
    return NewChunk(topic, partition, count, 0, 100 * count, NOW - 5, NOW, 0)


def pb(
    pid: int, epoch: int, seq: int, count: int, *, append: int = 0, chunk: int = 0, relative: int = 0
) -> ProducerBatch:
    return ProducerBatch(append, chunk, relative, count, pid, epoch, seq)


def produce(
    store: MetadataStore, pid: int, epoch: int, seq: int, count: int, *, now: int = NOW, partition: int = 0
) -> FlushResult:
    """One flush holding one producer batch of ``count`` records on t/partition."""
    return store.commit_flush(
        new_file(), [chunk("t", partition, count)], [], now, [pb(pid, epoch, seq, count)], DAY
    )


def high_watermark(store: MetadataStore, partition: int = 0) -> int:
    return store.partition_state("t", partition).high_watermark


@pytest.fixture
def store(metadata_store: MetadataStore) -> MetadataStore:
    metadata_store.create_topic("t", 2, {}, NOW)
    return metadata_store


def test_init_producer_id_hands_out_new_ids_and_bumps_epochs(store: MetadataStore) -> None:
    first = store.init_producer_id(None, NOW)
    second = store.init_producer_id(None, NOW)
    assert first.epoch == second.epoch == 0
    assert first.producer_id != second.producer_id
    assert min(first.producer_id, second.producer_id) >= 0
    bumped = store.init_producer_id(first, NOW)
    assert bumped == ProducerIdAndEpoch(first.producer_id, 1)
    # The reply to the bump was lost and the client asks again with its old epoch: the same answer.
    assert store.init_producer_id(first, NOW) == bumped
    assert store.init_producer_id(bumped, NOW) == ProducerIdAndEpoch(first.producer_id, 2)
    with pytest.raises(ProducerFenced):
        store.init_producer_id(first, NOW)  # epoch 0, two bumps behind
    # An id this store never handed out (or forgot) gets a fresh one.
    fresh = store.init_producer_id(ProducerIdAndEpoch(10**12, 3), NOW)
    assert fresh.epoch == 0
    assert fresh.producer_id not in (10**12, first.producer_id, second.producer_id)


def test_an_exhausted_epoch_gets_a_new_producer_id(store: MetadataStore) -> None:
    first = store.init_producer_id(None, NOW)
    # Java clients bump an idempotent epoch locally; the store accepts the newer epoch as current.
    renewed = store.init_producer_id(ProducerIdAndEpoch(first.producer_id, EPOCH_EXHAUSTED), NOW)
    assert renewed.epoch == 0
    assert renewed.producer_id != first.producer_id


def test_in_sequence_batches_commit_and_a_resent_batch_gets_its_original_offset(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    assert produce(store, pid, 0, 0, 3).base_offsets == [0]
    assert produce(store, pid, 0, 3, 2).base_offsets == [3]
    with pytest.raises(ProducerConflict) as caught:
        produce(store, pid, 0, 0, 3)
    assert caught.value.duplicates == {0: 0}
    assert caught.value.rejected == {}
    with pytest.raises(ProducerConflict) as caught:
        produce(store, pid, 0, 3, 2)
    assert caught.value.duplicates == {0: 3}
    assert high_watermark(store) == 5  # the duplicates wrote nothing
    # Another partition knows nothing of the producer: a separate sequence.
    assert produce(store, pid, 0, 0, 3, partition=1).base_offsets == [0]


def test_only_the_last_five_batches_are_remembered(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    for i in range(6):
        produce(store, pid, 0, i, 1)
    for i in range(1, 6):
        with pytest.raises(ProducerConflict) as caught:
            produce(store, pid, 0, i, 1)
        assert caught.value.duplicates == {0: i}
    with pytest.raises(ProducerConflict) as caught:
        produce(store, pid, 0, 0, 1)  # forgotten: now simply out of sequence
    [error] = caught.value.rejected.values()
    assert isinstance(error, OutOfOrderSequence)


def test_a_gap_is_out_of_order_and_writes_nothing(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    produce(store, pid, 0, 0, 2)
    with pytest.raises(ProducerConflict) as caught:
        produce(store, pid, 0, 5, 1)
    assert caught.value.duplicates == {}
    assert isinstance(caught.value.rejected[0], OutOfOrderSequence)
    assert high_watermark(store) == 2
    assert produce(store, pid, 0, 2, 1).base_offsets == [2]  # the expected sequence still goes in


def test_a_stale_epoch_is_fenced_and_a_new_epoch_starts_at_zero(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    produce(store, pid, 1, 0, 2)
    with pytest.raises(ProducerConflict) as caught:
        produce(store, pid, 0, 2, 1)
    assert isinstance(caught.value.rejected[0], InvalidProducerEpoch)
    with pytest.raises(ProducerConflict) as caught:
        produce(store, pid, 2, 7, 1)  # a newer epoch must start at 0
    assert isinstance(caught.value.rejected[0], OutOfOrderSequence)
    assert produce(store, pid, 2, 0, 1).base_offsets == [2]
    with pytest.raises(ProducerConflict) as caught:
        produce(store, pid, 1, 2, 1)  # the old epoch is fenced from now on
    assert isinstance(caught.value.rejected[0], InvalidProducerEpoch)
    assert high_watermark(store) == 3


def test_an_unknown_producer_is_accepted_at_any_sequence(store: MetadataStore) -> None:
    # Kafka accepts a producer the partition does not remember (its state expired, or its records
    # were removed by retention) at whatever sequence it is at.
    assert produce(store, 424242, 0, 17, 2).base_offsets == [0]
    assert produce(store, 424242, 0, 19, 1).base_offsets == [2]


def test_state_expires_after_producer_id_expiration_ms(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    produce(store, pid, 0, 0, 2)
    # Within the window a gap is refused; past it the partition no longer knows the producer.
    with pytest.raises(ProducerConflict):
        produce(store, pid, 0, 9, 1, now=NOW + DAY - 1)
    assert produce(store, pid, 0, 9, 1, now=NOW + DAY + 1).base_offsets == [2]
    assert store.expire_producers(NOW + 3 * DAY) == 2  # the state row, then the id nobody remembers
    assert store.expire_producers(NOW + 3 * DAY) == 0
    assert produce(store, pid, 0, 0, 1, now=NOW + 3 * DAY).base_offsets == [3]
    # The id is forgotten: a bump of it gets a new id, never the same one again.
    assert store.init_producer_id(ProducerIdAndEpoch(pid, 0), NOW + 3 * DAY).producer_id != pid


def test_expiry_keeps_recent_state(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    produce(store, pid, 0, 0, 1, now=NOW + DAY)
    assert store.expire_producers(NOW + DAY) == 0  # the id is remembered by the partition
    with pytest.raises(ProducerConflict):
        produce(store, pid, 0, 0, 1, now=NOW + DAY)


def test_one_flush_checks_each_append_against_the_earlier_ones(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    produce(store, pid, 0, 0, 2)
    chunks = [chunk("t", 0, 6), chunk("t", 1, 1)]
    batches = [
        pb(pid, 0, 0, 2, append=0, relative=0),  # a duplicate of the committed batch
        pb(pid, 0, 2, 2, append=1, relative=2),  # follows the committed state
        pb(pid, 0, 9, 1, append=2, relative=4),  # a gap
        pb(pid, 0, 4, 1, append=3, relative=5),  # follows append 1: fine
        pb(pid, 0, 5, 1, append=4, chunk=1),  # partition 1 has its own, empty state: fine
    ]
    with pytest.raises(ProducerConflict) as caught:
        store.commit_flush(new_file(), chunks, [], NOW, batches, DAY)
    assert caught.value.duplicates == {0: 0}
    assert set(caught.value.rejected) == {2}
    assert high_watermark(store) == 2
    # Without the answered appends, the rest commits as checked.
    result = store.commit_flush(
        new_file(),
        [chunk("t", 0, 3), chunk("t", 1, 1)],
        [],
        NOW,
        [
            pb(pid, 0, 2, 2, append=1),
            pb(pid, 0, 4, 1, append=3, relative=2),
            pb(pid, 0, 5, 1, append=4, chunk=1),
        ],
        DAY,
    )
    assert result.base_offsets == [2, 0]


def test_a_resend_inside_the_same_flush_is_retriable(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    batches = [pb(pid, 0, 0, 1, append=0), pb(pid, 0, 0, 1, append=1, relative=1)]
    with pytest.raises(ProducerConflict) as caught:
        store.commit_flush(new_file(), [chunk("t", 0, 2)], [], NOW, batches, DAY)
    assert isinstance(caught.value.rejected[1], Unavailable)
    assert caught.value.rejected[1].retriable
    assert set(caught.value.rejected) == {1}
    assert caught.value.duplicates == {}


def test_a_replayed_commit_is_not_its_own_duplicate(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    file = new_file()
    batches = [pb(pid, 0, 0, 2)]
    first = store.commit_flush(file, [chunk("t", 0, 2)], [], NOW, batches, DAY)
    again = store.commit_flush(file, [chunk("t", 0, 2)], [], NOW, batches, DAY)
    assert first.base_offsets == again.base_offsets == [0]


def test_two_stores_on_one_database_share_producer_state(metadata_url: str) -> None:
    a, b = open_metadata_store(metadata_url), open_metadata_store(metadata_url)
    try:
        a.create_topic("t", 1, {}, NOW)
        ids = {a.init_producer_id(None, NOW).producer_id for _ in range(3)}
        ids |= {b.init_producer_id(None, NOW).producer_id for _ in range(3)}
        assert len(ids) == 6
        pid = min(ids)
        assert produce(a, pid, 0, 0, 2).base_offsets == [0]
        with pytest.raises(ProducerConflict) as caught:
            produce(b, pid, 0, 0, 2)
        assert caught.value.duplicates == {0: 0}
        assert produce(b, pid, 0, 2, 1).base_offsets == [2]
        with pytest.raises(ProducerConflict):
            produce(a, pid, 0, 2, 1)
    finally:
        a.close()
        b.close()


def test_deleting_a_topic_forgets_its_producer_state(store: MetadataStore) -> None:
    pid = store.init_producer_id(None, NOW).producer_id
    produce(store, pid, 0, 0, 2)
    store.delete_topic("t", NOW)
    store.create_topic("t", 1, {}, NOW)
    assert produce(store, pid, 0, 0, 2).base_offsets == [0]  # a new log: not a duplicate


def test_sequences_wrap_as_kafka_int32() -> None:
    assert last_sequence(MAX_SEQUENCE, 1) == MAX_SEQUENCE
    assert last_sequence(MAX_SEQUENCE, 3) == 1
    assert in_sequence(MAX_SEQUENCE, 0)
    assert in_sequence(4, 5)
    assert not in_sequence(4, 4)
    assert not in_sequence(4, 6)
    assert not in_sequence(MAX_SEQUENCE - 1, 0)


def test_batches_outside_their_chunk_are_caller_bugs(store: MetadataStore) -> None:
    with pytest.raises(ValueError):
        store.commit_flush(new_file(), [chunk("t", 0, 2)], [], NOW, [pb(1, 0, 0, 2, relative=1)], DAY)
    with pytest.raises(ValueError):
        store.commit_flush(new_file(), [chunk("t", 0, 2)], [], NOW, [pb(1, 0, 0, 1, chunk=1)], DAY)
    assert high_watermark(store) == 0


def test_migration_3_applies_to_a_version_2_database(metadata_url: str) -> None:
    backend = (
        SqliteBackend(sqlite_path(metadata_url))
        if metadata_url.startswith("sqlite:")
        else PostgresBackend(metadata_url)
    )
    dialect = backend.dialect.name

    def version_2(tx: Tx) -> list[int]:
        applied = schema.migrate_to(tx, dialect, NOW, 2)
        tx.execute(
            "INSERT INTO topics (name, partitions, configs, created_ms) VALUES ('t', 1, '{}', ?)", (NOW,)
        )
        tx.execute(
            "INSERT INTO partitions (topic, partition_id, next_offset, log_start_offset)"
            " VALUES ('t', 0, 5, 0)"
        )
        return applied

    try:
        assert backend.run(version_2, write=True, what="test setup") == [1, 2]
    finally:
        backend.close()
    store = open_metadata_store(metadata_url)
    try:
        assert isinstance(store, SqlMetadataStore)
        assert store.applied_migrations == tuple(range(3, schema.latest_version(dialect) + 1))
        pid = store.init_producer_id(None, NOW).producer_id
        assert produce(store, pid, 0, 0, 2).base_offsets == [5]
        with pytest.raises(ProducerConflict):
            produce(store, pid, 0, 0, 2)
    finally:
        store.close()
