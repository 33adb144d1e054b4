"""The lake writers' leases and status (``LakeStore``, storage/metadata/lake_state.py) in ``lake_tables``.

Each transaction here takes one ``lake_tables`` row and no other lock (the lock order in ``core``). A lease
is taken by compare-and-set: the UPDATE names the state it read (free, expired, or already ours), so two
writers racing for a row cannot both get it, on SQLite (BEGIN IMMEDIATE) as on PostgreSQL (FOR UPDATE).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from storage.errors import ClaimRefused, LeaseLost
from storage.lake_config import MODE, MODE_DISABLED
from storage.metadata.lake_state import LakeClaim, LakeFootprint, LakeRunResult, LakeTableRow
from storage.metadata.rows import TopicInfo
from storage.metadata.schema_lake import REQUEST_COLUMNS
from storage.metadata.sql.core import Row, SqlBase, Tx, configs_from_json
from storage.objectstore.base import REQUEST_KINDS

_COLUMNS = (
    "topic, table_identifier, mode, delete_with_topic, topic_created_ms, committed_offsets,"
    " last_snapshot_id, last_commit_ms, last_run_ms, lag_records, error, lease_owner, lease_expires_ms,"
    f" commit_requested, {', '.join(REQUEST_COLUMNS)}, stored_objects, stored_bytes, stored_measured_ms"
)


def _offsets_json(offsets: Mapping[int, int]) -> str:
    return json.dumps({str(p): o for p, o in sorted(offsets.items())}, separators=(",", ":"))


def _row(r: Row) -> LakeTableRow:
    return LakeTableRow(
        topic=str(r[0]),
        table_identifier=str(r[1]),
        mode=str(r[2]),
        delete_with_topic=bool(r[3]),
        topic_created_ms=int(r[4]),
        committed_offsets={int(p): int(o) for p, o in json.loads(r[5]).items()},
        last_snapshot_id=None if r[6] is None else int(r[6]),
        last_commit_ms=None if r[7] is None else int(r[7]),
        last_run_ms=None if r[8] is None else int(r[8]),
        lag_records=int(r[9]),
        error=None if r[10] is None else str(r[10]),
        lease_owner=None if r[11] is None else str(r[11]),
        lease_expires_ms=None if r[12] is None else int(r[12]),
        commit_requested=bool(r[13]),
        requests={kind: int(n) for kind, n in zip(REQUEST_KINDS, r[14:19], strict=True)},
        stored=None if r[19] is None else LakeFootprint(int(r[19]), int(r[20]), int(r[21])),
    )


class LakeQueries(SqlBase):
    def lake_topics(self) -> list[TopicInfo]:
        def work(tx: Tx) -> list[Row]:
            # A cheap filter in SQL (the configs are JSON text), the exact one on the parsed configs.
            return tx.all(
                "SELECT name, partitions, configs, created_ms FROM topics WHERE configs LIKE ?"
                f" ORDER BY name{self._d.binary_collation}",
                (f"%{MODE}%",),
            )

        topics = [
            TopicInfo(str(r[0]), int(r[1]), configs_from_json(r[2]), int(r[3]))
            for r in self._backend.run(work, write=False, what="lake_topics")
        ]
        return [t for t in topics if t.configs.get(MODE, MODE_DISABLED) != MODE_DISABLED]

    def lake_tables(self) -> list[LakeTableRow]:
        def work(tx: Tx) -> list[LakeTableRow]:
            return [_row(r) for r in tx.all(f"SELECT {_COLUMNS} FROM lake_tables ORDER BY topic")]

        return self._backend.run(work, write=False, what="lake_tables")

    def lease_lake_table(
        self, claim: LakeClaim, owner: str, now_ms: int, lease_ms: int
    ) -> LakeTableRow | None:
        if lease_ms <= 0 or not owner:
            raise ValueError("a lease needs an owner and a positive time")

        def work(tx: Tx) -> LakeTableRow | None:
            other = tx.one(
                "SELECT topic FROM lake_tables WHERE table_identifier = ? AND topic <> ?",
                (claim.table_identifier, claim.topic),
            )
            if other is not None:
                raise ClaimRefused(
                    f"the Iceberg table {claim.table_identifier} is the table of topic {other[0]!r};"
                    f" set strata.iceberg.table of {claim.topic!r} to another name"
                )
            row = tx.one(
                f"SELECT lease_owner, lease_expires_ms FROM lake_tables WHERE topic = ?{self._d.for_update}",
                (claim.topic,),
            )
            facts = (claim.table_identifier, claim.mode, claim.delete_with_topic, claim.topic_created_ms)
            if row is None:
                tx.execute(
                    "INSERT INTO lake_tables (topic, table_identifier, mode, delete_with_topic,"
                    " topic_created_ms, committed_offsets, lease_owner, lease_expires_ms, created_ms,"
                    " updated_ms) VALUES (?, ?, ?, ?, ?, '{}', ?, ?, ?, ?)",
                    (claim.topic, *facts, owner, now_ms + lease_ms, now_ms, now_ms),
                )
            else:
                held_by, expires = row
                if held_by is not None and held_by != owner and expires is not None and expires >= now_ms:
                    return None
                # The committed offsets are another table's once the topic names a new one: reset, so
                # that retention's hold (planner/lake_hold.py) never reads them as this table's; so are
                # its stored figures (unknown until the new table is listed).
                tx.execute(
                    "UPDATE lake_tables SET committed_offsets ="
                    " CASE WHEN table_identifier = ? THEN committed_offsets ELSE '{}' END,"
                    " stored_objects = CASE WHEN table_identifier = ? THEN stored_objects END,"
                    " stored_bytes = CASE WHEN table_identifier = ? THEN stored_bytes END,"
                    " table_identifier = ?, mode = ?,"
                    " delete_with_topic = ?, topic_created_ms = ?, lease_owner = ?, lease_expires_ms = ?,"
                    " updated_ms = ? WHERE topic = ?",
                    (*[claim.table_identifier] * 3, *facts, owner, now_ms + lease_ms, now_ms, claim.topic),
                )
            leased = tx.one(f"SELECT {_COLUMNS} FROM lake_tables WHERE topic = ?", (claim.topic,))
            return None if leased is None else _row(leased)

        return self._backend.run(work, write=True, what="lease_lake_table")

    def heartbeat_lake_table(self, topic: str, owner: str, now_ms: int, lease_ms: int) -> None:
        def work(tx: Tx) -> None:
            changed = tx.execute(
                "UPDATE lake_tables SET lease_expires_ms = CASE WHEN lease_expires_ms > ?"
                " THEN lease_expires_ms ELSE ? END WHERE topic = ? AND lease_owner = ?",
                (now_ms + lease_ms, now_ms + lease_ms, topic, owner),
            )
            if changed != 1:
                raise LeaseLost(f"the lake writer of {topic!r} lost its lease")

        self._backend.run(work, write=True, what="heartbeat_lake_table")

    def finish_lake_run(self, topic: str, owner: str, now_ms: int, result: LakeRunResult) -> None:
        def work(tx: Tx) -> None:
            committed = None if result.committed is None else _offsets_json(result.committed)
            changed = tx.execute(
                "UPDATE lake_tables SET committed_offsets = COALESCE(?, committed_offsets),"
                " last_snapshot_id = COALESCE(?, last_snapshot_id),"
                " last_commit_ms = COALESCE(?, last_commit_ms), last_run_ms = COALESCE(?, ?),"
                " lag_records = ?, error = ?, lease_owner = NULL, lease_expires_ms = NULL,"
                " commit_requested = (commit_requested AND ?),"
                " updated_ms = ? WHERE topic = ? AND lease_owner = ?",
                (
                    committed,
                    result.snapshot_id,
                    result.commit_ms,
                    result.started_ms,
                    now_ms,
                    result.lag_records,
                    result.error,
                    # A run that learned the table's offsets (a commit, or nothing to commit) answers a
                    # commit asked for before it leased the row; a failed one, or one asked for since,
                    # stands for the next round.
                    result.committed is None or not result.request_seen,
                    now_ms,
                    topic,
                    owner,
                ),
            )
            if changed != 1:
                raise LeaseLost(f"the lake writer of {topic!r} lost its lease before recording its run")

        self._backend.run(work, write=True, what="finish_lake_run")

    def request_lake_commit(self, topic: str) -> bool:
        def work(tx: Tx) -> bool:
            return (
                tx.execute("UPDATE lake_tables SET commit_requested = ? WHERE topic = ?", (True, topic)) == 1
            )

        return self._backend.run(work, write=True, what="request_lake_commit")

    def forget_lake_table(self, topic: str, topic_created_ms: int) -> None:
        def work(tx: Tx) -> None:
            tx.execute(
                "DELETE FROM lake_tables WHERE topic = ? AND topic_created_ms = ?", (topic, topic_created_ms)
            )

        self._backend.run(work, write=True, what="forget_lake_table")
