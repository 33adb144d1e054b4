"""What the HTTP API shows of compaction and sizes (``StatsReader``), and the dirty-ratio samples that the
compaction rounds record (``CompactionCatalog.record_dirty_samples``).

Every read is bounded by its caller's page, whatever the number of jobs, topics or partitions:
- ``list_jobs`` is one index range scan, newest first: the ``jobs`` primary key, ``jobs_by_state_id``
  (state, job_id), or through ``job_topics`` with ``job_topics_by_topic`` (topic, job_id) and
  ``job_topics_by_state`` (topic, state, job_id);
- ``job_removals`` scans ``job_topics_by_finish`` (topic, state, finished_ms, job_id) from ``since_ms``;
- ``partition_details`` reads partitions (after, after + limit] by primary key (partition ids are dense:
  0 .. partitions - 1), and their chunks by ``chunks_by_offset``;
- ``topic_summaries`` aggregates only the named topics' partitions and chunks.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.errors import UnknownTopic
from storage.metadata.rows import JOB_DONE, DirtySample, Job, JobRemoval, PartitionDetail, TopicSummary
from storage.metadata.sql.core import (
    SqlBase,
    Tx,
    batches,
    configs_from_json,
    in_list,
    job_columns,
    job_row,
    values,
)
from storage.metadata.sql.reads import (
    PARTITION_STATS_COLUMNS,
    PARTITION_STATS_FROM,
    PARTITION_STATS_GROUP,
    partition_stats_row,
)

MAX_ID = 2**63 - 1  # job ids are BIGINT: a larger ``before`` means no bound at all
MAX_PARTITION = 2**31 - 1
SUMMARY_BATCH = 1000  # names per statement of topic_summaries (well under both bound-parameter limits)

_JOB_J = job_columns("j.")


class StatsQueries(SqlBase):
    # --- jobs ---------------------------------------------------------------------------------------------
    def list_jobs(
        self, state: str | None = None, topic: str | None = None, before: int | None = None, limit: int = 50
    ) -> list[Job]:
        if limit <= 0:
            return []
        bound = MAX_ID if before is None else min(before, MAX_ID)
        params: list[str | int] = []
        if topic is None:
            # ORDER BY job_id DESC walks the primary key (or jobs_by_state_id) backwards from ``bound``.
            where = "j.job_id < ?"
            if state is not None:
                where = "j.state = ? AND " + where
                params.append(state)
            sql = f"SELECT {_JOB_J} FROM jobs j WHERE {where} ORDER BY j.job_id DESC LIMIT ?"
        else:
            where = "t.topic = ? AND t.job_id < ?"
            params.append(topic)
            if state is not None:
                where = "t.topic = ? AND t.state = ? AND t.job_id < ?"
                params.append(state)
            sql = (
                f"SELECT {_JOB_J} FROM job_topics t JOIN jobs j ON j.job_id = t.job_id"
                f" WHERE {where} ORDER BY t.job_id DESC LIMIT ?"
            )
        rows = self._backend.run(
            lambda tx: tx.all(sql, (*params, bound, limit)), write=False, what="list_jobs"
        )
        return [job_row(r) for r in rows]

    def job_removals(self, topic: str, since_ms: int, limit: int) -> list[JobRemoval]:
        if limit <= 0:
            return []
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT job_id, finished_ms, records_in - records_out, bytes_in - bytes_out FROM job_topics"
                " WHERE topic = ? AND state = ? AND finished_ms >= ?"
                " AND (records_in > records_out OR bytes_in > bytes_out)"
                " ORDER BY finished_ms DESC, job_id DESC LIMIT ?",
                (topic, JOB_DONE, since_ms, limit),
            ),
            write=False,
            what="job_removals",
        )
        return [JobRemoval(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in reversed(rows)]

    # --- dirty-ratio samples ------------------------------------------------------------------------------
    def dirty_samples(self, topic: str, since_ms: int) -> list[DirtySample]:
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT ts_ms, dirty_bytes, live_bytes FROM dirty_samples WHERE topic = ? AND ts_ms >= ?"
                " ORDER BY ts_ms",
                (topic, since_ms),
            ),
            write=False,
            what="dirty_samples",
        )
        return [DirtySample(topic, int(r[0]), int(r[1]), int(r[2])) for r in rows]

    def record_dirty_samples(
        self, samples: Sequence[DirtySample], now_ms: int, min_interval_ms: int, keep_ms: int
    ) -> int:
        latest = {s.topic: s for s in samples}  # one per topic: the last given
        topics = sorted(latest)

        def work(tx: Tx) -> int:
            tx.execute("DELETE FROM dirty_samples WHERE ts_ms < ?", (now_ms - keep_ms,))
            recent: set[str] = set()
            for batch in batches(topics):
                recent.update(
                    str(r[0])
                    for r in tx.all(
                        f"SELECT DISTINCT topic FROM dirty_samples WHERE topic IN {in_list(len(batch))}"
                        " AND ts_ms > ?",
                        (*batch, now_ms - min_interval_ms),
                    )
                )
            due = [latest[t] for t in topics if t not in recent]
            stored = 0
            for rows in batches(due):
                stored += len(
                    tx.all(
                        "INSERT INTO dirty_samples (topic, ts_ms, dirty_bytes, live_bytes)"
                        f" VALUES {values(len(rows), 4)}"
                        " ON CONFLICT (topic, ts_ms) DO NOTHING RETURNING topic",
                        [v for s in rows for v in (s.topic, s.ts_ms, s.dirty_bytes, s.live_bytes)],
                    )
                )
            return stored

        return self._backend.run(work, write=True, what="record_dirty_samples")

    # --- sizes --------------------------------------------------------------------------------------------
    def partition_details(self, topic: str, after: int, limit: int) -> list[PartitionDetail]:
        low = max(after, -1)
        high = min(low + max(limit, 0), MAX_PARTITION)  # the page is (low, high]

        def work(tx: Tx) -> list[PartitionDetail]:
            if tx.one("SELECT 1 FROM topics WHERE name = ?", (topic,)) is None:
                raise UnknownTopic(f"unknown topic {topic!r}")
            if high <= low:
                return []
            rows = tx.all(
                f"SELECT {PARTITION_STATS_COLUMNS}, COALESCE(SUM(c.record_count), 0) {PARTITION_STATS_FROM}"
                f" WHERE p.topic = ? AND p.partition_id > ? AND p.partition_id <= ? {PARTITION_STATS_GROUP}"
                " ORDER BY p.partition_id",
                (topic, low, high),
            )
            # A chunk row's file is always live, so no state filter is needed (as in level_stats).
            levels: dict[int, dict[int, tuple[int, int]]] = {}
            for partition, level, files, nbytes in tx.all(
                "SELECT c.partition_id, f.level, COUNT(DISTINCT c.file_id), SUM(c.length)"
                " FROM chunks c JOIN files f ON f.file_id = c.file_id"
                " WHERE c.topic = ? AND c.partition_id > ? AND c.partition_id <= ?"
                " GROUP BY c.partition_id, f.level",
                (topic, low, high),
            ):
                levels.setdefault(int(partition), {})[int(level)] = (int(files), int(nbytes))
            return [
                PartitionDetail(
                    stats=partition_stats_row(r),
                    records=int(r[12]),
                    levels=dict(sorted(levels.get(int(r[1]), {}).items())),
                )
                for r in rows
            ]

        return self._backend.run(work, write=False, what="partition_details")

    def topic_summaries(self, names: Sequence[str]) -> list[TopicSummary]:
        wanted = sorted(set(names))  # code-point order, as the binary collation sorts each batch

        def work(tx: Tx) -> list[TopicSummary]:
            found: list[TopicSummary] = []
            for batch in batches(wanted, SUMMARY_BATCH):
                found.extend(
                    TopicSummary(
                        name=str(r[0]),
                        partitions=int(r[1]),
                        configs=configs_from_json(r[2]),
                        created_ms=int(r[3]),
                        records=int(r[4]),
                        live_bytes=int(r[5]),
                        dirty_bytes=int(r[6]),
                    )
                    for r in tx.all(
                        "SELECT t.name, t.partitions, t.configs, t.created_ms,"
                        " COALESCE(SUM(c.record_count), 0), COALESCE(SUM(c.length), 0),"
                        " COALESCE(SUM(CASE WHEN c.last_offset >= p.cleaned_offset THEN c.length ELSE 0 END),"
                        " 0)"
                        " FROM topics t JOIN partitions p ON p.topic = t.name"
                        " LEFT JOIN chunks c ON c.topic = p.topic AND c.partition_id = p.partition_id"
                        f" WHERE t.name IN {in_list(len(batch))}"
                        " GROUP BY t.name, t.partitions, t.configs, t.created_ms"
                        f" ORDER BY t.name{self._d.binary_collation}",
                        batch,
                    )
                )
            return found

        return self._backend.run(work, write=False, what="topic_summaries")
