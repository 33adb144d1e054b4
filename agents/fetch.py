"""The fetch path: metadata lookup, whole-file or coalesced ranged GETs (through the cache), decode, offset
patching.

Reads: a file up to 1/4 of the cache is read whole, once, and shared: by concurrent fetches through one
GET in flight, and by later ones through the cache (one GET per flush file on catch-up, where ranged reads
cost one per fetch per file). Larger files (compaction output) get ranged GETs, near ranges coalesced.
Which uncached files a fetch may read is bounded (``_admit_files``, ``_admit_one_partition``) so that the
consumers of all partitions move through the log together and each file is read once.

``Fetcher.fetch_chunks`` is a one-partition fetch up to its reads (the chunks, undecoded); ``decode_fetch``
turns them into records. The HTTP door renders its answer from the chunks instead (``api/record_json.py``)
and uses ``decode_fetch`` only where that declines.

Gaps: offsets removed by compaction or retention have no record. A fetch from X returns records from the
first existing offset >= X; ``next_offset`` moves past holes, so a consumer never stalls.

Chunk selection, checking and decoding are sans-IO, in ``agents/chunks.py``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from agents import txn_fetch
from agents.cache import ObjectCache
from agents.chunks import (
    BatchesResult,
    BatchRead,
    ChunksResult,
    FetchResult,
    batches_from,
    check_range,
    decode_chunk,
    decode_fetch,
    plan_reads,
    select_chunks,
    within,
)
from agents.fetch_plan import View, plan, read_end, read_stable
from agents.watch import PartitionWatch
from storage.clock import Clock
from storage.errors import CorruptObject, ObjectNotFound, StrataError
from storage.metadata.base import LogStore
from storage.metadata.rows import ChunkRow, PartitionState
from storage.objectstore.base import AsyncObjectStore

log = logging.getLogger("strata.fetch")

# How often a long-polling fetch re-reads the high watermark to see other agents' commits.
POLL_INTERVAL_S = 0.1
MAX_CHUNKS_PER_FETCH = 256
# A multi-partition fetch first looks up this many chunks per partition, and more only for a partition
# that would use them all (see _read_batches_many).
FIRST_CHUNKS_PER_PARTITION = 16
# Files up to cache size / this are read whole and shared by every fetch that needs them (_get_file).
WHOLE_FILE_CACHE_SHARE = 4


class Fetcher:
    def __init__(
        self,
        store: AsyncObjectStore,
        metadata: LogStore,
        cache: ObjectCache,
        watch: PartitionWatch,
        clock: Clock,
    ) -> None:
        self.store = store
        self.metadata = metadata
        self.cache = cache
        self.watch = watch
        self.clock = clock
        # Whole-file GETs under way, by object key: concurrent fetches of one file share one GET.
        self._inflight: dict[str, asyncio.Future[bytes]] = {}

    async def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int
    ) -> FetchResult:
        return decode_fetch(await self.fetch_chunks(topic, partition, offset, max_bytes, max_wait_ms))

    async def fetch_chunks(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        max_wait_ms: int,
        read_committed: bool = False,
    ) -> ChunksResult:
        """``fetch`` up to its reads: long-polls as ``fetch`` does and returns the chunks undecoded.
        ``read_committed``: only below the last stable offset, without aborted transactions' batches
        (``txn_fetch.committed_chunks``); markers are holes either way."""
        state = await asyncio.to_thread(self.metadata.partition_state, topic, partition)
        check_range(state, offset)
        deadline = self.clock.monotonic() + max_wait_ms / 1000
        while offset >= read_end(state, read_committed):
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0:
                return ChunksResult(
                    [],
                    offset,
                    max_bytes,
                    state.high_watermark,
                    state.log_start_offset,
                    read_stable(state, read_committed),
                )
            await self.watch.wait(topic, partition, min(remaining, POLL_INTERVAL_S))
            state = await asyncio.to_thread(self.metadata.partition_state, topic, partition)
            check_range(state, offset)
        try:
            result = await self._read_once(state, offset, max_bytes, read_committed)
        except ObjectNotFound:
            # Compaction may have replaced these chunks and GC deleted their file between our lookup and
            # our GET (only possible past the GC grace period). The new chunk rows point at live files.
            log.info("a file vanished under a fetch of %s/%d; looking up again", state.topic, state.partition)
            result = await self._read_once(state, offset, max_bytes, read_committed)
        if not read_committed or not result.chunks:
            return result
        last = result.chunks[-1][0].last_offset
        # Aborted ranges end at a marker: none can meet this read unless a marker lies at or past it.
        aborted = (
            await asyncio.to_thread(self.metadata.aborted_txns, topic, partition, offset, last)
            if state.last_marker_offset >= offset
            else []
        )
        return replace(
            result, chunks=txn_fetch.committed_chunks(result.chunks, state.last_stable_offset, aborted)
        )

    async def state(self, topic: str, partition: int) -> PartitionState:
        return await asyncio.to_thread(self.metadata.partition_state, topic, partition)

    async def read_batches_many(
        self, reads: list[BatchRead], max_total: int
    ) -> list[BatchesResult | StrataError]:
        """Stored batches of several partitions at once (a Kafka Fetch), without decoding records.

        Never waits (the caller long-polls). Each partition gets at least one batch if one exists at or
        past its offset, even past its ``max_bytes`` (Kafka's KIP-74 rule: a large batch never stalls a
        consumer); later partitions get nothing once ``max_total`` is reached. The chunks of all partitions
        are read together, so chunks of one file, which a flush wrote side by side for many partitions,
        are fetched with one ranged GET instead of one per partition. Errors are per partition.
        """
        try:
            return await self._read_batches_many(reads, max_total)
        except ObjectNotFound:
            # Compaction replaced chunks and GC deleted their file between lookup and GET (only past the
            # GC grace period): the new chunk rows point at live files.
            log.info("a file vanished under a fetch of %d partitions; looking up again", len(reads))
            return await self._read_batches_many(reads, max_total)

    async def _read_batches_many(
        self, reads: list[BatchRead], max_total: int
    ) -> list[BatchesResult | StrataError]:
        # Chunks are looked up a page at a time. A catch-up fetch asks each of 32 partitions for megabytes,
        # yet the files it may read (_admit_files) hold a few chunks of each: building hundreds of chunk
        # rows per partition per fetch was a large share of the agent's CPU in a Kafka catch-up (py-spy).
        # A partition gets a second, larger page only when it would take every chunk of its first.
        looked_up = await asyncio.gather(*(self._lookup(r, FIRST_CHUNKS_PER_PARTITION) for r in reads))
        results: list[BatchesResult | StrataError] = []
        views: dict[int, View] = {}
        wanted: list[tuple[int, BatchRead, list[ChunkRow]]] = []
        more: list[tuple[int, BatchRead, View, list[ChunkRow]]] = []
        for i, (read, found) in enumerate(zip(reads, looked_up, strict=True)):
            if isinstance(found, StrataError):
                results.append(found)
                continue
            view = views[i] = View(*found, complete=len(found[1]) < FIRST_CHUNKS_PER_PARTITION)
            results.append(BatchesResult([], view.state.high_watermark, view.state.log_start_offset))
            if view.found:
                selected = select_chunks(view.found, view.upper(read), max(read.max_bytes, 1))
                wanted.append((i, read, selected))
                full = not view.complete and len(selected) == len(view.found)
                if full and selected[-1].last_offset + 1 < view.upper(read):
                    more.append((len(wanted) - 1, read, view, selected))
        heads = {selected[0].object_key for _, _, selected in wanted if selected}
        admitted = self._admit_files([chunk for _, _, selected in wanted for chunk in selected], heads)
        more = [m for m in more if all(c.object_key in admitted for c in m[3])]
        if more:
            limit = MAX_CHUNKS_PER_FETCH - FIRST_CHUNKS_PER_PARTITION
            pages = await asyncio.gather(
                *(
                    asyncio.to_thread(
                        self.metadata.find_chunks,
                        read.topic,
                        read.partition,
                        selected[-1].last_offset + 1,
                        limit,
                    )
                    for _, read, _, selected in more
                )
            )
            for (at, read, view, selected), page in zip(more, pages, strict=True):
                view.found = view.found + page
                view.complete = len(page) < limit
                wanted[at] = (
                    wanted[at][0],
                    read,
                    select_chunks(selected + page, view.upper(read), max(read.max_bytes, 1)),
                )
            admitted = self._admit_files([chunk for _, _, selected in wanted for chunk in selected], heads)
        plans = plan(wanted, admitted, max_total)
        loaded = await self._load([c for _, _, selected in plans for c in selected])
        data_of = {chunk.chunk_id: data for chunk, data in loaded}
        for i, read, selected in plans:
            view = views[i]
            try:
                batches, view.stop = batches_from(
                    [(c, data_of[c.chunk_id]) for c in selected],
                    read.offset,
                    read.max_bytes,
                    view.upper(read),
                )
            except CorruptObject as exc:
                results[i] = exc  # this partition's answer; the others' are unaffected
                del views[i]
                continue
            view.read = {c.chunk_id for c in selected}
            view.batches = batches
        await asyncio.gather(*(self._transactional(reads[i], view) for i, view in views.items()))
        for i, view in views.items():
            state = view.state
            results[i] = BatchesResult(
                view.batches,
                state.high_watermark,
                state.log_start_offset,
                state.last_stable_offset,
                view.aborted,
            )
        return results

    async def _transactional(self, read: BatchRead, view: View) -> None:
        """Merge the markers the answer carries into its batches, and for read_committed read the aborted
        transactions of its range (agents/txn_fetch.py says which and why it is safe)."""
        state = view.state
        upper = view.upper(read)
        if state.last_marker_offset >= read.offset:
            hi = txn_fetch.frontier(
                view.batches, view.stop, read.offset, view.found, view.read, view.complete, upper
            )
            if hi > read.offset:
                markers = await asyncio.to_thread(
                    self.metadata.txn_markers, read.topic, read.partition, read.offset, hi - 1
                )
                view.batches = txn_fetch.merge(view.batches, markers, upper)
        if read.read_committed:
            end = txn_fetch.end_of(view.batches, read.offset)
            aborted = (
                await asyncio.to_thread(
                    self.metadata.aborted_txns, read.topic, read.partition, read.offset, end - 1
                )
                if end > read.offset
                else []
            )
            view.aborted = txn_fetch.aborted_list(aborted)

    def _admit_files(self, chunks: list[ChunkRow], heads: set[str]) -> set[str]:
        """The files one multi-partition fetch may read: every cached one, the oldest uncached ones up to
        half the cache (always at least one), and the file of some partition's next chunk (``heads``).

        A consumer catching up asks for many partitions at once, each for megabytes. Unbounded, one fetch
        touched dozens of flush files, more than the cache holds, and partitions drifted apart in the log,
        so every file was read again and again, each GET serving a fraction of its bytes.
        Reading the oldest files first keeps a consumer's partitions, and consumers of the same log,
        moving through it together, so each file is fetched once and served from the cache to the rest.
        A partition whose next chunk lies in a file left out gets nothing this time; a tailing
        partition reads cached files, which cost nothing, so it is never held back by one catching up.

        Key order is only roughly offset order: two flushes cut in one millisecond sort at random, and
        the wall clock can step back. Files holding only later chunks could then fill the admission while
        every partition's next file stayed out, and no fetch would serve anything, ever. So unless a head
        file is admitted already, the oldest one is added: every fetch serves some partition. (A few
        catch-up runs of bench/kafka_bench.py stalled like that, every partition with no GET for the rest
        of the run; that this was their cause is likely, not established.)
        """
        costs: dict[str, int] = {}
        for chunk in chunks:
            if self.cache.has_file(chunk.object_key):
                continue
            if self._read_whole(chunk):
                costs[chunk.object_key] = chunk.file_size
            else:  # read by range: its chunks' bytes
                costs[chunk.object_key] = costs.get(chunk.object_key, 0) + chunk.length
        admitted = {chunk.object_key for chunk in chunks} - set(costs)
        spent = 0
        # Object keys carry their creation time (storage/keys.py): oldest first.
        for key in sorted(costs, key=lambda k: k.rsplit("/", 1)[-1]):
            if spent and spent + costs[key] > self.cache.max_bytes // 2:
                break
            admitted.add(key)
            spent += costs[key]
        if heads and not heads & admitted:
            admitted.add(min(heads, key=lambda k: k.rsplit("/", 1)[-1]))
        return admitted

    def _admit_one_partition(self, chunks: list[ChunkRow]) -> set[str]:
        """The files a one-partition fetch may read: while its first chunk's file is cached, only cached
        files (and files read by range); else, as a multi-partition fetch, the oldest uncached ones up to
        half the cache.

        One partition's megabytes span dozens of flush files, each read whole and shared with the
        consumers of the other partitions, which must come for a file before the cache lets it go. Left
        to read as far as its max_bytes, each fetch pulled in dozens of files, the consumers of different
        partitions drifted apart and the cache could not hold what they shared: a catch-up of many
        partitions over HTTP read every file several times. Now the fetch that finds its next file
        missing reads a few, and the fetches of the other partitions are served from them until they too
        reach a missing file: the consumers move through the log together and each file is read once.
        """
        first = chunks[0] if chunks else None
        if first is None or not (self._read_whole(first) and self.cache.has_file(first.object_key)):
            return self._admit_files(chunks, {first.object_key} if first is not None else set())
        return {c.object_key for c in chunks if not self._read_whole(c) or self.cache.has_file(c.object_key)}

    async def _lookup(
        self, read: BatchRead, limit: int
    ) -> tuple[PartitionState, list[ChunkRow]] | StrataError:
        try:
            state = await self.state(read.topic, read.partition)
            check_range(state, read.offset)
            upper = state.last_stable_offset if read.read_committed else state.high_watermark
            if read.offset >= upper:
                return state, []
            chunks = await asyncio.to_thread(
                self.metadata.find_chunks, read.topic, read.partition, read.offset, limit
            )
            return state, chunks
        except StrataError as exc:
            return exc

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record in offset order whose timestamp is >= ``timestamp``.

        Chunk rows carry min/max timestamps, so only the first chunk that can hold such a record is read.
        None if no record qualifies (Kafka then answers offset -1).
        """
        state = await self.state(topic, partition)
        position = state.log_start_offset
        while position < state.high_watermark:
            chunks = await asyncio.to_thread(
                self.metadata.find_chunks, topic, partition, position, MAX_CHUNKS_PER_FETCH
            )
            if not chunks:
                return None
            for chunk in chunks:
                if chunk.max_timestamp < timestamp:
                    continue
                ((_, data),) = await self._load([chunk])
                for record in decode_chunk(chunk, data):
                    if record.offset >= state.log_start_offset and record.timestamp >= timestamp:
                        return record.offset, record.timestamp
            position = chunks[-1].last_offset + 1
        return None

    async def max_timestamp_offset(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the partition's largest timestamp (KIP-734)."""
        state = await self.state(topic, partition)
        best: ChunkRow | None = None
        position = state.log_start_offset
        while position < state.high_watermark:
            chunks = await asyncio.to_thread(
                self.metadata.find_chunks, topic, partition, position, MAX_CHUNKS_PER_FETCH
            )
            if not chunks:
                break
            for chunk in chunks:
                if best is None or chunk.max_timestamp > best.max_timestamp:
                    best = chunk
            position = chunks[-1].last_offset + 1
        if best is None:
            return None
        ((_, data),) = await self._load([best])
        found: tuple[int, int] | None = None
        for record in decode_chunk(best, data):
            if record.offset >= state.log_start_offset and (found is None or record.timestamp > found[1]):
                found = (record.offset, record.timestamp)
        return found

    async def _read_once(
        self, state: PartitionState, offset: int, max_bytes: int, read_committed: bool
    ) -> ChunksResult:
        chunks = await asyncio.to_thread(
            self.metadata.find_chunks, state.topic, state.partition, offset, MAX_CHUNKS_PER_FETCH
        )
        selected = select_chunks(chunks, read_end(state, read_committed), max_bytes)
        selected = within(selected, self._admit_one_partition(selected)) or selected[:1]
        loaded = await self._load(selected)
        return ChunksResult(
            loaded,
            offset,
            max_bytes,
            state.high_watermark,
            state.log_start_offset,
            read_stable(state, read_committed),
        )

    async def _load(self, chunks: list[ChunkRow]) -> list[tuple[ChunkRow, memoryview]]:
        # (key, offset of the bytes read within the object, GET range or whole file, chunks)
        reads = [
            (key, 0, None, members) if self._read_whole(members[0]) else (key, start, end, members)
            for key, start, end, members in plan_reads(chunks)
        ]
        datas = await asyncio.gather(
            *(
                self._get_file(key, members[0].file_size) if end is None else self._get(key, start, end)
                for key, start, end, members in reads
            )
        )
        loaded: dict[int, memoryview] = {}
        for (_, base, _, members), data in zip(reads, datas, strict=True):
            # Views, not copies: the read (a whole file, usually) is cached and shared anyway, and a copy
            # of every chunk was a fresh allocation per fetch.
            view = memoryview(data)
            for chunk in members:
                loaded[chunk.chunk_id] = view[chunk.position - base : chunk.position - base + chunk.length]
        return [(chunk, loaded[chunk.chunk_id]) for chunk in chunks]

    def _read_whole(self, chunk: ChunkRow) -> bool:
        """Whether the chunk's file is read whole (``_get_file``) rather than by range."""
        return 0 < chunk.file_size <= self.cache.max_bytes // WHOLE_FILE_CACHE_SHARE

    async def _get_file(self, key: str, size: int) -> bytes:
        """The whole object: from the cache, from a GET another fetch already started, or by one GET.

        A flush file holds every partition's chunks side by side, and consumers catching up ask for the
        partitions of one file within moments of each other (a Kafka Fetch names all of a consumer's
        partitions). Reading the whole file once and sharing it serves all of them with one GET, where
        ranged reads cost one GET per fetch per file. Only files up to 1/WHOLE_FILE_CACHE_SHARE of the
        cache are read whole, so a file stays cached while the other partitions' fetches arrive.
        """
        cached = self.cache.get_file(key)
        if cached is not None:
            return cached
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._get_whole(key, size))
            self._inflight[key] = task
            task.add_done_callback(lambda _: self._inflight.pop(key, None))
        # shield: a fetch that is cancelled (its client went away) must not cancel the GET others await.
        return await asyncio.shield(task)

    async def _get_whole(self, key: str, size: int) -> bytes:
        data = await self.store.get(key)
        if len(data) != size:
            raise CorruptObject(
                f"object {key} is {len(data)} bytes, its metadata says {size}", object_key=key
            )
        self.cache.put_file(key, data)
        return data

    async def _get(self, key: str, start: int, end: int) -> bytes:
        cached = self.cache.get(key, start, end)
        if cached is not None:
            return cached
        # No read-ahead past the file: aligned 8 MiB windows read an order of magnitude more bytes than a
        # catch-up returned (the cache could not hold the windows until other partitions used them) and
        # made S3 fetch slower. Files too big to be read whole (``_get_file``) get ranged GETs.
        data = await self.store.get_range(key, start, end)
        if len(data) != end - start:
            raise CorruptObject(
                f"object {key} is shorter than its metadata says ({start}+{len(data)} < {end})",
                object_key=key,
            )
        self.cache.put_range(key, start, data)
        return data
