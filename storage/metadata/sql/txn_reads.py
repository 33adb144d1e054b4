"""The transaction coordinator's reads (``TransactionStore``, and the markers and aborted ranges of
``LogStore`` and ``CompactionCatalog``): what DescribeTransactions, ListTransactions and DescribeProducers
show, and what the fetch path and clean jobs read. Each is one read transaction."""

from __future__ import annotations

from storage.errors import TransactionalIdNotFound
from storage.metadata.sql.core import SqlBase, Tx, missing_partition
from storage.metadata.sql.producers import last_sequence_of
from storage.metadata.sql.transactions import TXN_COLUMNS as _TXN_COLUMNS
from storage.metadata.sql.transactions import txn_row
from storage.metadata.txn_state import (
    AbortedTxn,
    ActiveProducer,
    Txn,
    TxnDescription,
    TxnMarker,
    TxnPartition,
    TxnState,
)


class TransactionReads(SqlBase):
    def describe_transaction(self, transactional_id: str) -> TxnDescription:
        def work(tx: Tx) -> TxnDescription:
            row = tx.one(
                f"SELECT {_TXN_COLUMNS} FROM transactions WHERE transactional_id = ?", (transactional_id,)
            )
            txn = None if row is None else txn_row(row)
            if txn is None:
                raise TransactionalIdNotFound(f"no transaction has the id {transactional_id!r}")
            parts = [
                TxnPartition(str(r[0]), int(r[1]), None if r[2] is None else int(r[2]))
                for r in tx.all(
                    "SELECT topic, partition_id, first_offset FROM txn_partitions"
                    " WHERE transactional_id = ? AND producer_id = ?"
                    f" ORDER BY topic{self._d.binary_collation}, partition_id",
                    (transactional_id, txn.producer_id),
                )
            ]
            groups = [
                str(r[0])
                for r in tx.all(
                    "SELECT group_id FROM txn_groups WHERE transactional_id = ?"
                    f" ORDER BY group_id{self._d.binary_collation}",
                    (transactional_id,),
                )
            ]
            return TxnDescription(txn, parts, groups)

        return self._backend.run(work, write=False, what="describe_transaction")

    def list_transactions(self) -> list[Txn]:
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {_TXN_COLUMNS} FROM transactions ORDER BY transactional_id{self._d.binary_collation}"
            ),
            write=False,
            what="list_transactions",
        )
        return [txn_row(r) for r in rows]

    def describe_transactions(self) -> list[TxnDescription]:
        """Three queries, whatever the number of ids: the rows, then every open partition and group."""

        def work(tx: Tx) -> list[TxnDescription]:
            txns = [txn_row(r) for r in tx.all(f"SELECT {_TXN_COLUMNS} FROM transactions")]
            parts: dict[str, list[TxnPartition]] = {}
            for r in tx.all(
                "SELECT p.transactional_id, p.topic, p.partition_id, p.first_offset FROM txn_partitions p"
                " JOIN transactions t ON t.transactional_id = p.transactional_id"
                " AND t.producer_id = p.producer_id"
                f" ORDER BY p.topic{self._d.binary_collation}, p.partition_id"
            ):
                parts.setdefault(str(r[0]), []).append(
                    TxnPartition(str(r[1]), int(r[2]), None if r[3] is None else int(r[3]))
                )
            groups: dict[str, list[str]] = {}
            for r in tx.all(
                "SELECT transactional_id, group_id FROM txn_groups"
                f" ORDER BY group_id{self._d.binary_collation}"
            ):
                groups.setdefault(str(r[0]), []).append(str(r[1]))
            # Python's sort of str is by code point, the binary collation's order.
            txns.sort(key=lambda t: t.transactional_id)
            return [
                TxnDescription(t, parts.get(t.transactional_id, []), groups.get(t.transactional_id, []))
                for t in txns
            ]

        return self._backend.run(work, write=False, what="describe_transactions")

    def txn_markers(
        self, topic: str, partition: int, first: int, last: int, limit: int | None = None
    ) -> list[TxnMarker]:
        """The markers at offsets ``first`` .. ``last`` of a partition, by offset (the first ``limit``)."""
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT marker_offset, producer_id, epoch, is_commit, timestamp_ms, delete_horizon_ms"
                " FROM txn_markers"
                " WHERE topic = ? AND partition_id = ? AND marker_offset >= ? AND marker_offset <= ?"
                " ORDER BY marker_offset" + ("" if limit is None else f" LIMIT {int(limit)}"),
                (topic, partition, first, last),
            ),
            write=False,
            what="txn_markers",
        )
        return [
            TxnMarker(
                int(r[0]), int(r[1]), int(r[2]), bool(r[3]), int(r[4]), None if r[5] is None else int(r[5])
            )
            for r in rows
        ]

    def aborted_txns(self, topic: str, partition: int, first: int, last: int) -> list[AbortedTxn]:
        """The aborted transactions whose range meets offsets ``first`` .. ``last``, by first offset."""
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT producer_id, first_offset, last_offset FROM aborted_txns"
                " WHERE topic = ? AND partition_id = ? AND last_offset >= ? AND first_offset <= ?"
                " ORDER BY first_offset, last_offset",
                (topic, partition, first, last),
            ),
            write=False,
            what="aborted_txns",
        )
        return [AbortedTxn(int(r[0]), int(r[1]), int(r[2])) for r in rows]

    def pending_txn_offsets(self, group: str) -> set[tuple[str, int]]:
        """The partitions with offsets of an open transaction for ``group`` (OffsetFetch's require_stable)."""
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT DISTINCT topic, partition_id FROM txn_offsets WHERE group_id = ?", (group,)
            ),
            write=False,
            what="pending_txn_offsets",
        )
        return {(str(r[0]), int(r[1])) for r in rows}

    def open_transactions(self, now_ms: int) -> tuple[int, int | None]:
        """How many transactions are open, and when the oldest began (None: none is open)."""
        row = self._backend.run(
            lambda tx: tx.one(
                "SELECT COUNT(*), MIN(started_ms) FROM transactions WHERE state = ?",
                (TxnState.ONGOING.value,),
            ),
            write=False,
            what="open_transactions",
        )
        return (0, None) if row is None else (int(row[0]), None if row[1] is None else int(row[1]))

    def describe_producers(self, topic: str, partition: int) -> list[ActiveProducer]:
        """The producers a partition remembers (DescribeProducers), with where their open transaction
        begins there (-1: none)."""

        def work(tx: Tx) -> list[ActiveProducer]:
            if (
                tx.one("SELECT 1 FROM partitions WHERE topic = ? AND partition_id = ?", (topic, partition))
                is None
            ):
                raise missing_partition(tx, topic, partition)
            rows = tx.all(
                "SELECT s.producer_id, s.epoch, s.batches, s.last_ms, t.first_offset FROM producer_state s"
                " LEFT JOIN txn_partitions t ON t.topic = s.topic AND t.partition_id = s.partition_id"
                " AND t.producer_id = s.producer_id"
                " WHERE s.topic = ? AND s.partition_id = ? ORDER BY s.producer_id",
                (topic, partition),
            )
            return [
                ActiveProducer(
                    int(r[0]),
                    int(r[1]),
                    last_sequence_of(str(r[2])),
                    int(r[3]),
                    -1 if r[4] is None else int(r[4]),
                )
                for r in rows
            ]

        return self._backend.run(work, write=False, what="describe_producers")
