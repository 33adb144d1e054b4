"""The compaction swap and retention: the two writes of ``CompactionCatalog`` that delete chunk rows."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from storage.errors import CommitConflict, StrataError
from storage.metadata.rows import (
    FILE_LIVE,
    FILE_OBSOLETE,
    JOB_DONE,
    JOB_LEASED,
    CleanedUpTo,
    CompactionOutput,
    JobReport,
)
from storage.metadata.sql.core import (
    ChunkValues,
    SqlBase,
    Tx,
    batches,
    in_list,
    insert_chunks,
    lock_partitions,
    mark_obsolete_if_empty,
    missing_partition,
    values,
)
from storage.metadata.sql.jobs import finish, lock_job

# (chunk_id, topic, partition, base_offset, last_offset, file_id) of an input chunk row.
InputChunk = tuple[int, str, int, int, int, int]
Hulls = dict[tuple[str, int], tuple[int, int]]  # (topic, partition) -> (lowest base, highest last offset)


class CompactionQueries(SqlBase):
    def commit_compaction(
        self,
        job_id: int,
        owner: str,
        input_chunk_ids: Sequence[int],
        outputs: Sequence[CompactionOutput],
        cleaned: Sequence[CleanedUpTo],
        now_ms: int,
        report: JobReport | None = None,
    ) -> None:
        """Beyond the interface's contract:
        - An output file without chunks is inserted as obsolete (GC deletes its object after the grace
          period), like a flush file whose chunks were all dropped.
        - A cleaned offset for a partition that no longer exists is a CommitConflict (its topic was
          deleted while the job ran).
        - Replaying a commit that succeeded (the caller retried after an ``Unavailable`` that hid the
          COMMIT) writes nothing and returns: the job is done, was leased by ``owner``, and every output
          object key has a files row. Keys are generated per upload, so that means this very commit.
        - Raises UnknownJob for a job id that does not exist.
        """
        inputs = sorted(set(input_chunk_ids))
        outputs = tuple(outputs)
        cleaned = tuple(cleaned)
        _validate_compaction(outputs, cleaned)
        # Where the inputs are, read before the write transaction: a job's inputs run to thousands of
        # chunk rows (an L0 merge of many small low-latency flushes), and on SQLite every moment of the
        # write transaction holds the database's one write lock, which the agents' flush commits wait for.
        # Chunk rows never change, they only disappear, so this read is good for everything but existence,
        # which the swap's DELETE checks under the locks.
        found = self._backend.run(
            lambda tx: _input_chunks(tx, inputs), write=False, what="commit_compaction inputs"
        )
        self._backend.run(
            lambda tx: self._commit_compaction(
                tx, job_id, owner, inputs, found, outputs, cleaned, now_ms, report
            ),
            write=True,
            what="commit_compaction",
        )

    def _commit_compaction(
        self,
        tx: Tx,
        job_id: int,
        owner: str,
        inputs: list[int],
        found: list[InputChunk],
        outputs: tuple[CompactionOutput, ...],
        cleaned: tuple[CleanedUpTo, ...],
        now_ms: int,
        report: JobReport | None,
    ) -> None:
        # (a) The lease, under the job's row lock: heartbeats, finishes and other commits of this job wait;
        # lease_job skips it.
        state, lease_owner = lock_job(tx, self._d, job_id)
        if not (state == JOB_LEASED and lease_owner == owner):
            if state == JOB_DONE and lease_owner == owner and _outputs_recorded(tx, outputs):
                return
            raise CommitConflict(
                f"job {job_id} is {state} (lease owner {lease_owner!r}), not leased by {owner!r}"
            )

        # (b) Where the inputs are (read before this transaction).
        if len(found) != len(inputs):
            raise CommitConflict(f"{len(inputs) - len(found)} input chunk(s) of job {job_id} are gone")
        hulls = _hulls(found)
        _check_within_hulls(outputs, hulls)

        # (c) Locks in the global order: partitions, then the input files.
        file_ids = sorted({file_id for *_, file_id in found})
        self._lock_and_check(tx, hulls, file_ids, cleaned)

        # (d) The swap. Every input must still exist: the DELETE's count says so under the locks (an input
        # removed meanwhile, by retention say, rolls the whole swap back).
        deleted = sum(
            tx.execute(f"DELETE FROM chunks WHERE chunk_id IN {in_list(len(batch))}", batch)
            for batch in batches(inputs)
        )
        if deleted != len(inputs):
            raise CommitConflict(f"input chunks of job {job_id} were removed while it committed")
        _check_no_overlap(tx, outputs)
        for output in outputs:
            _insert_output(tx, output, now_ms)
        tx.executemany(
            "UPDATE partitions SET cleaned_offset ="
            " CASE WHEN cleaned_offset > ? THEN cleaned_offset ELSE ? END, last_compaction_ms = ?"
            " WHERE topic = ? AND partition_id = ?",
            [
                (up_to.cleaned_offset, up_to.cleaned_offset, now_ms, up_to.topic, up_to.partition)
                for up_to in sorted(cleaned, key=lambda u: (u.topic, u.partition))
            ],
        )
        _sweep_markers(tx, cleaned)
        mark_obsolete_if_empty(tx, file_ids, now_ms)
        finish(tx, job_id, JOB_DONE, now_ms, report)

    def _lock_and_check(
        self, tx: Tx, hulls: Hulls, file_ids: list[int], cleaned: tuple[CleanedUpTo, ...]
    ) -> None:
        """Lock the partitions and input files; then every cleaned offset's partition must still exist
        (CommitConflict), with the offset at or below its high watermark (ValueError)."""
        keys = sorted(set(hulls) | {(up_to.topic, up_to.partition) for up_to in cleaned})
        next_offsets = lock_partitions(tx, self._d, keys, self._d.for_no_key_update)
        for batch in batches(file_ids):
            tx.all(
                f"SELECT file_id FROM files WHERE file_id IN {in_list(len(batch))}"
                f" ORDER BY file_id{self._d.for_no_key_update}",
                batch,
            )
        for up_to in cleaned:
            hwm = next_offsets.get((up_to.topic, up_to.partition))
            if hwm is None:
                raise CommitConflict(f"{up_to.topic}/{up_to.partition} no longer exists")
            if up_to.cleaned_offset > hwm:
                raise ValueError(
                    f"cleaned offset {up_to.cleaned_offset} of {up_to.topic}/{up_to.partition} is beyond"
                    f" its high watermark {hwm}"
                )

    # --- retention ----------------------------------------------------------------------------------------
    def apply_retention(self, topic: str, partition: int, new_log_start: int, now_ms: int) -> int:
        def work(tx: Tx) -> int:
            row = tx.one(
                "SELECT log_start_offset, next_offset FROM partitions WHERE topic = ? AND partition_id = ?"
                f"{self._d.for_no_key_update}",
                (topic, partition),
            )
            if row is None:
                raise missing_partition(tx, topic, partition)
            current, high_watermark = int(row[0]), int(row[1])
            start = min(max(current, new_log_start), high_watermark)
            if start != current:
                tx.execute(
                    "UPDATE partitions SET log_start_offset = ? WHERE topic = ? AND partition_id = ?",
                    (start, topic, partition),
                )
            file_ids = [
                int(r[0])
                for r in tx.all(
                    "SELECT file_id FROM files WHERE file_id IN (SELECT file_id FROM chunks"
                    " WHERE topic = ? AND partition_id = ? AND last_offset < ?)"
                    f" ORDER BY file_id{self._d.for_no_key_update}",
                    (topic, partition, start),
                )
            ]
            removed = tx.execute(
                "DELETE FROM chunks WHERE topic = ? AND partition_id = ? AND last_offset < ?",
                (topic, partition, start),
            )
            # Markers and aborted ranges below the log start go with the records, as Kafka's transaction
            # index goes with its segment: no reader can ask for those offsets any more.
            tx.execute(
                "DELETE FROM txn_markers WHERE topic = ? AND partition_id = ? AND marker_offset < ?",
                (topic, partition, start),
            )
            tx.execute(
                "DELETE FROM aborted_txns WHERE topic = ? AND partition_id = ? AND last_offset < ?",
                (topic, partition, start),
            )
            mark_obsolete_if_empty(tx, file_ids, now_ms)
            return removed

        return self._backend.run(work, write=True, what="apply_retention")


def _sweep_markers(tx: Tx, cleaned: Sequence[CleanedUpTo]) -> None:
    """The clean's verdicts on markers, under the partition locks the swap holds: a horizon for the ones
    found without records (kept if one was set before), and the ones past it deleted with their range."""
    for up_to in sorted(cleaned, key=lambda u: (u.topic, u.partition)):
        where = (up_to.topic, up_to.partition)
        tx.executemany(
            "UPDATE txn_markers SET delete_horizon_ms = ? WHERE topic = ? AND partition_id = ?"
            " AND marker_offset = ? AND delete_horizon_ms IS NULL",
            [(up_to.horizon_ms, *where, offset) for offset in up_to.marker_horizons],
        )
        for table, column in (("txn_markers", "marker_offset"), ("aborted_txns", "last_offset")):
            tx.executemany(
                f"DELETE FROM {table} WHERE topic = ? AND partition_id = ? AND {column} = ?",
                [(*where, offset) for offset in up_to.dropped_markers],
            )


def _input_chunks(tx: Tx, chunk_ids: Sequence[int]) -> list[InputChunk]:
    """The input chunk rows that still exist."""
    found: list[InputChunk] = []
    for batch in batches(chunk_ids):
        found.extend(
            (int(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]))
            for r in tx.all(
                "SELECT chunk_id, topic, partition_id, base_offset, last_offset, file_id FROM chunks"
                f" WHERE chunk_id IN {in_list(len(batch))}",
                batch,
            )
        )
    return found


def _hulls(found: Sequence[InputChunk]) -> Hulls:
    hulls: Hulls = {}
    for _, topic, partition, base, last, _ in found:
        lo, hi = hulls.get((topic, partition), (base, last))
        hulls[(topic, partition)] = (min(lo, base), max(hi, last))
    return hulls


def _check_within_hulls(outputs: Sequence[CompactionOutput], hulls: Hulls) -> None:
    for output in outputs:
        for c in output.chunks:
            hull = hulls.get((c.topic, c.partition))
            if hull is None or c.base_offset < hull[0] or c.last_offset > hull[1]:
                raise ValueError(
                    f"output chunk {c.topic}/{c.partition} [{c.base_offset}, {c.last_offset}] is outside"
                    f" the span of its partition's input chunks {hull}"
                )


def _check_no_overlap(tx: Tx, outputs: Sequence[CompactionOutput]) -> None:
    """After the inputs are deleted: no remaining chunk may share an offset with an output chunk."""
    spans = [(c.topic, c.partition, c.base_offset, c.last_offset) for o in outputs for c in o.chunks]
    for batch in batches(spans):
        # VALUES columns are named column1.. in both dialects.
        row = tx.one(
            f"SELECT o.column1, o.column2, o.column3 FROM (VALUES {values(len(batch), 4)}) AS o"
            " WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.topic = o.column1"
            " AND c.partition_id = o.column2 AND c.last_offset >= o.column3"
            " AND c.base_offset <= o.column4) LIMIT 1",
            [v for span in batch for v in span],
        )
        if row is not None:
            raise ValueError(
                f"output chunk {row[0]}/{row[1]} at offset {row[2]} overlaps a chunk that is not an input"
            )


def _insert_output(tx: Tx, output: CompactionOutput, now_ms: int) -> None:
    file, chunks = output.file, output.chunks
    live = bool(chunks)
    row = tx.one(
        "INSERT INTO files (object_key, size, level, state, created_ms, obsolete_since_ms)"
        " VALUES (?, ?, ?, ?, ?, ?) RETURNING file_id",
        (
            file.object_key,
            file.size,
            file.level,
            FILE_LIVE if live else FILE_OBSOLETE,
            file.created_ms,
            None if live else now_ms,
        ),
    )
    if row is None:  # INSERT ... RETURNING without ON CONFLICT always returns its row
        raise StrataError("inserting an output file returned no row")
    file_id = int(row[0])
    rows: list[ChunkValues] = [
        (
            c.topic,
            c.partition,
            c.base_offset,
            c.last_offset,
            c.record_count,
            file_id,
            c.position,
            c.length,
            c.min_timestamp,
            c.max_timestamp,
            c.crc,
            c.has_holes,
        )
        for c in chunks
    ]
    insert_chunks(tx, rows)


def _outputs_recorded(tx: Tx, outputs: Sequence[CompactionOutput]) -> bool:
    keys = sorted({o.file.object_key for o in outputs})
    known = 0
    for batch in batches(keys):
        row = tx.one(f"SELECT COUNT(*) FROM files WHERE object_key IN {in_list(len(batch))}", batch)
        known += 0 if row is None else int(row[0])
    return known == len(keys)


def _validate_compaction(outputs: Sequence[CompactionOutput], cleaned: Sequence[CleanedUpTo]) -> None:
    """The checks that need no database: each output chunk on its own, and outputs against each other."""
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    keys: set[str] = set()
    for output in outputs:
        if output.file.object_key in keys:
            raise ValueError(f"output file {output.file.object_key!r} appears twice")
        keys.add(output.file.object_key)
        for c in output.chunks:
            where = f"output chunk {c.topic}/{c.partition} [{c.base_offset}, {c.last_offset}]"
            span = c.last_offset - c.base_offset + 1
            if c.base_offset < 0 or span <= 0:
                raise ValueError(f"{where}: not a valid offset range")
            if not 0 < c.record_count <= span:
                raise ValueError(f"{where}: {c.record_count} records do not fit a span of {span}")
            if c.record_count < span and not c.has_holes:
                raise ValueError(f"{where}: {c.record_count} records in a span of {span} needs has_holes")
            spans.setdefault((c.topic, c.partition), []).append((c.base_offset, c.last_offset))
    for (topic, partition), ranges in spans.items():
        ranges.sort()
        for (_, previous_last), (base, _) in pairwise(ranges):
            if base <= previous_last:
                raise ValueError(f"output chunks of {topic}/{partition} overlap at offset {base}")
    seen: set[tuple[str, int]] = set()
    for up_to in cleaned:
        key = (up_to.topic, up_to.partition)
        if key in seen:
            raise ValueError(f"{up_to.topic}/{up_to.partition} appears twice in the cleaned offsets")
        seen.add(key)
        if up_to.cleaned_offset < 0:
            raise ValueError(f"cleaned offset {up_to.cleaned_offset} of {up_to.topic}/{up_to.partition} < 0")
