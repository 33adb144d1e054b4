"""Idempotent producers: ids and epochs (``ProducerStore``) and the sequence check of ``commit_flush``.

The rules are Kafka's (``ProducerStateManager``, ``ProducerAppendInfo``, ``ProducerStateEntry``), per
(producer id, topic, partition):
- a batch with the partition's epoch whose sequence range equals one of the last 5 batches is a
  duplicate: it is answered with that batch's original offset and not written again;
- an epoch older than the partition's is rejected (INVALID_PRODUCER_EPOCH);
- in the same epoch the first sequence must be the last one plus 1 (sequences are int32 and wrap to 0
  after 2^31 - 1); a newer epoch starts at sequence 0 and forgets the batches of the older one; otherwise
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer the partition does not remember (never seen, or expired) is accepted at any sequence, as
  Kafka does since it stopped answering UNKNOWN_PRODUCER_ID (the producer's records may have been removed
  by retention).
Expiry is measured from the commit time of the last append (Kafka measures from the batch's max
timestamp, which a producer's clock sets); a row older than ``producer.id.expiration.ms`` counts as absent
even before ``expire_producers`` deletes it, so expiry does not depend on how often that runs.

Concurrency: every write of a ``producer_state`` row happens in a flush commit that holds the row lock of
the row's partition (taken first, see ``core``), so two commits never decide on one producer's state at
once, and the one that locks second reads what the first committed. The rows are locked too (after the
partitions, in sorted order) so that ``expire_producers``, which holds no partition lock, skips them
(SKIP LOCKED) instead of deleting under a commit; it never waits for a lock, so it cannot deadlock.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from storage.errors import (
    InvalidProducerEpoch,
    OutOfOrderSequence,
    ProducerConflict,
    ProducerFenced,
    StrataError,
    Unavailable,
)
from storage.metadata.rows import (
    NO_PRODUCER_EPOCH,
    PRODUCER_BATCHES_RETAINED,
    NewChunk,
    ProducerBatch,
    ProducerIdAndEpoch,
)
from storage.metadata.sql.core import Dialect, SqlBase, Tx, batches, rows_by_keys, values
from storage.metadata.sql.txn_append import OpenTxns
from storage.metadata.txn_state import EPOCH_EXHAUSTED

MAX_SEQUENCE = 2**31 - 1

StateKey = tuple[str, int, int]  # (topic, partition, producer id)
STATE_KEY = ("topic", "partition_id", "producer_id")


def last_sequence(first_seq: int, record_count: int) -> int:
    """The sequence of a batch's last record: int32 arithmetic that wraps to 0 after MAX_SEQUENCE."""
    return (first_seq + record_count - 1) % (MAX_SEQUENCE + 1)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


@dataclass(slots=True)
class _Remembered:
    """One retained batch: its sequence range and base offset; ``pending`` if it is in this very flush."""

    first_seq: int
    last_seq: int
    base_offset: int
    pending: bool = False


@dataclass(slots=True)
class _Entry:
    """What a partition remembers of a producer (epoch -1 and no batches: nothing)."""

    epoch: int = NO_PRODUCER_EPOCH
    batches: list[_Remembered] = field(default_factory=list)
    changed: bool = False

    def copy(self) -> _Entry:
        return _Entry(self.epoch, list(self.batches), self.changed)


class ProducerQueries(SqlBase):
    def init_producer_id(self, current: ProducerIdAndEpoch | None, now_ms: int) -> ProducerIdAndEpoch:
        return self._backend.run(
            lambda tx: _init_producer_id(tx, self._d, current, now_ms), write=True, what="init_producer_id"
        )

    def expire_producers(self, before_ms: int) -> int:
        d = self._d
        lock = f"{d.for_update}{d.skip_locked}"

        def work(tx: Tx) -> int:
            # Row by row through a locking sub-select: rows a flush commit holds are skipped, not waited for.
            states = tx.execute(
                "DELETE FROM producer_state WHERE (topic, partition_id, producer_id) IN"
                f" (SELECT topic, partition_id, producer_id FROM producer_state WHERE last_ms < ?{lock})",
                (before_ms,),
            )
            ids = tx.execute(
                "DELETE FROM producer_ids WHERE producer_id IN (SELECT p.producer_id FROM producer_ids p"
                " WHERE p.updated_ms < ? AND NOT EXISTS"
                f" (SELECT 1 FROM producer_state s WHERE s.producer_id = p.producer_id){lock})",
                (before_ms,),
            )
            return states + ids

        return self._backend.run(work, write=True, what="expire_producers")


