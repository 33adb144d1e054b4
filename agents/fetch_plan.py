"""The bookkeeping of a Kafka fetch of many partitions (``Fetcher.read_batches_many``), sans IO: each
partition's view as it is worked out, and which chunks each partition reads within the answer's budget."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from agents.chunks import BatchRead, select_chunks, within
from storage.metadata.rows import ChunkRow, PartitionState


@dataclass(slots=True)
class View:
    """One partition of a multi-partition fetch as it is worked out: its state as read first, the chunks
    found from the fetch offset on (``complete``: all of them up to the high watermark), the ids of those
    read, the batches served, where they stopped short, and the aborted transactions."""

    state: PartitionState
    found: list[ChunkRow]
    complete: bool
    read: set[int] = field(default_factory=set)
    batches: list[tuple[memoryview, int]] = field(default_factory=list)
    stop: int | None = None
    aborted: list[tuple[int, int]] | None = None

    def upper(self, read: BatchRead) -> int:
        """Where this read stops: the LSO for read_committed, else the high watermark."""
        return self.state.last_stable_offset if read.read_committed else self.state.high_watermark


def read_end(state: PartitionState, read_committed: bool) -> int:
    return state.last_stable_offset if read_committed else state.high_watermark


def read_stable(state: PartitionState, read_committed: bool) -> int | None:
    return state.last_stable_offset if read_committed else None


def plan(
    wanted: list[tuple[int, BatchRead, list[ChunkRow]]], admitted: set[str], max_total: int
) -> list[tuple[int, BatchRead, list[ChunkRow]]]:
    """The chunks each partition of a multi-partition fetch reads, within the admitted files and the
    answer's budget, each read's max_bytes cut to what the budget leaves it."""
    plans: list[tuple[int, BatchRead, list[ChunkRow]]] = []
    total = 0
    for i, read, selected in wanted:
        budget = min(read.max_bytes, max_total - total)
        if budget <= 0 and total > 0:
            continue
        # A prefix within the admitted files (a partition's offsets stay contiguous), then max_bytes.
        kept = select_chunks(within(selected, admitted), 2**63 - 1, max(budget, 1))
        if not kept:
            continue  # its next chunk is in a file a later fetch reads
        if total > 0 and kept[0].length > budget:
            continue  # only the answer's first batch may exceed max_total (KIP-74)
        total += sum(c.length for c in kept)
        plans.append((i, replace(read, max_bytes=max(budget, 1)), kept))
    return plans
