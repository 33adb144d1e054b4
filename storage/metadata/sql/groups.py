"""Consumer group offsets: the group half of ``AdminStore``."""

from __future__ import annotations

from collections.abc import Sequence

from storage.metadata.base import GroupOffset
from storage.metadata.sql.core import SqlBase, Tx, lock_partitions, missing_partition


class GroupQueries(SqlBase):
    def commit_group_offsets(self, group: str, offsets: Sequence[tuple[str, int, int]], now_ms: int) -> None:
        """All or nothing. A (topic, partition) given twice keeps the later offset."""
        latest = {(topic, partition): offset for topic, partition, offset in offsets}
        keys = sorted(latest)

        def work(tx: Tx) -> None:
            existing = lock_partitions(tx, self._d, keys, self._d.for_key_share)
            for topic, partition in keys:
                if (topic, partition) not in existing:
                    raise missing_partition(tx, topic, partition)
            tx.executemany(
                "INSERT INTO group_offsets (group_id, topic, partition_id, committed_offset, committed_ms)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (group_id, topic, partition_id) DO UPDATE"
                " SET committed_offset = excluded.committed_offset, committed_ms = excluded.committed_ms",
                [(group, topic, partition, latest[(topic, partition)], now_ms) for topic, partition in keys],
            )

        self._backend.run(work, write=True, what="commit_group_offsets")

    def group_offsets(self, group: str) -> list[GroupOffset]:
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT topic, partition_id, committed_offset, committed_ms FROM group_offsets"
                f" WHERE group_id = ? ORDER BY topic{self._d.binary_collation}, partition_id",
                (group,),
            ),
            write=False,
            what="group_offsets",
        )
        return [GroupOffset(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]
