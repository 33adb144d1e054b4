"""What one lake commit reads of a topic: per partition, [from, last stable offset), capped in bytes, and
read in pieces of bounded size.

The ranges come from ``pipeline.snapshot.take_snapshot`` (read_committed: below each partition's LSO, the
batches of aborted transactions dropped), the rows from ``pipeline.decode.decode_file`` with headers: the
same snapshot and decoder ``read_topic`` uses, so the table and ``read_topic`` agree row for row.

Two bounds, for two reasons:
- the commit's cap (``max_bytes``, of chunk bytes: ``lake_max_bytes_per_commit``) bounds how much one
  snapshot adds, and so how long a commit holds its lease and how much a lost race wastes. Chunks are
  taken a partition at a time in turn, each partition from its start, so every partition moves forward. A
  partition's new offset is then the end of the last chunk taken (or the range's end if all were), never a
  guess: the rows committed cover exactly [from, new offset). At least one chunk is taken, however large,
  so a commit always makes progress;
- the piece (``piece_bytes``: ``lake_write_buffer_bytes``) bounds the writer's memory. ``Slice.pieces``
  fetches and decodes the chunks taken a span at a time and hands them over as pieces of about
  ``piece_bytes`` of decoded rows (Arrow bytes, not chunk bytes: a compressed chunk decodes to several
  times its size), and the writer turns each piece into data files before it asks for the next one
  (``append.FileAppend``), so what it holds at once is one piece, whatever the cap. A piece ends at the
  first span that takes it to ``piece_bytes`` or past, so it is at most ``piece_bytes`` and one span.

A span is one ranged GET: a run of the chunks taken from one object (by position) of at most
``piece_bytes / SPANS_PER_PIECE`` chunk bytes (a single larger chunk is a span of its own), so that a
span's rows, decompressed, seldom outgrow a piece themselves. One GET per object, then, unless the chunks
taken from it span more than that.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pipeline.decode import decode_file
from pipeline.options import ReadOptions
from pipeline.snapshot import ChunkTask, take_snapshot
from storage.metadata.base import LogStore
from storage.objectstore.base import ObjectStore

if TYPE_CHECKING:
    import pyarrow as pa

_Chunk = tuple[str, ChunkTask]  # (object key, chunk)


@dataclass(frozen=True, slots=True)
class Span:
    """One ranged GET: bytes [low, high) of the object ``key``, holding the chunks ``tasks``."""

    key: str
    low: int
    high: int
    tasks: tuple[ChunkTask, ...]

    @property
    def size(self) -> int:
        return self.high - self.low


SPANS_PER_PIECE = 4


@dataclass(frozen=True, slots=True)
class Slice:
    """One commit's read: ``start`` and ``end`` per partition (the rows are [start, end)), ``stable`` the
    partitions' last stable offsets when read (for the lag), the chunk bytes taken, the spans to fetch
    them in and the pieces' size (nothing is fetched until ``pieces`` is iterated)."""

    start: Mapping[int, int]
    end: Mapping[int, int]
    stable: Mapping[int, int]
    spans: tuple[Span, ...]
    chunk_bytes: int
    piece_bytes: int

    def pieces(self, store: ObjectStore) -> Iterator[list[pa.RecordBatch]]:
        """The decoded rows, a piece at a time: the batches (one per span) of about ``piece_bytes``
        (Arrow bytes). The list yielded is the caller's: clearing it lets its batches go."""
        piece: list[pa.RecordBatch] = []
        size = 0
        for span in self.spans:
            batch = _decode(store, span)
            piece.append(batch)
            size += batch.nbytes
            if size >= self.piece_bytes:
                yield piece
                piece, size = [], 0
        if piece:
            yield piece


def read_slice(
    metadata: LogStore,
    store: ObjectStore,
    topic: str,
    starts: Mapping[int, int | None],
    max_bytes: int,
    piece_bytes: int,
) -> Slice:
    """Plan the read of ``topic`` from ``starts`` (partition -> first offset; None: the partition's LSO,
    for ``from_now``; a partition left out starts at its log start). ``store`` is not read here."""
    stable = {s.partition: s.last_stable_offset for s in metadata.partition_states(topic)}
    options = ReadOptions(
        assign={topic: tuple(sorted(stable))},
        starting={topic: {p: stable[p] if s is None else s for p, s in starts.items() if p in stable}},
        include_headers=True,
        read_committed=True,
    )
    snapshot = take_snapshot(metadata, options)
    ranges = {p: snapshot.ranges[(topic, p)] for p in sorted(stable)}
    by_partition: dict[int, list[_Chunk]] = {p: [] for p in ranges}
    for key, tasks in snapshot.tasks.items():
        for task in tasks:
            by_partition[task.partition].append((key, task))
    taken, ends, total = _take(by_partition, ranges, max_bytes)
    start = {p: r[0] for p, r in ranges.items()}
    stable_now = {p: max(ranges[p][1], stable[p]) for p in ranges}
    spans = plan_spans(taken, max(1, piece_bytes // SPANS_PER_PIECE))
    return Slice(start, ends, stable_now, spans, total, piece_bytes)


def _take(
    by_partition: dict[int, list[_Chunk]], ranges: Mapping[int, tuple[int, int]], max_bytes: int
) -> tuple[list[_Chunk], dict[int, int], int]:
    """The chunks within the budget, partitions in turn, and each partition's new end offset."""
    queues = {p: sorted(cs, key=lambda c: c[1].start) for p, cs in by_partition.items()}
    taken: list[_Chunk] = []
    last: dict[int, ChunkTask] = {}
    total = 0
    while any(queues.values()):
        progressed = False
        for partition in sorted(queues):
            queue = queues[partition]
            if not queue:
                continue
            chunk = queue[0]
            task = chunk[1]
            if taken and total + task.length > max_bytes:
                continue
            queue.pop(0)
            taken.append(chunk)
            last[partition] = task
            total += task.length
            progressed = True
        if not progressed:
            break
    ends = {}
    for partition, (start, end) in ranges.items():
        if queues[partition]:  # cut short: up to the end of the last chunk taken (or nothing)
            ends[partition] = last[partition].end if partition in last else start
        else:
            ends[partition] = end
    return taken, ends, total


def plan_spans(chunks: list[_Chunk], span_bytes: int) -> tuple[Span, ...]:
    """``chunks`` as spans: the chunks of each object (by key, then position) in runs of at most
    ``span_bytes`` from the first chunk's start to the last one's end (or one chunk, when longer)."""
    by_key: dict[str, list[ChunkTask]] = {}
    for key, task in chunks:
        by_key.setdefault(key, []).append(task)
    spans: list[Span] = []
    for key, tasks in sorted(by_key.items()):
        group: list[ChunkTask] = []
        for task in sorted(tasks, key=lambda t: t.position):
            if group and task.position + task.length - group[0].position > span_bytes:
                spans.append(_span(key, group))
                group = []
            group.append(task)
        spans.append(_span(key, group))
    return tuple(spans)


def _span(key: str, tasks: list[ChunkTask]) -> Span:
    low = min(t.position for t in tasks)
    high = max(t.position + t.length for t in tasks)
    return Span(key, low, high, tuple(tasks))


def _decode(store: ObjectStore, span: Span) -> pa.RecordBatch:
    content = store.get_range(span.key, span.low, span.high)
    shifted = [replace(t, position=t.position - span.low) for t in span.tasks]
    return decode_file(content, shifted, True, object_key=span.key)
