"""Turning the produce buffer into one object and one metadata commit.

Sequence of one flush (the order is the durability argument):
1. Build one multi-partition file from the drained buffer: chunks sorted by (topic, partition), each chunk
   the request batches for that partition with their relative base offsets patched to 0, n1, n1+n2, ...
2. One PUT of the whole file (retried on transient errors by the store wrapper).
3. One metadata transaction assigns every chunk its absolute base offset and records idempotency keys.
4. Only now is any waiting producer answered with offsets.
Uploads of up to ``max_inflight_flushes`` flushes run in parallel, but step 3 waits for the flush's turn:
commits happen in the order the flushes were cut (agents/sequencer.py). When the turn has come before the
upload starts and the upload is a short local write, step 3's statements run while step 2 writes, and the
transaction waits for step 2 to end before its COMMIT (``UploadGate``): the metadata still never names a
file that is not durable, and the flush saves the statements' time.
If 2 or 3 fails, every waiter gets ``Unavailable`` (HTTP 503 / 50003) and nothing is acknowledged. A crash
between 2 and 3 leaves an uploaded file that no chunk row references: an orphan, removed by GC later.

Idempotency races: two agents may flush requests with the same key at the same time. The loser's commit
raises ``IdempotencyConflict`` and writes nothing; the flush answers the duplicate requests with the
winner's offsets, rebuilds the file without them and uploads again (the first upload becomes an orphan).

Idempotent producers take the same path: each request's producer batches are one append, and when the
commit finds appends that repeat a committed batch or break their producer's sequence or epoch, it raises
``ProducerConflict`` and writes nothing; the flush answers those requests (the original offset, or the
error), rebuilds the file without them and uploads again. One request's producer batches therefore stand
or fall together, as one partition's append does in Kafka (the Kafka door makes one request per partition).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading

from agents.buffer import PendingFlush, PendingRequest
from agents.cache import ObjectCache
from agents.flush_policy import LOW_LATENCY_PIPELINE_BYTES
from agents.layout import BuiltFile, build_file
from agents.metrics import Metrics
from agents.offsets import Order, RecordOffsets, order_pairs
from agents.sequencer import CommitSequencer
from agents.watch import PartitionWatch
from storage.clock import Clock
from storage.errors import (
    CommitConflict,
    IdempotencyConflict,
    ProducerConflict,
    StrataError,
    Unavailable,
    UnknownTopic,
)
from storage.keys import new_object_key
from storage.metadata.base import LogStore
from storage.metadata.rows import (
    LEVEL_INGEST,
    PRODUCER_ID_EXPIRATION_MS,
    FlushResult,
    IdempotencyEntry,
    NewChunk,
    NewFile,
    ProducerBatch,
)
from storage.objectstore.base import ON_DURABLE, AsyncObjectStore, Body, body_bytes

log = logging.getLogger("strata.flush")

# An idempotency conflict removes requests and retries; more rounds than this means something is wrong.
_MAX_CONFLICT_ROUNDS = 4
COMMIT_ATTEMPTS = 4
COMMIT_BACKOFF_S = 0.05
# A flush's commit runs beside its upload when the upload is a local write of at most this much
# (``Flusher._beside_upload``): a few milliseconds of disk, for which the commit may hold its locks. It is
# the low-latency class's pipeline size, so a low-latency flush that does not overlap another qualifies.
BESIDE_UPLOAD_BYTES = LOW_LATENCY_PIPELINE_BYTES
# How long such a commit waits for the upload before it rolls back: a bound for a stuck disk, so that a
# connection and its locks are not held forever. A local write takes milliseconds.
UPLOAD_WAIT_S = 30.0


class Flusher:
    def __init__(
        self,
        store: AsyncObjectStore,
        metadata: LogStore,
        cache: ObjectCache,
        watch: PartitionWatch,
        metrics: Metrics,
        clock: Clock,
        rng: random.Random,
        sequencer: CommitSequencer,
        producer_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.sequencer = sequencer
        self.producer_expiration_ms = producer_expiration_ms
        self.store = store
        self.metadata = metadata
        self.cache = cache
        self.watch = watch
        self.metrics = metrics
        self.clock = clock
        self.rng = rng

    async def flush(self, flush: PendingFlush) -> None:
        """Write and commit ``flush`` in its turn, then settle every waiting request's future."""
        requests = list(flush.requests)
        # The first attempt writes the file laid out as the requests arrived; a retry without some of them
        # lays out a new one.
        built: BuiltFile | None = flush.layout.finish() if requests else None
        try:
            for _ in range(_MAX_CONFLICT_ROUNDS):
                if not requests:
                    return
                try:
                    await self._write_and_commit(flush.seq, requests, built, flush.flush_class)
                    return
                except IdempotencyConflict as conflict:
                    requests = self._answer_duplicates(requests, conflict)
                except ProducerConflict as conflict:
                    requests = self._answer_producer_conflict(requests, conflict)
                built = None
            raise Unavailable("flush gave up after repeated idempotency conflicts")
        except StrataError as exc:
            log.warning("flush failed, %d request(s) not acknowledged: %s", len(requests), exc.message)
            self.metrics.flush_failures.inc()
            error = exc if exc.retriable else Unavailable(f"flush failed: {exc.message}")
            self._fail(requests, error)
        finally:
            # Whatever happened (a bug included), no producer waits forever and none is acked wrongly, and
            # the next flush gets its turn to commit.
            self._fail(requests, Unavailable("flush failed unexpectedly; the records were not acknowledged"))
            await self.sequencer.done(flush.seq)

    @staticmethod
    def _fail(requests: list[PendingRequest], error: StrataError) -> None:
        for req in requests:
            if not req.future.done():
                req.future.set_exception(error)

    def _answer_duplicates(
        self, requests: list[PendingRequest], conflict: IdempotencyConflict
    ) -> list[PendingRequest]:
        remaining = []
        for req in requests:
            key = req.idempotency_key
            if key is not None and key in conflict.existing:
                if not req.future.done():
                    req.future.set_result(RecordOffsets.of_pairs(conflict.existing[key]))
            else:
                remaining.append(req)
        return remaining

    @staticmethod
    def _answer_producer_conflict(
        requests: list[PendingRequest], conflict: ProducerConflict
    ) -> list[PendingRequest]:
        """Answer the appends the commit refused; return the requests to commit again without them.

        A duplicate append is answered from its original base offset: one request's records for a
        partition are contiguous, so record i of the request's first batch sits at base + i.
        """
        remaining = []
        for index, req in enumerate(requests):
            error = conflict.rejected.get(index)
            base = conflict.duplicates.get(index)
            if error is not None:
                if not req.future.done():
                    req.future.set_exception(error)
            elif base is not None:
                if not req.future.done():
                    batches = req.batches
                    starts = [conflict.log_starts.get((req.topic, b.partition), -1) for b in batches]
                    req.future.set_result(
                        RecordOffsets(
                            [b.partition for b in batches], [base] * len(batches), req.request.order, starts
                        )
                    )
            else:
                remaining.append(req)
        return remaining

    def _beside_upload(self, seq: int, size: int) -> bool:
        """Whether this flush's commit runs beside its upload (``_commit_beside_upload``): only when its
        turn has come already, so it could commit at once, and its upload is short (a local store's write
        of at most ``BESIDE_UPLOAD_BYTES``). Such a commit holds its partitions' locks, and on SQLite the
        database's write lock, until the upload ends; a long PUT would keep other writers waiting."""
        return not self.store.remote and size <= BESIDE_UPLOAD_BYTES and self.sequencer.next_turn == seq

    async def _commit_beside_upload(
        self,
        body: Body,
        new_file: NewFile,
        chunks: list[NewChunk],
        entries: list[IdempotencyEntry],
        producers: list[ProducerBatch],
    ) -> tuple[FlushResult, float]:
        """Upload and commit at once; returns the commit's result and when the upload ended.

        The commit's statements (offsets, chunk rows, the producers' checks) run in their thread while
        the file is written in another, and the transaction waits for the upload before its COMMIT
        (``UploadGate``). So the metadata still never names a file that is not durable, and a failed
        upload rolls the commit back; what the flush saves is the statements' time after the upload.
        """
        gate = UploadGate(self.clock)
        # The upload's task copies the context as it is now: a local store opens the gate from its thread.
        token = ON_DURABLE.set(gate.durable)
        try:
            upload = asyncio.ensure_future(self.store.put(new_file.object_key, body))
        finally:
            ON_DURABLE.reset(token)
        upload.add_done_callback(gate.settle)
        committed = False
        try:
            # One turn of the loop first, in which the upload's task hands the write to its thread: the
            # write starts before the statements, and the commit takes no task (and no turn) of its own.
            await asyncio.sleep(0)
            result = await self._commit(new_file, chunks, entries, producers, gate)
            committed = True
        finally:
            # A commit that failed leaves the file an orphan for GC, and its upload is not left running
            # while the flush goes on. After a commit the file is durable, and its task's end is not
            # waited for (``settle`` takes its outcome).
            if not committed and not upload.done():
                await asyncio.wait([upload])
        return result, gate.settled_at

    async def _commit(
        self,
        new_file: NewFile,
        chunks: list[NewChunk],
        entries: list[IdempotencyEntry],
        producers: list[ProducerBatch],
        gate: UploadGate | None = None,
    ) -> FlushResult:
        """Commit, retrying transient failures; with ``gate``, COMMIT waits for the file's upload.

        A failed commit is ambiguous: the transaction may have committed and only its reply been lost.
        ``commit_flush`` is idempotent per object key (a replay returns the recorded offsets), so
        retrying resolves the ambiguity instead of turning it into a 503 and a duplicate write.
        """
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                return await asyncio.to_thread(
                    self.metadata.commit_flush,
                    new_file,
                    chunks,
                    entries,
                    self.clock.now_ms(),
                    producers,
                    self.producer_expiration_ms,
                    None if gate is None else gate.wait,
                )
            # CommitConflict here means an idempotency key expired mid-commit: a retry does not conflict.
            # (IdempotencyConflict, the other conflict commit_flush raises, is an answer: see flush.)
            except (Unavailable, CommitConflict) as exc:
                if attempt == COMMIT_ATTEMPTS - 1 or (gate is not None and gate.failed):
                    raise
                log.warning("commit of %s failed, retrying: %s", new_file.object_key, exc.message)
                await self.clock.asleep(COMMIT_BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    async def _write_and_commit(
        self, seq: int, requests: list[PendingRequest], built: BuiltFile | None, flush_class: str
    ) -> None:
        batches = [req.request.batches for req in requests]
        if built is None:
            built = build_file(batches)
        key = new_object_key(LEVEL_INGEST, self.clock, self.rng)
        started = self.clock.monotonic()
        # A remote store's body is one buffer anyway, which the cache then keeps, and the batches move into
        # it; a local one writes the pieces as they are.
        joined = None
        if self.store.remote:
            joined = body_bytes(built.pieces)
            built.rebase(batches, joined)
        body = built.pieces if joined is None else joined
        spans = built.spans(batches)
        entries = [
            IdempotencyEntry(req.idempotency_key, req.topic, _placements(spans[i], req.request.order))
            for i, req in enumerate(requests)
            if req.idempotency_key is not None
        ]
        producers = built.producer_batches(batches)
        new_file = NewFile(key, built.size, LEVEL_INGEST, self.clock.now_ms())
        if self._beside_upload(seq, built.size):
            result, uploaded = await self._commit_beside_upload(
                body, new_file, built.chunks, entries, producers
            )
            turn = uploaded
        else:
            await self.store.put(key, body)
            uploaded = self.clock.monotonic()
            await self.sequencer.wait_turn(seq)
            turn = self.clock.monotonic()
            result = await self._commit(new_file, built.chunks, entries, producers)
        self.metrics.flush_puts.labels(flush_class).inc()
        await self.sequencer.done(seq)
        self.metrics.observe_flush_steps(
            upload=uploaded - started, turn=turn - uploaded, commit=self.clock.monotonic() - turn
        )
        # Committed: from here on the records are durable and visible, so waiters may be acknowledged.
        if joined is not None:
            self.cache.put_file(key, joined)
        self.watch.notify(built.tps)
        self.metrics.observe_flush(
            nbytes=built.size,
            nrecords=sum(c.record_count for c in built.chunks),
            npartitions=len(built.chunks),
            seconds=self.clock.monotonic() - started,
        )
        bases = result.base_offsets
        log_starts = result.log_starts or [-1] * len(bases)
        partition_of = [chunk.partition for chunk in built.chunks]
        deleted = {chunk_index for chunk_index, base in enumerate(bases) if base < 0}
        for req, span in zip(requests, spans, strict=True):
            if req.future.done():
                continue
            if deleted and any(chunk_index in deleted for chunk_index, _ in span):
                req.future.set_exception(UnknownTopic(f"topic {req.topic!r} was deleted during produce"))
                continue
            if len(span) == 1:  # a Kafka request's partition: one batch, mostly (no comprehensions)
                ((c, start),) = span
                offsets = RecordOffsets(
                    [partition_of[c]], [bases[c] + start], req.request.order, [log_starts[c]]
                )
            else:
                offsets = RecordOffsets(
                    [partition_of[c] for c, _ in span],
                    [bases[c] + start for c, start in span],
                    req.request.order,
                    [log_starts[c] for c, _ in span],
                )
            req.future.set_result(offsets)


class UploadGate:
    """A flush's upload as the commit beside it sees it: the commit's thread waits in ``wait`` before its
    COMMIT until the upload has ended, and raises if it failed (the transaction then rolls back)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._ended = threading.Event()
        self._error: str | None = None
        self.failed = False  # ``wait`` raised: a retry of the commit cannot succeed either
        self.settled_at = 0.0

    def durable(self) -> None:
        """The file is durable (``ON_DURABLE``): called by a local store in its thread, before its put
        returns. The first of this and ``settle`` opens the gate."""
        self.settled_at = self._clock.monotonic()
        self._ended.set()

    def settle(self, upload: asyncio.Future[None]) -> None:
        """The upload's done-callback, on the event loop."""
        error = None
        if upload.cancelled():
            error = "cancelled"
        elif (exc := upload.exception()) is not None:
            error = exc.message if isinstance(exc, StrataError) else repr(exc)
        if self._ended.is_set():
            return  # the store said the file was durable: what came after does not undo that
        self._error = error
        self.settled_at = self._clock.monotonic()
        self._ended.set()

    def wait(self) -> None:
        """In the commit's thread, before COMMIT: return once the file is durable, else raise."""
        ended = self._ended.wait(UPLOAD_WAIT_S)
        if not ended or self._error is not None:
            self.failed = True
            raise Unavailable(f"the flush's upload failed: {self._error or 'it did not end in time'}")


def _placements(spans: list[tuple[int, int]], order: Order) -> list[tuple[int, int]]:
    """(chunk index, relative offset) of each record ``order`` names, given its request's batch spans:
    what an idempotency key stores, per record (only requests that carry a key pay for it)."""
    return [(spans[b][0], spans[b][1] + record) for b, record in order_pairs(order)]
