"""Topics and their partitions: ``TopicReader`` and the topic half of ``AdminStore``."""

from __future__ import annotations

import json
from collections.abc import Mapping

from storage.errors import InvalidPartitionCount, TopicExists, UnknownTopic
from storage.metadata.rows import PartitionState, TopicInfo
from storage.metadata.sql.core import (
    Row,
    SqlBase,
    Tx,
    configs_from_json,
    mark_obsolete_if_empty,
    missing_partition,
)


class TopicQueries(SqlBase):
    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str], now_ms: int) -> TopicInfo:
        if partitions <= 0:
            raise ValueError(f"a topic needs at least one partition, got {partitions}")
        stored = dict(configs)

        def work(tx: Tx) -> TopicInfo:
            # ON CONFLICT DO NOTHING rather than catching a unique violation: on PostgreSQL a failed
            # statement poisons the transaction, and a concurrent creator's row is waited for, not missed.
            inserted = tx.execute(
                "INSERT INTO topics (name, partitions, configs, created_ms) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (name) DO NOTHING",
                (name, partitions, json.dumps(stored, sort_keys=True), now_ms),
            )
            if inserted == 0:
                raise TopicExists(f"Topic '{name}' already exists.")  # Kafka's wording, which its tools print
            tx.executemany(
                "INSERT INTO partitions (topic, partition_id, next_offset, log_start_offset)"
                " VALUES (?, ?, 0, 0)",
                [(name, p) for p in range(partitions)],
            )
            return TopicInfo(name, partitions, stored, now_ms)

        return self._backend.run(work, write=True, what="create_topic")

    def get_topic(self, name: str) -> TopicInfo:
        return self._backend.run(lambda tx: self._get_topic(tx, name, ""), write=False, what="get_topic")

    def _get_topic(self, tx: Tx, name: str, lock: str) -> TopicInfo:
        row = tx.one(
            f"SELECT name, partitions, configs, created_ms FROM topics WHERE name = ?{lock}", (name,)
        )
        if row is None:
            raise UnknownTopic(f"unknown topic {name!r}")
        return TopicInfo(str(row[0]), int(row[1]), configs_from_json(row[2]), int(row[3]))

    def list_topics(self) -> list[str]:
        rows = self._backend.run(
            lambda tx: tx.all(f"SELECT name FROM topics ORDER BY name{self._d.binary_collation}"),
            write=False,
            what="list_topics",
        )
        return [str(r[0]) for r in rows]

    def update_topic_configs(self, name: str, changes: Mapping[str, str | None]) -> TopicInfo:
        changes = dict(changes)

        def work(tx: Tx) -> TopicInfo:
            # Read-modify-write under the topic's row lock: two concurrent updates of different keys
            # both survive instead of the later one overwriting the earlier.
            topic = self._get_topic(tx, name, self._d.for_update)
            merged = dict(topic.configs)
            for key, value in changes.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            tx.execute(
                "UPDATE topics SET configs = ? WHERE name = ?", (json.dumps(merged, sort_keys=True), name)
            )
            return TopicInfo(topic.name, topic.partitions, merged, topic.created_ms)

        return self._backend.run(work, write=True, what="update_topic_configs")

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        def work(tx: Tx) -> TopicInfo:
            # Under the topic's row lock, so two concurrent increases cannot both insert the same rows.
            topic = self._get_topic(tx, name, self._d.for_update)
            if count <= topic.partitions:
                raise InvalidPartitionCount(
                    # Kafka's wording, which its tools print.
                    f"The topic {name} currently has {topic.partitions} partition(s); {count} would not be an"
                    " increase."
                )
            tx.execute("UPDATE topics SET partitions = ? WHERE name = ?", (count, name))
            tx.executemany(
                "INSERT INTO partitions (topic, partition_id, next_offset, log_start_offset)"
                " VALUES (?, ?, 0, 0)",
                [(name, p) for p in range(topic.partitions, count)],
            )
            return TopicInfo(topic.name, count, topic.configs, topic.created_ms)

        return self._backend.run(work, write=True, what="add_partitions")

    def delete_topic(self, name: str, now_ms: int) -> None:
        """Raises UnknownTopic. Its files that keep no live chunk become obsolete (GC after grace)."""

        def work(tx: Tx) -> None:
            locked = tx.all(
                "SELECT partition_id FROM partitions WHERE topic = ?"
                f" ORDER BY partition_id{self._d.for_update}",
                (name,),
            )
            if not locked:
                raise UnknownTopic(f"unknown topic {name!r}")
            # Lock the files before deleting the chunks, so that whoever else removes chunk rows from the
            # same files (compaction) decides on obsolescence after us, seeing our deletes, and vice versa.
            file_ids = [
                int(r[0])
                for r in tx.all(
                    "SELECT file_id FROM files WHERE file_id IN (SELECT file_id FROM chunks WHERE topic = ?)"
                    f" ORDER BY file_id{self._d.for_no_key_update}",
                    (name,),
                )
            ]
            tx.execute("DELETE FROM chunks WHERE topic = ?", (name,))
            mark_obsolete_if_empty(tx, file_ids, now_ms)
            # A topic created again under this name starts with no producer or transaction state, as a new
            # Kafka log does. An open transaction loses the partition: its EndTxn skips it.
            for table in ("txn_partitions", "producer_state", "txn_markers", "aborted_txns", "txn_offsets"):
                tx.execute(f"DELETE FROM {table} WHERE topic = ?", (name,))
            tx.execute("DELETE FROM group_offsets WHERE topic = ?", (name,))
            # Its dirty-ratio history goes with it. Its jobs stay: they are the record of work that was done.
            tx.execute("DELETE FROM dirty_samples WHERE topic = ?", (name,))
            tx.execute("DELETE FROM partitions WHERE topic = ?", (name,))
            tx.execute("DELETE FROM topics WHERE name = ?", (name,))

        self._backend.run(work, write=True, what="delete_topic")

    # --- partitions ---------------------------------------------------------------------------------------
    def partition_states(self, topic: str) -> list[PartitionState]:
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT p.partition_id, p.log_start_offset, p.next_offset, {_TXN_COLUMNS}"
                " FROM partitions p WHERE p.topic = ? ORDER BY p.partition_id",
                (topic,),
            ),
            write=False,
            what="partition_states",
        )
        # A topic has at least one partition row for as long as it exists (created and deleted together).
        if not rows:
            raise UnknownTopic(f"unknown topic {topic!r}")
        return [_state(topic, int(r[0]), r[1:]) for r in rows]

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        def work(tx: Tx) -> PartitionState:
            row = tx.one(
                f"SELECT p.log_start_offset, p.next_offset, {_TXN_COLUMNS} FROM partitions p"
                " WHERE p.topic = ? AND p.partition_id = ?",
                (topic, partition),
            )
            if row is None:
                raise missing_partition(tx, topic, partition)
            return _state(topic, partition, row)

        return self._backend.run(work, write=False, what="partition_state")


# The partition's oldest open transaction and newest marker, read in the same statement as its offsets so
# that the LSO and the high watermark come from one snapshot (both primary-key lookups).
_TXN_COLUMNS = (
    "(SELECT MIN(t.first_offset) FROM txn_partitions t"
    " WHERE t.topic = p.topic AND t.partition_id = p.partition_id),"
    " (SELECT MAX(m.marker_offset) FROM txn_markers m"
    " WHERE m.topic = p.topic AND m.partition_id = p.partition_id)"
)


def _state(topic: str, partition: int, r: Row) -> PartitionState:
    """A PartitionState from (log_start_offset, next_offset, *_TXN_COLUMNS)."""
    return PartitionState(
        topic,
        partition,
        int(r[0]),
        int(r[1]),
        None if r[2] is None else int(r[2]),
        -1 if r[3] is None else int(r[3]),
    )
