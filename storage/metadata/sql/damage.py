"""Damaged ranges and their quarantine: ``DamageLog``.

A reader that finds a chunk's bytes failing their checks (compaction, ``strata scan``) records the range;
an operator's ``strata quarantine`` drops the chunk row, so reads move past its offsets as they move past
compaction's holes, and keeps the row here as the audit record. Quarantine takes its locks in the global
order (sql/core.py): the partition row, then the chunk's file row, as ``apply_retention`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.errors import DamagedRange, OffsetOutOfRange
from storage.metadata.rows import DamageRow
from storage.metadata.sql.core import SqlBase, Tx, mark_obsolete_if_empty, missing_partition

_COLUMNS = (
    "topic, partition_id, first_offset, last_offset, object_key, detail, found_by, found_ms,"
    " quarantined_ms, quarantined_by, reason"
)


def _row(r: tuple[object, ...]) -> DamageRow:
    return DamageRow(
        str(r[0]),
        int(str(r[1])),
        int(str(r[2])),
        int(str(r[3])),
        str(r[4]),
        str(r[5]),
        str(r[6]),
        int(str(r[7])),
        None if r[8] is None else int(str(r[8])),
        None if r[9] is None else str(r[9]),
        None if r[10] is None else str(r[10]),
    )


class DamageQueries(SqlBase):
    def record_damage(self, damaged: Sequence[DamagedRange], detail: str, found_by: str, now_ms: int) -> None:
        ordered = sorted(set(damaged), key=lambda d: (d.topic, d.partition, d.first_offset, d.object_key))

        def work(tx: Tx) -> None:
            for d in ordered:
                _insert(tx, d, detail, found_by, now_ms)

        self._backend.run(work, write=True, what="record_damage")

    def damaged_ranges(self, topic: str | None = None, quarantined: bool | None = None) -> list[DamageRow]:
        clauses: list[str] = []
        params: list[str | int] = []
        if topic is not None:
            clauses.append("topic = ?")
            params.append(topic)
        if quarantined is not None:
            clauses.append("quarantined_ms IS NOT NULL" if quarantined else "quarantined_ms IS NULL")
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""

        def work(tx: Tx) -> list[DamageRow]:
            rows = tx.all(
                f"SELECT {_COLUMNS} FROM damaged_ranges{where} ORDER BY topic, partition_id, first_offset",
                tuple(params),
            )
            return [_row(r) for r in rows]

        return self._backend.run(work, write=False, what="damaged_ranges")

    def quarantine(
        self, topic: str, partition: int, offset: int, principal: str, reason: str, now_ms: int
    ) -> DamageRow:
        def work(tx: Tx) -> DamageRow:
            if (
                tx.one(
                    "SELECT 1 FROM partitions WHERE topic = ? AND partition_id = ?"
                    f"{self._d.for_no_key_update}",
                    (topic, partition),
                )
                is None
            ):
                raise missing_partition(tx, topic, partition)
            found = tx.one(
                "SELECT c.chunk_id, c.base_offset, c.last_offset, c.file_id, f.object_key"
                " FROM chunks c JOIN files f ON f.file_id = c.file_id"
                " WHERE c.topic = ? AND c.partition_id = ? AND c.base_offset <= ? AND c.last_offset >= ?",
                (topic, partition, offset, offset),
            )
            if found is None:
                raise OffsetOutOfRange(f"no stored chunk of {topic}/{partition} holds offset {offset}")
            chunk_id, first, last, file_id, key = (
                int(found[0]),
                int(found[1]),
                int(found[2]),
                int(found[3]),
                str(found[4]),
            )
            tx.one(f"SELECT 1 FROM files WHERE file_id = ?{self._d.for_no_key_update}", (file_id,))
            tx.execute("DELETE FROM chunks WHERE chunk_id = ?", (chunk_id,))
            mark_obsolete_if_empty(tx, [file_id], now_ms)
            damaged = DamagedRange(topic, partition, first, last, key)
            _insert(tx, damaged, "quarantined without a reader's report", principal, now_ms)
            tx.execute(
                "UPDATE damaged_ranges SET quarantined_ms = ?, quarantined_by = ?, reason = ?"
                " WHERE topic = ? AND partition_id = ? AND first_offset = ? AND object_key = ?",
                (now_ms, principal, reason, topic, partition, first, key),
            )
            row = tx.one(
                f"SELECT {_COLUMNS} FROM damaged_ranges"
                " WHERE topic = ? AND partition_id = ? AND first_offset = ? AND object_key = ?",
                (topic, partition, first, key),
            )
            assert row is not None
            return _row(row)

        return self._backend.run(work, write=True, what="quarantine")


def _insert(tx: Tx, d: DamagedRange, detail: str, found_by: str, now_ms: int) -> None:
    """The range's row, unless one exists (the first finding stays)."""
    if (
        tx.one(
            "SELECT 1 FROM damaged_ranges WHERE topic = ? AND partition_id = ? AND first_offset = ?"
            " AND object_key = ?",
            (d.topic, d.partition, d.first_offset, d.object_key),
        )
        is None
    ):
        tx.execute(
            f"INSERT INTO damaged_ranges ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL)",
            (d.topic, d.partition, d.first_offset, d.last_offset, d.object_key, detail, found_by, now_ms),
        )
