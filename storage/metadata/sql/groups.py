"""Consumer groups: committed offsets (the group half of ``AdminStore``, shared by both front doors) and
the coordinator state of ``GroupStore``.

Locking: a group's ``consumer_groups`` row is the first lock of any transaction that takes it (none of
them takes a ``jobs`` row), then the partitions (FOR KEY SHARE) and ``group_offsets`` rows as in
``core``'s order. A group that has no row yet gets one inserted first (ON CONFLICT DO NOTHING), so two
agents handling the group's first requests at once queue on the same row lock instead of both inserting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from storage.errors import StrataError, Unavailable
from storage.metadata.rows import GroupOffset, GroupRow, OffsetToCommit
from storage.metadata.sql.core import SqlBase, Tx, lock_partitions, missing_partition

T = TypeVar("T")

_HOLD_TRIES = 3
# The placeholder row of a group that has none yet: it reads as None and is deleted if left unused.
_NO_DOC = ""


class GroupQueries(SqlBase):
    def commit_group_offsets(
        self,
        group: str,
        offsets: Sequence[tuple[str, int, int]],
        now_ms: int,
        check: Callable[[GroupRow | None], None] | None = None,
    ) -> None:
        """All or nothing. A (topic, partition) given twice keeps the later offset."""
        latest = {(topic, partition): offset for topic, partition, offset in offsets}
        keys = sorted(latest)

        def work(tx: Tx) -> None:
            if check is not None:
                row = self._hold(tx, group)  # a join waits for this commit, and this one for a join
                check(row)
                self._unhold(tx, group, row)
            existing = lock_partitions(tx, self._d, keys, self._d.for_key_share)
            for topic, partition in keys:
                if (topic, partition) not in existing:
                    raise missing_partition(tx, topic, partition)
            self._upsert(tx, group, [OffsetToCommit(t, p, latest[(t, p)]) for t, p in keys], now_ms)

        self._backend.run(work, write=True, what="commit_group_offsets")

    def _upsert(self, tx: Tx, group: str, offsets: Sequence[OffsetToCommit], now_ms: int) -> None:
        tx.executemany(
            "INSERT INTO group_offsets"
            " (group_id, topic, partition_id, committed_offset, committed_ms, metadata, leader_epoch)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (group_id, topic, partition_id) DO UPDATE"
            " SET committed_offset = excluded.committed_offset, committed_ms = excluded.committed_ms,"
            " metadata = excluded.metadata, leader_epoch = excluded.leader_epoch",
            [(group, o.topic, o.partition, o.offset, now_ms, o.metadata, o.leader_epoch) for o in offsets],
        )

    def group_offsets(self, group: str) -> list[GroupOffset]:
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT topic, partition_id, committed_offset, committed_ms, metadata, leader_epoch"
                " FROM group_offsets WHERE group_id = ?"
                f" ORDER BY topic{self._d.binary_collation}, partition_id",
                (group,),
            ),
            write=False,
            what="group_offsets",
        )
        return [
            GroupOffset(
                str(r[0]), int(r[1]), int(r[2]), int(r[3]), None if r[4] is None else str(r[4]), int(r[5])
            )
            for r in rows
        ]

    # --- coordinator state --------------------------------------------------------------------------------
    def _hold(self, tx: Tx, group: str) -> GroupRow | None:
        now_ms = self._clock.now_ms()
        for _ in range(_HOLD_TRIES):
            tx.execute(
                "INSERT INTO consumer_groups (group_id, phase, protocol_type, doc, updated_ms)"
                " VALUES (?, 'Empty', NULL, ?, ?) ON CONFLICT (group_id) DO NOTHING",
                (group, _NO_DOC, now_ms),
            )
            row = tx.one(
                "SELECT phase, protocol_type, doc FROM consumer_groups"
                f" WHERE group_id = ?{self._d.for_update}",
                (group,),
            )
            # None: at READ COMMITTED the INSERT saw a row that a concurrent delete then removed while the
            # SELECT waited for its lock. Insert again.
            if row is not None:
                break
        else:
            raise Unavailable(f"group {group!r} kept being deleted under this request; retry")
        if row[2] == _NO_DOC:
            return None
        return GroupRow(str(row[0]), None if row[1] is None else str(row[1]), str(row[2]))

    def _unhold(self, tx: Tx, group: str, row: GroupRow | None) -> None:
        """For a transaction that only read the held row: drop the placeholder ``_hold`` inserted for a
        group without state, so that offsets-only groups leave no empty rows behind."""
        if row is None:
            tx.execute("DELETE FROM consumer_groups WHERE group_id = ?", (group,))

    def _store(self, tx: Tx, group: str, old: GroupRow | None, new: GroupRow | None) -> None:
        if new is None:
            tx.execute("DELETE FROM consumer_groups WHERE group_id = ?", (group,))
        elif new != old:
            tx.execute(
                "UPDATE consumer_groups SET phase = ?, protocol_type = ?, doc = ?, updated_ms = ?"
                " WHERE group_id = ?",
                (new.phase, new.protocol_type, new.doc, self._clock.now_ms(), group),
            )

    def update_group(self, group: str, change: Callable[[GroupRow | None], tuple[GroupRow | None, T]]) -> T:
        def work(tx: Tx) -> T:
            old = self._hold(tx, group)
            new, result = change(old)
            self._store(tx, group, old, new)
            return result

        return self._backend.run(work, write=True, what="update_group")

    def load_group(self, group: str) -> GroupRow | None:
        row = self._backend.run(
            lambda tx: tx.one(
                "SELECT phase, protocol_type, doc FROM consumer_groups WHERE group_id = ?", (group,)
            ),
            write=False,
            what="load_group",
        )
        if row is None or row[2] == _NO_DOC:
            return None
        return GroupRow(str(row[0]), None if row[1] is None else str(row[1]), str(row[2]))

    def list_groups(self, active_only: bool = False) -> list[tuple[str, GroupRow | None]]:
        def work(tx: Tx) -> list[tuple[str, GroupRow | None]]:
            out: dict[str, GroupRow | None] = {}
            if not active_only:
                out = {str(r[0]): None for r in tx.all("SELECT DISTINCT group_id FROM group_offsets")}
            where = " WHERE phase <> 'Empty'" if active_only else ""
            for gid, phase, ptype, doc in tx.all(
                f"SELECT group_id, phase, protocol_type, doc FROM consumer_groups{where}"
            ):
                if doc != _NO_DOC:
                    out[str(gid)] = GroupRow(str(phase), None if ptype is None else str(ptype), str(doc))
            return sorted(out.items())

        return self._backend.run(work, write=False, what="list_groups")

    def list_groups_page(
        self, prefix: str, after: str | None, limit: int
    ) -> list[tuple[str, GroupRow | None]]:
        # The first ``limit`` ids of the union are among the first ``limit`` of each table, so each table
        # is read with the same bounds and LIMIT and the two merged here. Ids with the prefix sort from
        # the prefix on (binary order), so ``>= prefix`` bounds the scan from below; the substr test
        # keeps only the ids that start with it (LIKE would read ``_`` and ``%`` in ids as wildcards).
        coll = self._d.binary_collation
        where = f"group_id{coll} >= ? AND substr(group_id, 1, ?) = ?"
        params: list[str | int] = [prefix, len(prefix), prefix]
        if after is not None:
            where += f" AND group_id{coll} > ?"
            params.append(after)

        def work(tx: Tx) -> list[tuple[str, GroupRow | None]]:
            out: dict[str, GroupRow | None] = {
                str(r[0]): None
                for r in tx.all(
                    # GROUP BY, not DISTINCT: PostgreSQL's DISTINCT cannot ORDER BY the collated id.
                    f"SELECT group_id FROM group_offsets WHERE {where}"
                    f" GROUP BY group_id ORDER BY group_id{coll} LIMIT ?",
                    (*params, limit),
                )
            }
            for gid, phase, ptype, doc in tx.all(
                f"SELECT group_id, phase, protocol_type, doc FROM consumer_groups WHERE {where} AND doc <> ?"
                f" ORDER BY group_id{coll} LIMIT ?",
                (*params, _NO_DOC, limit),
            ):
                out[str(gid)] = GroupRow(str(phase), None if ptype is None else str(ptype), str(doc))
            return sorted(out.items())[:limit]

        return self._backend.run(work, write=False, what="list_groups_page")

    def commit_offsets(
        self,
        group: str,
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
            existing = lock_partitions(tx, self._d, keys, self._d.for_key_share)
            refused: dict[tuple[str, int], StrataError] = {
                key: missing_partition(tx, *key) for key in keys if key not in existing
            }
            self._upsert(tx, group, [latest[key] for key in keys if key in existing], now_ms)
            return refused

        return self._backend.run(work, write=True, what="commit_offsets")

    def expire_group_offsets(self, now_ms: int, retention_ms: int) -> int:
        cutoff = now_ms - retention_ms
        candidates = self._backend.run(
            lambda tx: [
                str(r[0])
                for r in tx.all(
                    "SELECT DISTINCT o.group_id FROM group_offsets o"
                    " LEFT JOIN consumer_groups g ON g.group_id = o.group_id"
                    " WHERE (g.group_id IS NULL AND o.committed_ms <= ?)"
                    " OR (g.phase = 'Empty' AND g.updated_ms <= ?) ORDER BY o.group_id",
                    (cutoff, cutoff),
                )
            ],
            write=False,
            what="expire_group_offsets",
        )

        def expire(group: str) -> int:
            def work(tx: Tx) -> int:
                row = self._hold(tx, group)
                if row is None:  # offsets only (a consumer without a group): each ages on its own
                    self._unhold(tx, group, row)
                    return tx.execute(
                        "DELETE FROM group_offsets WHERE group_id = ? AND committed_ms <= ?", (group, cutoff)
                    )
                since = tx.one("SELECT updated_ms FROM consumer_groups WHERE group_id = ?", (group,))
                if row.phase != "Empty" or since is None or int(since[0]) > cutoff:
                    return 0  # members came back meanwhile
                # Empty for the whole retention: the group goes with its offsets, as Kafka's goes Dead.
                tx.execute("DELETE FROM consumer_groups WHERE group_id = ?", (group,))
                return tx.execute("DELETE FROM group_offsets WHERE group_id = ?", (group,))

            return self._backend.run(work, write=True, what="expire_group_offsets")

        return sum(expire(group) for group in candidates)

    def delete_group(self, group: str, check: Callable[[GroupRow | None], None]) -> bool:
        def work(tx: Tx) -> bool:
            row = self._hold(tx, group)
            check(row)
            tx.execute("DELETE FROM consumer_groups WHERE group_id = ?", (group,))
            removed = tx.execute("DELETE FROM group_offsets WHERE group_id = ?", (group,))
            return row is not None or removed > 0

        return self._backend.run(work, write=True, what="delete_group")

    def delete_group_offsets(
        self, group: str, check: Callable[[GroupRow | None], None], partitions: Sequence[tuple[str, int]]
    ) -> None:
        def work(tx: Tx) -> None:
            row = self._hold(tx, group)
            check(row)
            self._unhold(tx, group, row)
            for topic, partition in sorted(set(partitions)):
                tx.execute(
                    "DELETE FROM group_offsets WHERE group_id = ? AND topic = ? AND partition_id = ?",
                    (group, topic, partition),
                )

        self._backend.run(work, write=True, what="delete_group_offsets")
