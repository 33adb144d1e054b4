"""The flush commit and idempotency keys: the write half of ``LogStore``.

The idempotent producers' sequence check runs inside the commit (``producers.check_producers``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from storage.errors import CommitConflict, IdempotencyConflict, ProducerConflict
from storage.metadata.rows import (
    FILE_LIVE,
    FILE_OBSOLETE,
    PRODUCER_ID_EXPIRATION_MS,
    FlushResult,
    IdempotencyEntry,
    NewChunk,
    NewFile,
    ProducerBatch,
)
from storage.metadata.sql.core import (
    ChunkValues,
    SqlBase,
    Tx,
    batches,
    in_list,
    insert_chunks,
    lock_partition_offsets,
    offsets_from_json,
    offsets_to_json,
    set_next_offsets,
    values,
)
from storage.metadata.sql.producers import check_producers


class FlushQueries(SqlBase):
    def commit_flush(
        self,
        file: NewFile,
        chunks: Sequence[NewChunk],
        idempotency: Sequence[IdempotencyEntry],
        now_ms: int,
        producers: Sequence[ProducerBatch] = (),
        producer_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
        before_commit: Callable[[], None] | None = None,
    ) -> FlushResult:
        """One transaction: the file row, every chunk's base offset and row, the idempotency rows, the
        producer state.

        Beyond the interface's contract:
        - A partition number the topic does not have is treated like a deleted topic: base offset -1.
        - A request (idempotency entry) with records in a dropped chunk gets offset -1 for those records
          and no idempotency row: nothing of it is live to point at.
        - If the file is all dropped chunks, its row is written obsolete at once (GC collects the object).
        - Replaying a commit whose file row already exists (the caller retried after an ``Unavailable``
          that hid a successful commit) writes nothing and returns the recorded result. Object keys are
          generated per upload, so an existing key means this very flush. A chunk whose row is gone by
          then (its topic deleted, or compaction moved it into another file) is reported as -1.
          A replay does not check producer sequences again: the first commit recorded them.
        """
        chunks = tuple(chunks)
        entries = tuple(idempotency)
        batches_ = tuple(producers)
        _validate_flush(chunks, entries, batches_)

        def work(tx: Tx) -> FlushResult:
            result = self._commit_flush(tx, file, chunks, entries, batches_, now_ms, producer_expiration_ms)
            if before_commit is not None:
                before_commit()  # last: raising rolls back everything above
            return result

        return self._backend.run(work, write=True, what="commit_flush")

    def _commit_flush(
        self,
        tx: Tx,
        file: NewFile,
        chunks: tuple[NewChunk, ...],
        entries: tuple[IdempotencyEntry, ...],
        producers: tuple[ProducerBatch, ...],
        now_ms: int,
        producer_expiration_ms: int,
    ) -> FlushResult:
        order = sorted(range(len(chunks)), key=lambda i: (chunks[i].topic, chunks[i].partition))
        locked = lock_partition_offsets(
            tx, self._d, [(chunks[i].topic, chunks[i].partition) for i in order], self._d.for_no_key_update
        )
        next_offsets = {key: next_offset for key, (next_offset, _) in locked.items()}
        log_starts = [locked.get((c.topic, c.partition), (-1, -1))[1] for c in chunks]
        # Offsets are assigned here, under the partition locks: base = next_offset, next_offset += n.
        bases = [-1] * len(chunks)
        for i in order:
            key = (chunks[i].topic, chunks[i].partition)
            if key in next_offsets:
                bases[i] = next_offsets[key]
                next_offsets[key] += chunks[i].record_count
        live = any(base >= 0 for base in bases)

        row = tx.one(
            "INSERT INTO files (object_key, size, level, state, created_ms, obsolete_since_ms)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (object_key) DO NOTHING RETURNING file_id",
            (
                file.object_key,
                file.size,
                file.level,
                FILE_LIVE if live else FILE_OBSOLETE,
                file.created_ms,
                None if live else now_ms,
            ),
        )
        if row is None:
            return self._replay_flush(tx, file, chunks, entries)
        file_id = int(row[0])
        # Before anything else is written; raising here rolls the file row back with the rest.
        try:
            check_producers(tx, self._d, chunks, bases, producers, now_ms, producer_expiration_ms)
        except ProducerConflict as conflict:
            conflict.log_starts = {(c.topic, c.partition): s for c, s in zip(chunks, log_starts, strict=True)}
            raise

        set_next_offsets(tx, next_offsets)
        insert_chunks(tx, _chunk_values(chunks, bases, order, file_id))

        request_offsets = {e.key: _request_offsets(chunks, bases, e) for e in entries}
        to_record = sorted(
            (e for e in entries if all(o >= 0 for _, o in request_offsets[e.key])), key=lambda e: e.key
        )
        self._insert_idempotency(tx, to_record, request_offsets, now_ms)
        return FlushResult(bases, request_offsets, log_starts)

    def _insert_idempotency(
        self,
        tx: Tx,
        entries: Sequence[IdempotencyEntry],
        request_offsets: Mapping[str, list[tuple[int, int]]],
        now_ms: int,
    ) -> None:
        """Insert the rows (``entries`` sorted by key); raise IdempotencyConflict if any key exists.

        ON CONFLICT DO NOTHING RETURNING tells inserted keys from existing ones without a failed statement.
        On PostgreSQL it waits for a concurrent transaction inserting the same key, and counts the key as
        existing if that one commits. Raising makes the backend roll back everything, offsets included.
        """
        existing: list[str] = []
        for batch in batches(entries):
            rows = tx.all(
                "INSERT INTO idempotency (key, topic, offsets, created_ms)"
                f" VALUES {values(len(batch), 4)} ON CONFLICT (key) DO NOTHING RETURNING key",
                [v for e in batch for v in (e.key, e.topic, offsets_to_json(request_offsets[e.key]), now_ms)],
            )
            inserted = {str(r[0]) for r in rows}
            existing.extend(e.key for e in batch if e.key not in inserted)
        if not existing:
            return
        found: dict[str, list[tuple[int, int]]] = {}
        for keys in batches(existing):
            for key, offsets in tx.all(
                f"SELECT key, offsets FROM idempotency WHERE key IN {in_list(len(keys))}", keys
            ):
                found[str(key)] = offsets_from_json(offsets)
        if len(found) != len(existing):
            # The conflicting row expired between the two statements; a retry will not conflict.
            raise CommitConflict("an idempotency key expired while this flush committed; retry the commit")
        raise IdempotencyConflict(found)

    def _replay_flush(
        self, tx: Tx, file: NewFile, chunks: tuple[NewChunk, ...], entries: tuple[IdempotencyEntry, ...]
    ) -> FlushResult:
        recorded = {
            (str(topic), int(partition)): int(base)
            for topic, partition, base in tx.all(
                "SELECT c.topic, c.partition_id, c.base_offset FROM chunks c"
                " JOIN files f ON f.file_id = c.file_id WHERE f.object_key = ?",
                (file.object_key,),
            )
        }
        bases = [recorded.get((c.topic, c.partition), -1) for c in chunks]
        keys = sorted({(c.topic, c.partition) for c in chunks})
        starts = lock_partition_offsets(tx, self._d, keys, "")
        log_starts = [starts.get((c.topic, c.partition), (-1, -1))[1] for c in chunks]
        return FlushResult(bases, {e.key: _request_offsets(chunks, bases, e) for e in entries}, log_starts)

    def lookup_idempotency(self, key: str, not_before_ms: int) -> list[tuple[int, int]] | None:
        row = self._backend.run(
            lambda tx: tx.one(
                "SELECT offsets FROM idempotency WHERE key = ? AND created_ms >= ?", (key, not_before_ms)
            ),
            write=False,
            what="lookup_idempotency",
        )
        return None if row is None else offsets_from_json(row[0])

    def expire_idempotency(self, before_ms: int) -> int:
        return self._backend.run(
            lambda tx: tx.execute("DELETE FROM idempotency WHERE created_ms < ?", (before_ms,)),
            write=True,
            what="expire_idempotency",
        )


def _chunk_values(
    chunks: Sequence[NewChunk], bases: Sequence[int], order: Sequence[int], file_id: int
) -> list[ChunkValues]:
    """Chunk rows in (topic, partition) order; chunks of missing partitions (base -1) get none."""
    return [
        (
            c.topic,
            c.partition,
            base,
            base + c.record_count - 1,
            c.record_count,
            file_id,
            c.position,
            c.length,
            c.min_timestamp,
            c.max_timestamp,
            c.crc,
            False,  # a fresh flush chunk holds every offset of its range
        )
        for c, base in ((chunks[i], bases[i]) for i in order)
        if base >= 0
    ]


def _validate_flush(
    chunks: Sequence[NewChunk], idempotency: Sequence[IdempotencyEntry], producers: Sequence[ProducerBatch]
) -> None:
    """Caller bugs are ValueErrors raised before any SQL runs."""
    for batch in producers:
        if not 0 <= batch.chunk < len(chunks):
            raise ValueError(f"producer batch points at chunk {batch.chunk} of {len(chunks)}")
        if (
            batch.record_count < 1
            or not 0 <= batch.relative <= chunks[batch.chunk].record_count - batch.record_count
        ):
            raise ValueError(
                f"producer batch of {batch.record_count} records at {batch.relative} is outside its chunk"
            )
        if batch.producer_id < 0 or batch.epoch < 0 or batch.first_seq < 0:
            raise ValueError(f"producer batch without a producer: {batch}")
    seen: set[tuple[str, int]] = set()
    for chunk in chunks:
        if chunk.record_count <= 0:
            raise ValueError(f"chunk of {chunk.topic}/{chunk.partition} has no records")
        key = (chunk.topic, chunk.partition)
        if key in seen:
            raise ValueError(f"{chunk.topic}/{chunk.partition} appears twice in one flush")
        seen.add(key)
    keys: set[str] = set()
    for entry in idempotency:
        if entry.key in keys:
            raise ValueError(f"idempotency key {entry.key!r} appears twice in one flush")
        keys.add(entry.key)
        for index, relative in entry.placements:
            if not 0 <= index < len(chunks):
                raise ValueError(f"idempotency key {entry.key!r} points at chunk {index} of {len(chunks)}")
            chunk = chunks[index]
            if chunk.topic != entry.topic:
                raise ValueError(
                    f"idempotency key {entry.key!r} is for {entry.topic}, chunk is {chunk.topic}"
                )
            if not 0 <= relative < chunk.record_count:
                raise ValueError(f"idempotency key {entry.key!r}: relative offset {relative} out of chunk")


def _request_offsets(
    chunks: Sequence[NewChunk], bases: Sequence[int], entry: IdempotencyEntry
) -> list[tuple[int, int]]:
    """Absolute (partition, offset) of each record of a request; offset -1 where the chunk was dropped."""
    return [
        (chunks[index].partition, bases[index] + relative if bases[index] >= 0 else -1)
        for index, relative in entry.placements
    ]
