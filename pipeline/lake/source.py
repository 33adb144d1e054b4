"""What one lake commit reads of a topic: per partition, [from, last stable offset), capped in bytes.

The ranges come from ``pipeline.snapshot.take_snapshot`` (read_committed: below each partition's LSO, the
batches of aborted transactions dropped), the rows from ``pipeline.decode.decode_file`` with headers: the
same snapshot and decoder ``read_topic`` uses, so the table and ``read_topic`` agree row for row.

The cap (``max_bytes``, of chunk bytes) keeps one commit's memory bounded when a table starts on a large
topic or falls behind: chunks are taken a partition at a time in turn, each partition from its start, so
every partition moves forward. A partition's new offset is then the end of the last chunk taken (or the
range's end if all were), never a guess: the rows committed cover exactly [from, new offset). At least one
chunk is taken, however large, so a commit always makes progress.

Each object is read with one ranged GET spanning the chunks taken from it.
"""

from __future__ import annotations

from collections.abc import Mapping
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
class Slice:
    """One commit's read: ``start`` and ``end`` per partition (the rows are [start, end)), ``stable`` the
    partitions' last stable offsets when read (for the lag), the decoded rows and the chunk bytes read."""

    start: Mapping[int, int]
    end: Mapping[int, int]
    stable: Mapping[int, int]
    batches: list[pa.RecordBatch]
    chunk_bytes: int

    @property
    def rows(self) -> int:
        return sum(b.num_rows for b in self.batches)


def read_slice(
    metadata: LogStore,
    store: ObjectStore,
    topic: str,
    starts: Mapping[int, int | None],
    max_bytes: int,
) -> Slice:
    """Read ``topic`` from ``starts`` (partition -> first offset; None: the partition's LSO, for
    ``from_now``; a partition left out starts at its log start)."""
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
    return Slice(start, ends, stable_now, _decode(store, taken), total)


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


def _decode(store: ObjectStore, chunks: list[_Chunk]) -> list[pa.RecordBatch]:
    by_key: dict[str, list[ChunkTask]] = {}
    for key, task in chunks:
        by_key.setdefault(key, []).append(task)
    batches = []
    for key, tasks in sorted(by_key.items()):
        low = min(t.position for t in tasks)
        high = max(t.position + t.length for t in tasks)
        content = store.get_range(key, low, high)
        shifted = [replace(t, position=t.position - low) for t in sorted(tasks, key=lambda t: t.position)]
        batches.append(decode_file(content, shifted, True, object_key=key))
    return batches
