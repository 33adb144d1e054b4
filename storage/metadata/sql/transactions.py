"""The transaction coordinator (``TransactionStore``): every Kafka transaction API is one SQL transaction.

The rules are ``txn_state``'s; this module reads and writes the rows (``schema_transactions``). Locks,
in the global order of ``core``: a ``consumer_groups`` row (TxnOffsetCommit only), then the
``transactions`` row, then partitions rows (sorted), then ``txn_partitions`` rows, then ``group_offsets``
and ``txn_offsets``. ``commit_flush`` never locks a ``transactions`` row; it reads and writes
``txn_partitions`` under the partition locks it holds (``sql/txn_append.py``).

Ending a transaction (EndTxn, the abort of an open transaction by InitProducerId, the timeout sweep) is
``_end_txn``: under the locks of every partition added to the transaction, each one it wrote to gets one
offset for its marker (``next_offset`` + 1, a ``txn_markers`` row), an aborted one its ``aborted_txns`` row,
and the transaction's ``txn_partitions`` rows go, which moves those partitions' LSO; a commit moves the
transaction's pending offsets into ``group_offsets``. A flush commit holds the same partition locks while
it checks a transactional batch against ``txn_partitions``, so a batch of a transaction commits before its
marker or is refused: never after it, where it would open a transaction nobody ends (a hanging one), or
(written first in a partition while an abort looked) be read as committed. Which partitions were written
is read only once their locks are held.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from storage.errors import (
    InvalidTxnState,
    StrataError,
    TransactionalIdNotFound,
)
from storage.metadata.rows import GroupRow, OffsetToCommit, ProducerIdAndEpoch
from storage.metadata.sql.core import (
    Row,
    Tx,
    batches,
    lock_partition_offsets,
    lock_partitions,
    missing_partition,
    set_next_offsets,
    values,
)
from storage.metadata.sql.groups import GroupQueries
from storage.metadata.sql.producers import new_producer_id
from storage.metadata.txn_state import (
    EndedTxn,
    Txn,
    TxnState,
    begun,
    bumped,
    check_producer,
    check_timeout,
    end_decision,
    ended,
    fenced_pair,
    next_incarnation,
    timed_out,
)

TXN_COLUMNS = (
    "transactional_id, producer_id, epoch, last_producer_id, last_epoch, state, timeout_ms, started_ms,"
    " updated_ms"
)


def txn_row(r: Row) -> Txn:
    return Txn(
        str(r[0]),
        int(r[1]),
        int(r[2]),
        int(r[3]),
        int(r[4]),
        TxnState(str(r[5])),
        int(r[6]),
        None if r[7] is None else int(r[7]),
        int(r[8]),
    )


class TransactionQueries(GroupQueries):
    # --- the coordinator's APIs ----------------------------------------------------------------------------
    def init_transactional_producer(
        self,
        transactional_id: str,
        timeout_ms: int,
        max_timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
        now_ms: int,
    ) -> tuple[ProducerIdAndEpoch, list[tuple[str, int]]]:
        check_timeout(timeout_ms, max_timeout_ms)

        def work(tx: Tx) -> tuple[ProducerIdAndEpoch, list[tuple[str, int]]]:
            txn = self._lock_txn(tx, transactional_id)
            if txn is None:
                given = ProducerIdAndEpoch(new_producer_id(tx, now_ms), 0)
                tx.execute(
                    f"INSERT INTO transactions ({TXN_COLUMNS}) VALUES (?, ?, ?, -1, -1, ?, ?, NULL, ?)",
                    (
                        transactional_id,
                        given.producer_id,
                        given.epoch,
                        TxnState.EMPTY.value,
                        timeout_ms,
                        now_ms,
                    ),
                )
                return given, []
            to, retry = next_incarnation(txn, expected)
            if retry and to is not None:
                return to, []
            touched: list[tuple[str, int]] = []
            if txn.state is TxnState.ONGOING:
                # A new incarnation aborts what the old one left open (Kafka's fence, then abort).
                touched = self._end_txn(tx, txn, False, now_ms)
            if to is None:  # the epoch is exhausted: a new producer id
                to = ProducerIdAndEpoch(new_producer_id(tx, now_ms), 0)
            self._store_txn(tx, bumped(txn, to, now_ms, retry_from_current=expected is not None), timeout_ms)
            return to, touched

        return self._backend.run(work, write=True, what="init_transactional_producer")

    def add_partitions_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Sequence[tuple[str, int]],
        now_ms: int,
    ) -> dict[tuple[str, int], StrataError]:
        keys = sorted(set(partitions))

        def work(tx: Tx) -> dict[tuple[str, int], StrataError]:
            txn = check_producer(self._lock_txn(tx, transactional_id), transactional_id, producer_id, epoch)
            existing = lock_partitions(tx, self._d, keys, self._d.for_key_share)
            missing: dict[tuple[str, int], StrataError] = {
                key: missing_partition(tx, *key) for key in keys if key not in existing
            }
            if missing:
                return missing  # Kafka adds none of them: the others are OPERATION_NOT_ATTEMPTED
            for batch in batches(keys):
                tx.execute(
                    "INSERT INTO txn_partitions (topic, partition_id, producer_id, transactional_id, epoch)"
                    f" VALUES {values(len(batch), 5)} ON CONFLICT (topic, partition_id, producer_id)"
                    " DO UPDATE SET transactional_id = excluded.transactional_id, epoch = excluded.epoch",
                    [v for t, p in batch for v in (t, p, producer_id, transactional_id, epoch)],
                )
            self._store_txn(tx, begun(txn, now_ms), txn.timeout_ms)
            return {}

        return self._backend.run(work, write=True, what="add_partitions_to_txn")

    def add_offsets_to_txn(
        self, transactional_id: str, producer_id: int, epoch: int, group: str, now_ms: int
    ) -> None:
        def work(tx: Tx) -> None:
            txn = check_producer(self._lock_txn(tx, transactional_id), transactional_id, producer_id, epoch)
            tx.execute(
                "INSERT INTO txn_groups (transactional_id, group_id) VALUES (?, ?)"
                " ON CONFLICT (transactional_id, group_id) DO NOTHING",
                (transactional_id, group),
            )
            self._store_txn(tx, begun(txn, now_ms), txn.timeout_ms)

        self._backend.run(work, write=True, what="add_offsets_to_txn")

    def txn_offset_commit(
        self,
        transactional_id: str,
        group: str,
        producer_id: int,
        epoch: int,
        check: Callable[[GroupRow | None], None],
        offsets: Sequence[OffsetToCommit],
        now_ms: int,
    ) -> dict[tuple[str, int], StrataError]:
        latest = {(o.topic, o.partition): o for o in offsets}
        keys = sorted(latest)

        def work(tx: Tx) -> dict[tuple[str, int], StrataError]:
            row = self._hold(tx, group)
            check(row)
            self._unhold(tx, group, row)
            txn = check_producer(
                self._lock_txn(tx, transactional_id, self._d.for_key_share),
                transactional_id,
                producer_id,
                epoch,
            )
            added = tx.one(
                "SELECT 1 FROM txn_groups WHERE transactional_id = ? AND group_id = ?",
                (transactional_id, group),
            )
            if txn.state is not TxnState.ONGOING or added is None:
                raise InvalidTxnState(
                    f"group {group!r} is not in an open transaction of {transactional_id!r}:"
                    " AddOffsetsToTxn comes first"
                )
            existing = lock_partitions(tx, self._d, keys, self._d.for_key_share)
            refused: dict[tuple[str, int], StrataError] = {
                key: missing_partition(tx, *key) for key in keys if key not in existing
            }
            tx.executemany(
                "INSERT INTO txn_offsets (group_id, topic, partition_id, producer_id, transactional_id,"
                " committed_offset, metadata, leader_epoch, committed_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (group_id, topic, partition_id, producer_id) DO UPDATE"
                " SET committed_offset = excluded.committed_offset, metadata = excluded.metadata,"
                " leader_epoch = excluded.leader_epoch, committed_ms = excluded.committed_ms",
                [
                    (
                        group,
                        o.topic,
                        o.partition,
                        producer_id,
                        transactional_id,
                        o.offset,
                        o.metadata,
                        o.leader_epoch,
                        now_ms,
                    )
                    for key in keys
                    if key in existing
                    for o in (latest[key],)
                ],
            )
            return refused

        return self._backend.run(work, write=True, what="txn_offset_commit")

    def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int
    ) -> EndedTxn:
        def work(tx: Tx) -> EndedTxn:
            txn = check_producer(self._lock_txn(tx, transactional_id), transactional_id, producer_id, epoch)
            if not end_decision(txn, commit):
                return EndedTxn([], changed=False)
            touched = self._end_txn(tx, txn, commit, now_ms)
            self._store_txn(tx, ended(txn, commit, now_ms), txn.timeout_ms)
            return EndedTxn(touched, changed=True)

        return self._backend.run(work, write=True, what="end_txn")

    def abort_timed_out_transactions(self, now_ms: int, limit: int = 100) -> list[tuple[str, int]]:
        """Abort every open transaction past its timeout, fencing its producer (epoch + 1, as Kafka's
        ``prepareFenceProducerEpoch``): its late EndTxn, AddPartitionsToTxn and transactional batches
        are refused. One transaction per SQL transaction; a row another agent holds is skipped (it is
        being ended or swept there). Returns the partitions that got a marker."""
        candidates = self._backend.run(
            lambda tx: [
                str(r[0])
                for r in tx.all(
                    "SELECT transactional_id FROM transactions"
                    " WHERE state = ? AND started_ms + timeout_ms < ? ORDER BY started_ms LIMIT ?",
                    (TxnState.ONGOING.value, now_ms, limit),
                )
            ],
            write=False,
            what="timed_out_transactions",
        )
        touched: list[tuple[str, int]] = []
        for transactional_id in candidates:

            def work(tx: Tx, transactional_id: str = transactional_id) -> list[tuple[str, int]]:
                txn = self._lock_txn(tx, transactional_id, self._d.for_update + self._d.skip_locked)
                if txn is None or not timed_out(txn, now_ms):
                    return []  # ended meanwhile, or being changed by someone else right now
                return self._fence_and_abort(tx, txn, now_ms)

            touched.extend(self._backend.run(work, write=True, what="abort_timed_out_transaction"))
        return touched

    def abort_transaction(self, transactional_id: str, now_ms: int) -> list[tuple[str, int]]:
        def work(tx: Tx) -> list[tuple[str, int]]:
            txn = self._lock_txn(tx, transactional_id)
            if txn is None:
                raise TransactionalIdNotFound(f"no transaction has the id {transactional_id!r}")
            if txn.state is not TxnState.ONGOING:
                raise InvalidTxnState(
                    f"transactional id {transactional_id!r} is {txn.state.value}: nothing is open"
                )
            return self._fence_and_abort(tx, txn, now_ms)

        return self._backend.run(work, write=True, what="abort_transaction")

    def _fence_and_abort(self, tx: Tx, txn: Txn, now_ms: int) -> list[tuple[str, int]]:
        """Epoch + 1 (a new producer id once exhausted), then abort the open transaction with the new pair,
        as Kafka's ``prepareFenceProducerEpoch``: the old pair's requests are refused from now on."""
        fenced = fenced_pair(txn) or ProducerIdAndEpoch(new_producer_id(tx, now_ms), 0)
        aborting = bumped(txn, fenced, now_ms, retry_from_current=False)
        done = self._end_txn(tx, aborting, False, now_ms, producer_id=txn.producer_id)
        self._store_txn(tx, ended(aborting, False, now_ms), txn.timeout_ms)
        return done

    def expire_transactional_ids(self, before_ms: int) -> int:
        """Forget the ids idle since ``before_ms`` with no open transaction
        (``transactional.id.expiration.ms``)."""
        return self._backend.run(
            lambda tx: tx.execute(
                "DELETE FROM transactions WHERE state <> ? AND updated_ms < ?",
                (TxnState.ONGOING.value, before_ms),
            ),
            write=True,
            what="expire_transactional_ids",
        )

    # --- helpers -------------------------------------------------------------------------------------------
    def _lock_txn(self, tx: Tx, transactional_id: str, lock: str | None = None) -> Txn | None:
        row = tx.one(
            f"SELECT {TXN_COLUMNS} FROM transactions WHERE transactional_id = ?"
            f"{self._d.for_update if lock is None else lock}",
            (transactional_id,),
        )
        return None if row is None else txn_row(row)

    def _store_txn(self, tx: Tx, txn: Txn, timeout_ms: int) -> None:
        tx.execute(
            "UPDATE transactions SET producer_id = ?, epoch = ?, last_producer_id = ?, last_epoch = ?,"
            " state = ?, timeout_ms = ?, started_ms = ?, updated_ms = ? WHERE transactional_id = ?",
            (
                txn.producer_id,
                txn.epoch,
                txn.last_producer_id,
                txn.last_epoch,
                txn.state.value,
                timeout_ms,
                txn.started_ms,
                txn.updated_ms,
                txn.transactional_id,
            ),
        )

    def _end_txn(
        self, tx: Tx, txn: Txn, commit: bool, now_ms: int, producer_id: int | None = None
    ) -> list[tuple[str, int]]:
        """End ``txn``'s open transaction (see the module doc); returns the partitions given a marker.

        ``producer_id``: whose rows to end, when ``txn`` already carries the pair of a fence (the markers
        carry the fenced epoch, as Kafka's do).
        """
        pid = txn.producer_id if producer_id is None else producer_id
        d = self._d
        # Every partition added, written or not yet: no new one can be added while the transactions row is
        # held, but a flush commit may be writing the transaction's first batch in one of them right now.
        added = [
            (str(r[0]), int(r[1]))
            for r in tx.all(
                "SELECT topic, partition_id FROM txn_partitions"
                " WHERE transactional_id = ? AND producer_id = ?",
                (txn.transactional_id, pid),
            )
        ]
        pending = [
            (
                str(r[0]),
                OffsetToCommit(
                    str(r[1]), int(r[2]), int(r[3]), None if r[4] is None else str(r[4]), int(r[5])
                ),
            )
            for r in tx.all(
                "SELECT group_id, topic, partition_id, committed_offset, metadata, leader_epoch"
                " FROM txn_offsets WHERE transactional_id = ? AND producer_id = ?",
                (txn.transactional_id, pid),
            )
        ]
        offsets = pending if commit else []
        keys = sorted(set(added) | {(o.topic, o.partition) for _, o in offsets})
        # One sorted pass over every partition: the data partitions get a marker (next_offset changes),
        # the offsets' partitions must keep existing while the offsets are written.
        locked = lock_partition_offsets(tx, d, keys, d.for_no_key_update)
        # Where the transaction wrote is read only now. A flush commit sets first_offset under the
        # partition's lock, so one that was writing the first batch here has committed by now (its batch
        # gets a marker), or has not begun (it will find no row and refuse the batch). Read before the
        # locks, on PostgreSQL such a batch would commit with no marker after it: an aborted batch that
        # read_committed consumers would return.
        written = [
            (str(r[0]), int(r[1]), int(r[2]))
            for r in tx.all(
                "SELECT topic, partition_id, first_offset FROM txn_partitions"
                " WHERE transactional_id = ? AND producer_id = ? AND first_offset IS NOT NULL",
                (txn.transactional_id, pid),
            )
        ]
        markers = self._write_markers(tx, txn, pid, written, locked, commit, now_ms)
        tx.execute(
            "DELETE FROM txn_partitions WHERE transactional_id = ? AND producer_id = ?",
            (txn.transactional_id, pid),
        )
        # Into group_offsets in (group, topic, partition) order; those of deleted partitions are dropped.
        by_group: dict[str, list[OffsetToCommit]] = {}
        for group, o in sorted(offsets, key=lambda g: (g[0], g[1].topic, g[1].partition)):
            if (o.topic, o.partition) in locked:
                by_group.setdefault(group, []).append(o)
        for group, committed in by_group.items():
            self._upsert(tx, group, committed, now_ms)
        tx.execute(
            "DELETE FROM txn_offsets WHERE transactional_id = ? AND producer_id = ?",
            (txn.transactional_id, pid),
        )
        tx.execute("DELETE FROM txn_groups WHERE transactional_id = ?", (txn.transactional_id,))
        return [(t, p) for t, p, _ in markers]

    def _write_markers(
        self,
        tx: Tx,
        txn: Txn,
        pid: int,
        written: list[tuple[str, int, int]],
        locked: dict[tuple[str, int], tuple[int, int]],
        commit: bool,
        now_ms: int,
    ) -> list[tuple[str, int, int]]:
        """A marker offset in each partition of ``written`` (topic, partition, first offset) that still
        exists, and an aborted range for an abort; returns (topic, partition, marker offset) of each."""
        next_offsets = {key: next_offset for key, (next_offset, _) in locked.items()}
        markers: list[tuple[str, int, int]] = []
        for topic, partition, _ in sorted(written):
            key = (topic, partition)
            if key not in next_offsets:
                continue  # the topic was deleted (or shrank) since: nothing left to mark
            markers.append((topic, partition, next_offsets[key]))
            next_offsets[key] += 1
        marked = {(t, p) for t, p, _ in markers}
        set_next_offsets(tx, {key: n for key, n in next_offsets.items() if key in marked})
        first_of = {(t, p): f for t, p, f in written}
        for batch in batches(markers):
            tx.execute(
                "INSERT INTO txn_markers (topic, partition_id, marker_offset, producer_id, epoch, is_commit,"
                f" timestamp_ms) VALUES {values(len(batch), 7)}",
                [v for t, p, o in batch for v in (t, p, o, txn.producer_id, txn.epoch, commit, now_ms)],
            )
            if not commit:
                tx.execute(
                    "INSERT INTO aborted_txns (topic, partition_id, producer_id, first_offset, last_offset)"
                    f" VALUES {values(len(batch), 5)}",
                    [v for t, p, o in batch for v in (t, p, pid, first_of[(t, p)], o)],
                )
        return markers
