"""Compaction jobs (``CompactionCatalog``): created with their file claims, leased, heartbeats, finished.

Every change of a job's state goes through ``create_job``, ``lease_job`` and ``finish`` (called by
``finish_job`` and ``commit_compaction``), which keep the copy of the state in the job's ``job_topics``
rows equal to the ``jobs`` row's in the same transaction.

Lost races raise (see ``storage.metadata.base``): ``ClaimRefused`` from ``create_job``, ``LeaseLost`` from
``heartbeat_job``, ``CommitConflict`` from ``finish_job``; each writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from storage.errors import ClaimRefused, CommitConflict, LeaseLost, StrataError, UnknownJob
from storage.metadata.rows import (
    FILE_LIVE,
    JOB_ACTIVE_STATES,
    JOB_FINAL_STATES,
    JOB_LEASED,
    JOB_PENDING,
    Job,
    JobReport,
)
from storage.metadata.sql.core import (
    JOB_COLUMNS,
    Dialect,
    SqlBase,
    Tx,
    batches,
    in_list,
    job_row,
    partitions_to_json,
    spec_to_json,
    stats_to_json,
    values,
)


class JobQueries(SqlBase):
    def create_job(self, kind: str, spec: Mapping[str, object], file_ids: Sequence[int], now_ms: int) -> Job:
        """Beyond the interface: a job may claim no file at all (e.g. retention work)."""
        if not kind:
            raise ValueError("a job needs a kind")
        spec_json = spec_to_json(spec)
        ids = sorted(set(file_ids))

        def work(tx: Tx) -> Job:
            # KEY SHARE keeps the rows from being deleted (forget_files) until we commit, without blocking
            # the flushes, compactions and retention that mark files obsolete (they take NO KEY UPDATE).
            live = 0
            for batch in batches(ids):
                live += len(
                    tx.all(
                        f"SELECT file_id FROM files WHERE state = ? AND file_id IN {in_list(len(batch))}"
                        f" ORDER BY file_id{self._d.for_key_share}",
                        (FILE_LIVE, *batch),
                    )
                )
            if live != len(ids):
                raise ClaimRefused(f"{len(ids) - live} of the job's {len(ids)} file(s) are no longer live")
            # What the job touches: chunk rows are only ever added to new files, so the files it claims can
            # only lose chunks from here on, and this is a superset of what it will rewrite.
            partitions: set[tuple[str, int]] = set()
            for batch in batches(ids):
                partitions.update(
                    (str(r[0]), int(r[1]))
                    for r in tx.all(
                        "SELECT DISTINCT topic, partition_id FROM chunks"
                        f" WHERE file_id IN {in_list(len(batch))}",
                        batch,
                    )
                )
            row = tx.one(
                "INSERT INTO jobs (kind, spec, state, attempts, created_ms, updated_ms, partitions)"
                f" VALUES (?, ?, ?, 0, ?, ?, ?) RETURNING {JOB_COLUMNS}",
                (kind, spec_json, JOB_PENDING, now_ms, now_ms, partitions_to_json(sorted(partitions))),
            )
            if row is None:  # INSERT ... RETURNING without ON CONFLICT always returns its row
                raise StrataError("inserting a job returned no row")
            job_id = int(row[0])
            # The primary key on file_id is the claim. On PostgreSQL a concurrent uncommitted claim of the
            # same file is waited for: if it commits, ours is not inserted (and not returned).
            for batch in batches(ids):
                claimed = tx.all(
                    f"INSERT INTO job_files (file_id, job_id) VALUES {values(len(batch), 2)}"
                    " ON CONFLICT (file_id) DO NOTHING RETURNING file_id",
                    [v for file_id in batch for v in (file_id, job_id)],
                )
                if len(claimed) != len(batch):
                    raise ClaimRefused(
                        f"{len(batch) - len(claimed)} of the job's file(s) are claimed by another active job"
                    )
            topics = sorted({topic for topic, _ in partitions})
            if topics:
                tx.executemany(
                    "INSERT INTO job_topics (job_id, topic, state) VALUES (?, ?, ?)",
                    [(job_id, topic, JOB_PENDING) for topic in topics],
                )
            return job_row(row)

        return self._backend.run(work, write=True, what="create_job")

    def lease_job(self, owner: str, now_ms: int, lease_ms: int) -> Job | None:
        if lease_ms <= 0:
            raise ValueError(f"a lease must last a positive time, got {lease_ms} ms")
        if not owner:
            raise ValueError("a lease needs an owner")

        def work(tx: Tx) -> Job | None:
            # SKIP LOCKED: a worker racing us for the same row moves on to the next job instead of
            # waiting for ours and then finding it leased. (SQLite: BEGIN IMMEDIATE serialises us.)
            row = tx.one(
                "SELECT job_id, state FROM jobs WHERE state = ? OR (state = ? AND lease_expires_ms < ?)"
                f" ORDER BY created_ms, job_id LIMIT 1{self._d.for_update}{self._d.skip_locked}",
                (JOB_PENDING, JOB_LEASED, now_ms),
            )
            if row is None:
                return None
            job_id = int(row[0])
            leased = tx.one(
                "UPDATE jobs SET state = ?, lease_owner = ?, lease_expires_ms = ?, attempts = attempts + 1,"
                f" updated_ms = ? WHERE job_id = ? RETURNING {JOB_COLUMNS}",
                (JOB_LEASED, owner, now_ms + lease_ms, now_ms, job_id),
            )
            if row[1] == JOB_PENDING:  # a lease taken over stays leased: its copies need no change
                tx.execute("UPDATE job_topics SET state = ? WHERE job_id = ?", (JOB_LEASED, job_id))
            return None if leased is None else job_row(leased)

        return self._backend.run(work, write=True, what="lease_job")

    def heartbeat_job(self, job_id: int, owner: str, now_ms: int, lease_ms: int) -> None:
        if lease_ms <= 0:
            raise ValueError(f"a lease must last a positive time, got {lease_ms} ms")
        expires = now_ms + lease_ms
        changed = self._backend.run(
            lambda tx: tx.execute(
                "UPDATE jobs SET lease_expires_ms ="
                " CASE WHEN lease_expires_ms > ? THEN lease_expires_ms ELSE ? END, updated_ms = ?"
                " WHERE job_id = ? AND state = ? AND lease_owner = ?",
                (expires, expires, now_ms, job_id, JOB_LEASED, owner),
            ),
            write=True,
            what="heartbeat_job",
        )
        if changed != 1:  # the UPDATE changed nothing, so raising after its commit writes nothing either
            raise LeaseLost(f"lease of {owner!r} on job {job_id} was lost")

    def finish_job(
        self, job_id: int, owner: str | None, state: str, now_ms: int, report: JobReport | None = None
    ) -> None:
        if state not in JOB_FINAL_STATES:
            raise ValueError(f"a job finishes as one of {JOB_FINAL_STATES}, not {state!r}")

        def work(tx: Tx) -> None:
            current, lease_owner = lock_job(tx, self._d, job_id)
            if owner is not None and lease_owner == owner and current == state:
                return  # a retry of a finish that committed
            if owner is not None and (current != JOB_LEASED or lease_owner != owner):
                raise CommitConflict(
                    f"job {job_id} is {current} (lease owner {lease_owner!r}); {owner!r} cannot finish it"
                )
            finish(tx, job_id, state, now_ms, report)

        self._backend.run(work, write=True, what="finish_job")

    def record_attempt(self, job_id: int, owner: str, report: JobReport, now_ms: int) -> bool:
        stats = stats_to_json(report.stats)
        changed = self._backend.run(
            lambda tx: tx.execute(
                "UPDATE jobs SET stats = ?, updated_ms = ?"
                " WHERE job_id = ? AND state = ? AND lease_owner = ?",
                (stats, now_ms, job_id, JOB_LEASED, owner),
            ),
            write=True,
            what="record_attempt",
        )
        return changed == 1

    def active_jobs(self) -> list[Job]:
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE state IN (?, ?) ORDER BY job_id", JOB_ACTIVE_STATES
            ),
            write=False,
            what="active_jobs",
        )
        return [job_row(r) for r in rows]

    def get_job(self, job_id: int) -> Job:
        row = self._backend.run(
            lambda tx: tx.one(f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)),
            write=False,
            what="get_job",
        )
        if row is None:
            raise UnknownJob(f"no job {job_id}")
        return job_row(row)


def lock_job(tx: Tx, d: Dialect, job_id: int) -> tuple[str, str | None]:
    """Lock the job's row (first in the global lock order); returns its state and lease owner."""
    row = tx.one(f"SELECT state, lease_owner FROM jobs WHERE job_id = ?{d.for_update}", (job_id,))
    if row is None:
        raise UnknownJob(f"no job {job_id}")
    return str(row[0]), None if row[1] is None else str(row[1])


def finish(tx: Tx, job_id: int, state: str, now_ms: int, report: JobReport | None = None) -> None:
    """Set a final state, with the attempt's report if any, and release the job's file claims (the job's
    row is locked by the caller)."""
    stats = None if report is None else stats_to_json(report.stats)
    tx.execute(
        "UPDATE jobs SET state = ?, updated_ms = ?, stats = COALESCE(?, stats) WHERE job_id = ?",
        (state, now_ms, stats, job_id),
    )
    tx.execute("UPDATE job_topics SET state = ?, finished_ms = ? WHERE job_id = ?", (state, now_ms, job_id))
    if report is not None and report.topics:
        # A topic the job was not created with cannot appear (its chunks came from the claimed files); an
        # UPDATE that matches no row would just be skipped.
        tx.executemany(
            "UPDATE job_topics SET records_in = ?, records_out = ?, bytes_in = ?, bytes_out = ?"
            " WHERE job_id = ? AND topic = ?",
            [
                (v.records_in, v.records_out, v.bytes_in, v.bytes_out, job_id, topic)
                for topic, v in sorted(report.topics.items())
            ],
        )
    tx.execute("DELETE FROM job_files WHERE job_id = ?", (job_id,))