def _init_producer_id(
    tx: Tx, d: Dialect, current: ProducerIdAndEpoch | None, now_ms: int
) -> ProducerIdAndEpoch:
    if current is not None and current.producer_id >= 0:
        row = tx.one(
            f"SELECT epoch, last_epoch FROM producer_ids WHERE producer_id = ?{d.for_update}",
            (current.producer_id,),
        )
        if row is not None:
            epoch, last_epoch = int(row[0]), int(row[1])
            if current.epoch >= epoch:
                # At the latest epoch (or past it: Java clients bump an idempotent epoch locally), bump.
                if current.epoch < EPOCH_EXHAUSTED:
                    bumped = current.epoch + 1
                    tx.execute(
                        "UPDATE producer_ids SET epoch = ?, last_epoch = ?, updated_ms = ?"
                        " WHERE producer_id = ?",
                        (bumped, current.epoch, now_ms, current.producer_id),
                    )
                    return ProducerIdAndEpoch(current.producer_id, bumped)
            elif current.epoch == last_epoch:
                # The bump that produced ``epoch`` is being retried: its reply was lost. Same answer.
                tx.execute(
                    "UPDATE producer_ids SET updated_ms = ? WHERE producer_id = ?",
                    (now_ms, current.producer_id),
                )
                return ProducerIdAndEpoch(current.producer_id, epoch)
            else:
                raise ProducerFenced(
                    f"producer {current.producer_id} epoch {current.epoch} was replaced by epoch {epoch}"
                )
    return ProducerIdAndEpoch(new_producer_id(tx, now_ms), 0)


def new_producer_id(tx: Tx, now_ms: int) -> int:
    """A producer id never handed out before (idempotent and transactional producers share the sequence)."""
    row = tx.one(
        "INSERT INTO producer_ids (epoch, last_epoch, created_ms, updated_ms) VALUES (0, ?, ?, ?)"
        " RETURNING producer_id",
        (NO_PRODUCER_EPOCH, now_ms, now_ms),
    )
    assert row is not None  # INSERT ... RETURNING without a conflict clause returns its row
    return int(row[0])


def check_producers(
    tx: Tx,
    d: Dialect,
    chunks: Sequence[NewChunk],
    bases: Sequence[int],
    producers: Sequence[ProducerBatch],
    now_ms: int,
    expiration_ms: int,
) -> None:
    """Check ``producers`` against the committed state and write the new state; ProducerConflict if any
    append is a duplicate or rejected (the caller's transaction then rolls back).

    Runs under the partition locks of the chunks, after the offsets (``bases``) are assigned. Batches in
    chunks of deleted partitions (base -1) are not written, so they are neither checked nor remembered.
    """
    live = [b for b in producers if bases[b.chunk] >= 0]
    if not live:
        return
    # Each batch's key, found once: a Java producer's flush holds a batch per partition per request.
    keyed = [((chunks[b.chunk].topic, chunks[b.chunk].partition, b.producer_id), b) for b in live]
    keys = sorted({key for key, _ in keyed})
    # Transactions' partition rows rank before producer_state rows in the lock order (core).
    open_txns = OpenTxns.load(tx, d, sorted({key for key, b in keyed if b.transactional}))
    state = _load(tx, d, keys, now_ms - expiration_ms)
    by_append: dict[int, list[tuple[StateKey, ProducerBatch]]] = {}
    for item in keyed:
        by_append.setdefault(item[1].append, []).append(item)
    duplicates: dict[int, int] = {}
    rejected: dict[int, StrataError] = {}
    for append in sorted(by_append):
        items = by_append[append]
        verdict: int | StrataError | None = None
        if len(items) == 1 and not items[0][1].transactional:
            # The common append: one batch, no transaction. ``_apply`` changes the entry only when it
            # accepts the batch, so the append needs no trial copy.
            key, b = items[0]
            verdict = _apply(state[key], b, bases[b.chunk] + b.relative, key)
        else:
            trial = {key: state[key].copy() for key in {key for key, _ in items}}
            for key, b in items:
                verdict = _apply(trial[key], b, bases[b.chunk] + b.relative, key)
                if verdict is None and b.transactional:
                    verdict = open_txns.verify(b, key)
                if verdict is not None:
                    break
            if verdict is None:
                state.update(trial)  # the append is accepted: later appends are checked against it
                for key, b in items:
                    if b.transactional:
                        open_txns.written(key, bases[b.chunk] + b.relative)
        if isinstance(verdict, int):
            duplicates[append] = verdict
        elif verdict is not None:
            rejected[append] = verdict
    if duplicates or rejected:
        raise ProducerConflict(duplicates, rejected)
    open_txns.store()
    changed = [(key, state[key]) for key in keys if state[key].changed]
    # Many rows to a statement, not executemany's one step per row: each step gives up the GIL and must
    # win it back from a busy event loop (``core.insert_chunks``). The keys are distinct, as PostgreSQL
    # requires of one INSERT ... ON CONFLICT DO UPDATE.
    for batch in batches(changed):
        tx.execute(
            "INSERT INTO producer_state (topic, partition_id, producer_id, epoch, batches, last_ms)"
            f" VALUES {values(len(batch), 6)} ON CONFLICT (topic, partition_id, producer_id) DO UPDATE"
            " SET epoch = excluded.epoch, batches = excluded.batches, last_ms = excluded.last_ms",
            [v for key, entry in batch for v in (*key, entry.epoch, _batches_to_json(entry.batches), now_ms)],
        )


