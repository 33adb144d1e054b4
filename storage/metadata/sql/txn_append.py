"""Transactional batches in a flush commit: KIP-890 part 1's check, made where offsets are given.

A transactional batch is written only if its partition is in its producer's open transaction with the
batch's epoch (a ``txn_partitions`` row, added by AddPartitionsToTxn). The check runs inside
``commit_flush`` under the partition locks, which EndTxn takes too before it deletes the rows, so a late
batch of an ended or fenced transaction is refused rather than stored after the marker, where it would
hold the partition's LSO forever (a hanging transaction). The refusals:
- no row: INVALID_PRODUCER_EPOCH when the transactional id has moved to a newer epoch (the producer was
  fenced, by a new incarnation or a timeout), else INVALID_TXN_STATE (the partition was never added);
- a row of another epoch: INVALID_PRODUCER_EPOCH for an older one, INVALID_TXN_STATE for a newer one.
The first written batch sets the row's ``first_offset``: where the transaction begins in the partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from storage.errors import InvalidProducerEpoch, InvalidTxnState, StrataError
from storage.metadata.rows import ProducerBatch
from storage.metadata.sql.core import Dialect, Tx, batches, rows_by_keys, values

Key = tuple[str, int, int]  # (topic, partition, producer id)


@dataclass(slots=True)
class OpenTxns:
    """The ``txn_partitions`` rows of a flush's transactional batches, locked, and what the flush adds."""

    tx: Tx  # the flush commit's transaction, which holds the rows' locks
    rows: dict[Key, tuple[int, int | None]]  # key -> (epoch, first_offset)
    first: dict[Key, int] = field(default_factory=dict)

    @classmethod
    def load(cls, tx: Tx, d: Dialect, keys: Sequence[Key]) -> OpenTxns:
        """Lock and read the rows of ``keys`` (sorted, so locks are taken in the global order)."""
        found = rows_by_keys(
            tx,
            d,
            "txn_partitions",
            ("topic", "partition_id", "producer_id"),
            ("epoch", "first_offset"),
            keys,
            d.for_update,
        )
        rows: dict[Key, tuple[int, int | None]] = {
            (str(topic), int(partition), int(producer_id)): (
                int(epoch),
                None if first is None else int(first),
            )
            for topic, partition, producer_id, epoch, first in found
        }
        return cls(tx, rows)

    def verify(self, batch: ProducerBatch, key: Key) -> StrataError | None:
        where = f"producer {batch.producer_id} on {key[0]}/{key[1]}"
        row = self.rows.get(key)
        if row is None:
            newer = self._current_epoch(batch.producer_id)
            if newer is not None and newer > batch.epoch:
                return InvalidProducerEpoch(f"{where}: epoch {batch.epoch} was fenced by epoch {newer}")
            return InvalidTxnState(
                f"{where}: the partition is not in the producer's open transaction (AddPartitionsToTxn first)"
            )
        epoch = row[0]
        if batch.epoch < epoch:
            return InvalidProducerEpoch(
                f"{where}: epoch {batch.epoch} is older than the transaction's {epoch}"
            )
        if batch.epoch > epoch:
            return InvalidTxnState(f"{where}: epoch {batch.epoch} has no open transaction here")
        return None

    def written(self, key: Key, offset: int) -> None:
        """A batch of ``key``'s transaction is accepted at ``offset``."""
        if self.rows[key][1] is None:
            self.first[key] = min(offset, self.first.get(key, offset))

    def store(self) -> None:
        """Record where each transaction begins in partitions it had not written to before."""
        if not self.first:
            return
        # Many rows to a statement, not executemany's one step per row (see ``core.insert_chunks``).
        for batch in batches(sorted(self.first.items())):
            self.tx.execute(
                f"WITH v (o, topic, p, pid) AS (VALUES {values(len(batch), 4)})"
                " UPDATE txn_partitions SET first_offset = v.o FROM v WHERE txn_partitions.topic = v.topic"
                " AND txn_partitions.partition_id = v.p AND txn_partitions.producer_id = v.pid"
                " AND txn_partitions.first_offset IS NULL",
                [v for key, offset in batch for v in (offset, *key)],
            )

    def _current_epoch(self, producer_id: int) -> int | None:
        """The epoch of the transactional id that holds ``producer_id`` now, read without a lock: it only
        chooses between two refusals."""
        row = self.tx.one("SELECT MAX(epoch) FROM transactions WHERE producer_id = ?", (producer_id,))
        return None if row is None or row[0] is None else int(row[0])
