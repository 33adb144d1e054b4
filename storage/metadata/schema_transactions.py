"""Migration 9: Kafka transactions (KIP-98, transaction version 1) as rows, so that any agent coordinates
any transactional id and a transaction ends in one metadata transaction, with no markers fanned out.

- ``transactions``: one row per transactional id (Kafka's TransactionMetadata): the producer id and epoch
  it was given, the previous ones (a retried InitProducerId is answered the same, KIP-360), its state
  (Empty, Ongoing, CompleteCommit, CompleteAbort: the Prepare states of Kafka's coordinator do not exist,
  since one SQL transaction moves Ongoing to Complete*), its timeout and when it began.
- ``txn_partitions``: the partitions of each open transaction, the partition side of the producer state.
  ``first_offset`` is the offset of the transaction's first record there, set by the flush commit that
  writes it; the smallest one of a partition is its last stable offset (LSO).
- ``txn_groups`` and ``txn_offsets``: the groups of AddOffsetsToTxn and the offsets of TxnOffsetCommit,
  pending until EndTxn moves them into ``group_offsets`` (commit) or drops them (abort).
- ``txn_markers``: each COMMIT or ABORT marker, one offset in a partition. The marker's bytes are never
  stored in an object: the Kafka fetch path builds the control batch from this row, and every other
  reader sees the offset as a hole.
- ``aborted_txns``: Kafka's aborted-transaction index: (producer id, first offset, marker offset) of each
  aborted transaction in a partition, for read_committed fetches.

Migration 10 gives each marker a delete horizon (``delete_horizon_ms``), Kafka's rule for markers in a
compacted partition (KIP-534): a clean that finds none of the transaction's records left sets it to
``now + delete.retention.ms``; a clean after that time drops the marker (and its aborted range), so a
reader that fetched the transaction's records before they went still finds the marker that ends them.
"""

from __future__ import annotations

from typing import Protocol


class Types(Protocol):
    """The dialect's column types (schema._Types)."""

    @property
    def big(self) -> str: ...
    @property
    def small(self) -> str: ...
    @property
    def boolean(self) -> str: ...
    @property
    def table_options(self) -> str: ...


def v9(t: Types) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE transactions (
            transactional_id TEXT PRIMARY KEY,
            producer_id {t.big} NOT NULL,
            epoch {t.small} NOT NULL,
            last_producer_id {t.big} NOT NULL,
            last_epoch {t.small} NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('Empty', 'Ongoing', 'CompleteCommit', 'CompleteAbort')),
            timeout_ms {t.big} NOT NULL,
            started_ms {t.big},
            updated_ms {t.big} NOT NULL,
            CHECK ((state = 'Ongoing') = (started_ms IS NOT NULL))
        ){t.table_options}""",
        # The timeout sweeper scans open transactions by age; expiry scans ended ones by idleness.
        "CREATE INDEX transactions_by_state ON transactions (state, started_ms)",
        "CREATE INDEX transactions_by_updated ON transactions (updated_ms)",
        "CREATE INDEX transactions_by_producer ON transactions (producer_id)",
        f"""CREATE TABLE txn_partitions (
            topic TEXT NOT NULL,
            partition_id {t.small} NOT NULL,
            producer_id {t.big} NOT NULL,
            transactional_id TEXT NOT NULL,
            epoch {t.small} NOT NULL,
            first_offset {t.big},
            PRIMARY KEY (topic, partition_id, producer_id)
        ){t.table_options}""",
        "CREATE INDEX txn_partitions_by_id ON txn_partitions (transactional_id)",
        f"""CREATE TABLE txn_groups (
            transactional_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            PRIMARY KEY (transactional_id, group_id)
        ){t.table_options}""",
        f"""CREATE TABLE txn_offsets (
            group_id TEXT NOT NULL,
            topic TEXT NOT NULL,
            partition_id {t.small} NOT NULL,
            producer_id {t.big} NOT NULL,
            transactional_id TEXT NOT NULL,
            committed_offset {t.big} NOT NULL,
            metadata TEXT,
            leader_epoch {t.small} NOT NULL,
            committed_ms {t.big} NOT NULL,
            PRIMARY KEY (group_id, topic, partition_id, producer_id)
        ){t.table_options}""",
        "CREATE INDEX txn_offsets_by_id ON txn_offsets (transactional_id)",
        f"""CREATE TABLE txn_markers (
            topic TEXT NOT NULL,
            partition_id {t.small} NOT NULL,
            marker_offset {t.big} NOT NULL,
            producer_id {t.big} NOT NULL,
            epoch {t.small} NOT NULL,
            is_commit {t.boolean} NOT NULL,
            timestamp_ms {t.big} NOT NULL,
            PRIMARY KEY (topic, partition_id, marker_offset)
        ){t.table_options}""",
        f"""CREATE TABLE aborted_txns (
            topic TEXT NOT NULL,
            partition_id {t.small} NOT NULL,
            producer_id {t.big} NOT NULL,
            first_offset {t.big} NOT NULL,
            last_offset {t.big} NOT NULL,
            PRIMARY KEY (topic, partition_id, last_offset)
        ){t.table_options}""",
    )


def v10(t: Types) -> tuple[str, ...]:
    return (f"ALTER TABLE txn_markers ADD COLUMN delete_horizon_ms {t.big}",)
