"""What the lake costs (``LakeStore.record_lake_usage``, ``lake_usage_totals``): its requests and stored
bytes, per topic in ``lake_tables`` and in total in ``lake_request_totals`` (migration 14,
``storage/metadata/schema_lake.py``).

Recording is a pair of increments in one transaction, so any number of workers (and the lake's maintenance,
which holds no lease) record at once without losing a count. The lock order is ``lake_tables`` row first,
then the totals row, in every transaction that takes both. A listing's footprint replaces the stored figures
rather than adding to them; see ``LakeUsage`` for how the other changes move them.
"""

from __future__ import annotations

from storage.metadata.lake_state import LakeFootprint, LakeUsage, LakeUsageTotals
from storage.metadata.schema_lake import REQUEST_COLUMNS
from storage.metadata.sql.core import SqlBase, Tx
from storage.objectstore.base import REQUEST_KINDS

_INCREMENTS = ", ".join(f"{c} = {c} + ?" for c in REQUEST_COLUMNS)


class LakeUsageQueries(SqlBase):
    def record_lake_usage(
        self, topic: str, topic_created_ms: int, now_ms: int, usage: LakeUsage
    ) -> LakeFootprint | None:
        counts = tuple(int(usage.requests.get(kind, 0)) for kind in REQUEST_KINDS)
        footprint = usage.footprint

        def work(tx: Tx) -> LakeFootprint | None:
            if footprint is not None:
                stored = "stored_objects = ?, stored_bytes = ?, stored_measured_ms = ?"
                values: tuple[int, ...] = (footprint.objects, footprint.bytes, footprint.measured_ms)
            elif usage.deletes:
                stored = "stored_objects = NULL, stored_bytes = NULL"
                values = ()
            else:
                # NULL + n is NULL: a figure never measured stays unknown.
                stored = "stored_objects = stored_objects + ?, stored_bytes = stored_bytes + ?"
                values = (usage.objects_written, usage.bytes_written)
            tx.execute(
                f"UPDATE lake_tables SET {_INCREMENTS}, {stored}, updated_ms = ?"
                " WHERE topic = ? AND topic_created_ms = ?",
                (*counts, *values, now_ms, topic, topic_created_ms),
            )
            tx.execute(
                f"UPDATE lake_request_totals SET {_INCREMENTS}, updated_ms = ? WHERE id = 1",
                (*counts, now_ms),
            )
            row = tx.one(
                "SELECT stored_objects, stored_bytes, stored_measured_ms FROM lake_tables"
                " WHERE topic = ? AND topic_created_ms = ?",
                (topic, topic_created_ms),
            )
            if row is None or row[0] is None:
                return None
            return LakeFootprint(int(row[0]), int(row[1]), int(row[2]))

        return self._backend.run(work, write=True, what="record_lake_usage")

    def lake_usage_totals(self) -> LakeUsageTotals:
        def work(tx: Tx) -> LakeUsageTotals:
            totals = tx.one(f"SELECT {', '.join(REQUEST_COLUMNS)} FROM lake_request_totals WHERE id = 1")
            stored = tx.one(
                "SELECT COALESCE(SUM(stored_objects), 0), COALESCE(SUM(stored_bytes), 0), COUNT(*),"
                " COUNT(*) - COUNT(stored_objects) FROM lake_tables"
            )
            # Migration 14 inserts the one totals row, and an aggregate always answers.
            assert totals is not None
            assert stored is not None
            return LakeUsageTotals(
                requests={kind: int(n) for kind, n in zip(REQUEST_KINDS, totals, strict=True)},
                stored_objects=int(stored[0]),
                stored_bytes=int(stored[1]),
                tables=int(stored[2]),
                unmeasured=int(stored[3]),
            )

        return self._backend.run(work, write=False, what="lake_usage_totals")
