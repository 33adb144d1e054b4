"""A fetch's chunks, sans-IO: what a fetch asks for and answers, which ranged GETs read its chunks, which
chunks it takes, and how their bytes are checked and decoded.

``agents/fetch.py`` (the ``Fetcher``) does the IO: metadata lookups, the cache, the GETs. Everything here is
a pure function of chunk rows and bytes, shared by both front doors' renderings of a fetch.

Offsets: a chunk row holds the chunk's absolute base offset; batches inside the file carry base offsets
relative to their chunk. A record's offset is chunk.base_offset + batch.base_offset + offset_delta.

Integrity: every chunk's CRC-32C (from the metadata row) is checked before decoding, and every batch's own
CRC while decoding; a mismatch is ``CorruptObject`` (50002) naming the object, never garbage records.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from storage import fileformat, records
from storage.errors import CodecError, CorruptObject, DamagedRange, OffsetOutOfRange
from storage.metadata.rows import ChunkRow, PartitionState
from storage.records.check import check_stored

log = logging.getLogger("strata.fetch")

# Chunks of one object closer than this are read with one ranged GET.
COALESCE_GAP = 1024 * 1024


@dataclass(frozen=True, slots=True)
class BatchRead:
    """One partition of a Kafka Fetch: from ``offset``, about ``max_bytes`` at most. ``read_committed``:
    only below the last stable offset, with the aborted transactions of the range (Kafka's isolation
    level 1)."""

    topic: str
    partition: int
    offset: int
    max_bytes: int
    read_committed: bool = False


@dataclass(frozen=True, slots=True)
class BatchesResult:
    """Stored record batches from a fetch offset on, as Kafka's Fetch serves them.

    ``batches`` are (the batch as stored, its absolute base offset), not copied: views into the cached or
    read bytes, for the front door to write out with the base offset in front (the stored one is relative
    to its chunk). They start with the batch holding the first existing offset >= the fetch offset (it may
    start before it: Kafka clients skip records below the offset they asked for).
    """

    batches: list[tuple[memoryview, int]]
    high_watermark: int
    log_start_offset: int
    # Kafka's last stable offset, and for a read_committed read the aborted transactions whose range
    # meets the batches served, as (producer id, first offset).
    last_stable_offset: int = -1
    aborted: list[tuple[int, int]] | None = None

    @property
    def size(self) -> int:
        return sum(len(batch) for batch, _ in self.batches)


@dataclass(frozen=True, slots=True)
class FetchResult:
    records: list[records.Record]
    next_offset: int
    high_watermark: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class ChunksResult:
    """What a fetch from ``offset`` reads, not yet decoded: the chunks (rows and bytes, CRCs unchecked) in
    offset order. ``decode_fetch`` turns it into the ``FetchResult`` that ``Fetcher.fetch`` returns; a
    front door may instead render the answer straight from the bytes, with the same rules."""

    chunks: list[tuple[ChunkRow, memoryview]]
    offset: int
    max_bytes: int
    high_watermark: int
    log_start_offset: int
    # A read_committed read: the last stable offset it stopped at (None: read up to the high watermark).
    stable: int | None = None

    @property
    def end(self) -> int:
        """Where this read stops: the offset a read that found nothing more moves on to."""
        return self.high_watermark if self.stable is None else self.stable


def plan_reads(chunks: list[ChunkRow]) -> list[tuple[str, int, int, list[ChunkRow]]]:
    """Group chunks into ranged GETs: (object_key, start, end, chunks), merging near ranges per object."""
    reads: list[tuple[str, int, int, list[ChunkRow]]] = []
    by_key: dict[str, list[ChunkRow]] = {}
    for chunk in chunks:
        by_key.setdefault(chunk.object_key, []).append(chunk)
    for key, group in by_key.items():
        group.sort(key=lambda c: c.position)
        start, end, members = group[0].position, group[0].position + group[0].length, [group[0]]
        for chunk in group[1:]:
            if chunk.position - end <= COALESCE_GAP:
                end = max(end, chunk.position + chunk.length)
                members.append(chunk)
            else:
                reads.append((key, start, end, members))
                start, end, members = chunk.position, chunk.position + chunk.length, [chunk]
        reads.append((key, start, end, members))
    return reads


def decode_fetch(result: ChunksResult) -> FetchResult:
    """The records a fetch answers: from the first existing offset >= ``result.offset``, whole records up
    to ``max_bytes`` (``record_size`` each; at least one), and the offset to fetch next, past any offsets
    compaction removed at the end of the chunks read."""
    out: list[records.Record] = []
    size = 0
    offset = result.offset
    next_offset = offset
    for chunk, data in result.chunks:
        try:
            decoded = decode_chunk(chunk, data)
        except CorruptObject:
            if out:  # what precedes the damage is answered; the next fetch starts at it and fails
                return FetchResult(out, next_offset, result.high_watermark, result.log_start_offset)
            raise
        for record in decoded:
            if record.offset < offset:
                continue
            size_of = record_size(record)
            if out and size + size_of > result.max_bytes:
                return FetchResult(out, next_offset, result.high_watermark, result.log_start_offset)
            out.append(record)
            size += size_of
            next_offset = record.offset + 1
        # Offsets up to the chunk's last offset are consumed even if compaction removed them.
        next_offset = max(next_offset, chunk.last_offset + 1)
    if not result.chunks:
        # No chunk at or after ``offset`` below the high watermark: everything up to it was removed.
        next_offset = max(offset, result.end)
    return FetchResult(out, next_offset, result.high_watermark, result.log_start_offset)


def batches_from(
    loaded: list[tuple[ChunkRow, memoryview]], offset: int, max_bytes: int, upper: int = 2**63 - 1
) -> tuple[list[tuple[memoryview, int]], int | None]:
    """The chunks' batches from the one holding ``offset`` on and starting below ``upper``, with their
    absolute base offsets, up to max_bytes (at least one batch); and where it stopped short of the loaded
    chunks' end (the first offset not served: a batch over the budget, damage, ``upper``), None if it
    served every batch of them."""
    out: list[tuple[memoryview, int]] = []
    total = 0
    for chunk, data in loaded:
        try:
            verify(chunk, data)
        except CorruptObject:
            if out:
                # What precedes the damage is served; the next fetch starts at it and fails.
                return out, max(chunk.base_offset, offset)
            raise
        for header, batch in records.iter_batches(data, verify_crc=False):  # the chunk CRC covered it
            base = chunk.base_offset + header.base_offset
            if base + header.last_offset_delta < offset:
                continue
            if base >= upper or (out and total + header.size > max_bytes):
                return out, base
            try:
                check_stored(batch, header)  # served undecoded: its records must parse (see check.py)
            except CodecError as exc:
                if out:
                    return out, base
                raise corrupt(chunk, exc) from exc
            out.append((batch, base))
            total += header.size
    return out, None


def within(chunks: list[ChunkRow], files: set[str]) -> list[ChunkRow]:
    """The leading chunks whose files are in ``files``."""
    for i, chunk in enumerate(chunks):
        if chunk.object_key not in files:
            return chunks[:i]
    return chunks


def select_chunks(chunks: list[ChunkRow], high_watermark: int, max_bytes: int) -> list[ChunkRow]:
    """Chunks until their bytes reach max_bytes (always at least one): what is returned is then bounded by
    max_bytes too, except that a single oversized first record or batch is still returned."""
    selected: list[ChunkRow] = []
    total = 0
    for chunk in chunks:
        if chunk.base_offset >= high_watermark:
            break
        if selected and total + chunk.length > max_bytes:
            break
        selected.append(chunk)
        total += chunk.length
    return selected


def check_range(state: PartitionState, offset: int) -> None:
    if offset < state.log_start_offset or offset > state.high_watermark:
        raise OffsetOutOfRange(
            f"offset {offset} is out of range for {state.topic}/{state.partition}: "
            f"valid offsets are {state.log_start_offset}..{state.high_watermark}"
        )


def decode_chunk(chunk: ChunkRow, data: memoryview) -> list[records.Record]:
    verify(chunk, data)
    try:
        return list(records.decode_records(data, offset_base=chunk.base_offset))
    except CodecError as exc:
        raise corrupt(chunk, exc) from exc


def verify(chunk: ChunkRow, data: bytes | memoryview) -> None:
    """The chunk CRC from the metadata row covers every byte of every batch in it."""
    try:
        fileformat.verify_chunk(data, chunk.crc, object_key=chunk.object_key)
    except CodecError as exc:
        raise corrupt(chunk, exc) from exc


def corrupt(chunk: ChunkRow, exc: CodecError) -> CorruptObject:
    log.error(
        "corrupt chunk in object %s (topic %s partition %d, bytes %d+%d): %s",
        chunk.object_key,
        chunk.topic,
        chunk.partition,
        chunk.position,
        chunk.length,
        exc.message,
    )
    return CorruptObject(
        f"stored data for {chunk.topic}/{chunk.partition} at offsets "
        f"{chunk.base_offset}..{chunk.last_offset} is corrupt (object {chunk.object_key}): {exc.message}",
        object_key=chunk.object_key,
        damaged=DamagedRange(
            chunk.topic, chunk.partition, chunk.base_offset, chunk.last_offset, chunk.object_key
        ),
    )


def record_size(record: records.Record) -> int:
    """A record's share of a fetch's ``max_bytes``: its key, value and headers, plus 16."""
    size = 16 + len(record.key or b"") + len(record.value or b"")
    for header in record.headers:
        size += len(header.key) + len(header.value or b"")
    return size