def _apply(entry: _Entry, batch: ProducerBatch, base_offset: int, key: StateKey) -> int | StrataError | None:
    """Check one batch against ``entry`` and, if it is a new in-sequence batch, record it there.

    Returns None (accepted), the original base offset (a duplicate of a committed batch), or the error.
    Only an accepted batch changes ``entry``: ``check_producers`` relies on it to apply a one-batch append
    without a trial copy.
    """
    last_seq = last_sequence(batch.first_seq, batch.record_count)
    if entry.epoch != NO_PRODUCER_EPOCH:
        if batch.epoch == entry.epoch:
            for seen in entry.batches:
                if seen.first_seq == batch.first_seq and seen.last_seq == last_seq:
                    if seen.pending:
                        # A retry of a batch that is itself in this flush (another connection resent it
                        # before the first copy committed): it has no offset yet. Retriable: once the
                        # first copy committed, the retry is answered as a duplicate.
                        return Unavailable(
                            f"{_where(batch, key)}: sequence {batch.first_seq} is being written; retry"
                        )
                    return seen.base_offset
        if batch.epoch < entry.epoch:
            return InvalidProducerEpoch(
                f"{_where(batch, key)}: epoch {batch.epoch} is older than the partition's epoch {entry.epoch}"
            )
        if batch.epoch > entry.epoch and batch.first_seq != 0:
            return OutOfOrderSequence(
                f"{_where(batch, key)}: a new epoch {batch.epoch} must start at sequence 0,"
                f" not {batch.first_seq}"
            )
        if batch.epoch == entry.epoch and not in_sequence(entry.batches[-1].last_seq, batch.first_seq):
            return OutOfOrderSequence(
                f"{_where(batch, key)}: sequence {batch.first_seq} does not follow"
                f" {entry.batches[-1].last_seq}"
            )
    if batch.epoch != entry.epoch:
        entry.epoch = batch.epoch
        entry.batches = []
    entry.batches.append(_Remembered(batch.first_seq, last_seq, base_offset, pending=True))
    del entry.batches[:-PRODUCER_BATCHES_RETAINED]
    entry.changed = True
    return None


def _where(batch: ProducerBatch, key: StateKey) -> str:
    return f"producer {batch.producer_id} on {key[0]}/{key[1]}"


def _load(tx: Tx, d: Dialect, keys: Sequence[StateKey], not_before_ms: int) -> dict[StateKey, _Entry]:
    """Lock and read the rows of ``keys`` (sorted); absent and expired rows read as empty entries."""
    state = {key: _Entry() for key in keys}
    rows = rows_by_keys(
        tx, d, "producer_state", STATE_KEY, ("epoch", "batches", "last_ms"), keys, d.for_update
    )
    for topic, partition, producer_id, epoch, text, last_ms in rows:
        if int(last_ms) >= not_before_ms:
            state[(str(topic), int(partition), int(producer_id))] = _Entry(
                int(epoch), _batches_from_json(text)
            )
    return state


# One decoder for every commit, not one per call.
_DECODER = json.JSONDecoder()


def _batches_to_json(remembered: Sequence[_Remembered]) -> str:
    # The JSON of a list of int triples, formatted directly: half the time of ``json``'s encoder, which
    # runs for every partition and producer of a flush commit. Ints format as JSON numbers.
    return "[" + ",".join([f"[{r.first_seq},{r.last_seq},{r.base_offset}]" for r in remembered]) + "]"


def _batches_from_json(text: str) -> list[_Remembered]:
    return [_Remembered(int(f), int(last), int(base)) for f, last, base in _DECODER.decode(text)]


def last_sequence_of(text: str) -> int:
    """The last sequence a ``producer_state.batches`` value records (-1: none)."""
    remembered = _batches_from_json(text)
    return remembered[-1].last_seq if remembered else -1
