"""Read-only queries over chunks and files: the fetch path's ``find_chunks`` (``LogStore``) and what the
planner and worker read (``CompactionCatalog``)."""

from __future__ import annotations

from collections.abc import Sequence

from storage.errors import UnknownTopic
from storage.metadata.rows import FILE_LIVE, ChunkRow, FileChunk, FileRow, PartitionStats
from storage.metadata.sql.core import (
    CHUNK_COLUMNS,
    FILE_CHUNK_COLUMNS,
    FILE_COLUMNS,
    Row,
    SqlBase,
    Tx,
    batches,
    chunk_row,
    file_chunk,
    file_row,
    in_list,
    values,
)


class ReadQueries(SqlBase):
    def find_chunks(self, topic: str, partition: int, offset: int, limit: int) -> list[ChunkRow]:
        """Chunk rows ordered by base_offset; an unknown topic or partition simply has none."""
        if limit <= 0:
            return []
        # ORDER BY last_offset is ORDER BY base_offset (a partition's chunk ranges never overlap) and lets
        # the index (topic, partition_id, last_offset) serve both the filter and the order with no sort.
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN files f ON f.file_id = c.file_id"
                " WHERE c.topic = ? AND c.partition_id = ? AND c.last_offset >= ?"
                " ORDER BY c.last_offset LIMIT ?",
                (topic, partition, offset, limit),
            ),
            write=False,
            what="find_chunks",
        )
        return [chunk_row(topic, partition, r) for r in rows]

    def partition_stats(self, topic: str | None = None) -> list[PartitionStats]:
        where, params = ("WHERE p.topic = ?", (topic,)) if topic is not None else ("", ())
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {PARTITION_STATS_COLUMNS} {PARTITION_STATS_FROM} {where} {PARTITION_STATS_GROUP}"
                f" ORDER BY p.topic{self._d.binary_collation}, p.partition_id",
                params,
            ),
            write=False,
            what="partition_stats",
        )
        if topic is not None and not rows:
            raise UnknownTopic(f"unknown topic {topic!r}")
        return [partition_stats_row(r) for r in rows]

    def live_files(self, level: int | None = None) -> list[FileRow]:
        where, params = ("AND f.level = ?", (FILE_LIVE, level)) if level is not None else ("", (FILE_LIVE,))
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {FILE_COLUMNS} FROM files f WHERE f.state = ? {where}"
                " ORDER BY f.created_ms, f.file_id",
                params,
            ),
            write=False,
            what="live_files",
        )
        return [file_row(r) for r in rows]

    def file_chunks(self, file_ids: Sequence[int]) -> list[FileChunk]:
        ids = sorted(set(file_ids))

        def work(tx: Tx) -> list[FileChunk]:
            found: list[FileChunk] = []
            # Batches in file_id order, each ordered by (file_id, position): the concatenation is ordered.
            for batch in batches(ids):
                found.extend(
                    file_chunk(r)
                    for r in tx.all(
                        f"SELECT {FILE_CHUNK_COLUMNS} FROM chunks c JOIN files f ON f.file_id = c.file_id"
                        f" WHERE c.file_id IN {in_list(len(batch))}"
                        " ORDER BY c.file_id, c.position",
                        batch,
                    )
                )
            return found

        return self._backend.run(work, write=False, what="file_chunks")

    def files_of_partitions(self, partitions: Sequence[tuple[str, int]]) -> list[FileRow]:
        keys = sorted(set(partitions))

        def work(tx: Tx) -> list[FileRow]:
            found: dict[int, FileRow] = {}
            for batch in batches(keys):
                for r in tx.all(
                    f"SELECT {FILE_COLUMNS} FROM files f WHERE f.state = ? AND f.file_id IN"
                    " (SELECT c.file_id FROM chunks c"
                    f" WHERE (c.topic, c.partition_id) IN (VALUES {values(len(batch), 2)}))",
                    (FILE_LIVE, *(v for key in batch for v in key)),
                ):
                    row = file_row(r)
                    found[row.file_id] = row
            return sorted(found.values(), key=lambda f: (f.created_ms, f.file_id))

        return self._backend.run(work, write=False, what="files_of_partitions")

    def partition_chunks(self, topic: str, partition: int) -> list[FileChunk]:
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {FILE_CHUNK_COLUMNS} FROM chunks c JOIN files f ON f.file_id = c.file_id"
                " WHERE c.topic = ? AND c.partition_id = ? ORDER BY c.last_offset",
                (topic, partition),
            ),
            write=False,
            what="partition_chunks",
        )
        return [file_chunk(r) for r in rows]

    def level_stats(self, topic: str) -> dict[int, tuple[int, int]]:
        def work(tx: Tx) -> dict[int, tuple[int, int]]:
            if tx.one("SELECT 1 FROM topics WHERE name = ?", (topic,)) is None:
                raise UnknownTopic(f"unknown topic {topic!r}")
            # A chunk row's file is always live, so no state filter is needed.
            rows = tx.all(
                "SELECT f.level, COUNT(DISTINCT f.file_id), SUM(c.length)"
                " FROM chunks c JOIN files f ON f.file_id = c.file_id WHERE c.topic = ?"
                " GROUP BY f.level ORDER BY f.level",
                (topic,),
            )
            return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

        return self._backend.run(work, write=False, what="level_stats")


# One grouped scan over partitions p and their chunks c: a partition without chunks still has its row
# (LEFT JOIN, zero sums). ``partition_stats_row`` reads these columns, in this order; a query may add its own
# aggregates after them.
PARTITION_STATS_COLUMNS = (
    "p.topic, p.partition_id, p.log_start_offset, p.next_offset, p.cleaned_offset,"
    " p.last_compaction_ms, COALESCE(SUM(c.length), 0),"
    " COALESCE(SUM(CASE WHEN c.last_offset >= p.cleaned_offset THEN c.length ELSE 0 END), 0),"
    " COUNT(c.chunk_id),"
    " MIN(CASE WHEN c.last_offset >= p.cleaned_offset THEN c.max_timestamp END),"
    " COALESCE(SUM(CASE WHEN c.last_offset >= p.cleaned_offset THEN c.record_count ELSE 0 END), 0),"
    " MIN(CASE WHEN c.last_offset >= p.cleaned_offset THEN c.min_timestamp END)"
)
PARTITION_STATS_FROM = (
    "FROM partitions p LEFT JOIN chunks c ON c.topic = p.topic AND c.partition_id = p.partition_id"
)
PARTITION_STATS_GROUP = (
    "GROUP BY p.topic, p.partition_id, p.log_start_offset, p.next_offset, p.cleaned_offset,"
    " p.last_compaction_ms"
)


def partition_stats_row(r: Row) -> PartitionStats:
    return PartitionStats(
        topic=str(r[0]),
        partition=int(r[1]),
        log_start_offset=int(r[2]),
        high_watermark=int(r[3]),
        cleaned_offset=int(r[4]),
        last_compaction_ms=None if r[5] is None else int(r[5]),
        live_bytes=int(r[6]),
        dirty_bytes=int(r[7]),
        chunk_count=int(r[8]),
        oldest_dirty_timestamp=None if r[9] is None else int(r[9]),
        dirty_records=int(r[10]),
        earliest_dirty_timestamp=None if r[11] is None else int(r[11]),
    )
