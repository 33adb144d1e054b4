"""Transactions in a Kafka Fetch, sans IO: which markers an answer carries, and where they go.

A marker is a metadata row, not stored bytes (storage/records/control.py). The fetch path serves it as a
control batch at its offset, merged by offset with the stored batches, because clients count marker
offsets: a consumer's position moves past a marker only when it receives it, and one sitting at a
partition's last marker would otherwise never reach the end (librdkafka's 0061 and 0129 check that).

Which markers: every marker between the fetch offset and the first offset where stored data may exist
that this answer does not serve (the *frontier*). Serving a marker past that point would move the
consumer past records it has not seen. The frontier is where the served batches stopped short (a batch
over the budget, the last stable offset, damage), else the first chunk found but not read, else the end
of what the lookup found: ``upper`` (the high watermark, or the LSO for read_committed) when the lookup
found every chunk, or the last found chunk's end when it stopped at its page size.

Why a read_committed answer cannot serve an aborted record as committed: the partition's state (high
watermark and LSO) is read first, in one statement; chunks, markers and aborted ranges are read after it.
Every offset below that LSO belongs to a transaction that had ended when the state was read, and a
transaction's end writes its markers and its aborted range in the same metadata transaction that moves the
LSO past it. Rows are only added (below the log start they are removed after the files' grace period), so
the later reads see every aborted range below the LSO read, and only data below it is served.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import replace

from crc32c import crc32c

from agents.chunks import verify
from storage import records
from storage.metadata.rows import ChunkRow
from storage.metadata.txn_state import AbortedTxn, TxnMarker
from storage.records.control import control_batch

Batches = list[tuple[memoryview, int]]
# lastOffsetDelta: int32 at byte 23 of a RecordBatch (codec.py), control batches included.
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23


def end_of(batches: Batches, offset: int) -> int:
    """The offset after the last served batch (``offset`` if none)."""
    if not batches:
        return offset
    view, base = batches[-1]
    delta: int = _LAST_OFFSET_DELTA.unpack_from(view, _LAST_OFFSET_DELTA_AT)[0]
    return base + delta + 1


def frontier(
    batches: Batches,
    stop: int | None,
    offset: int,
    found: Sequence[ChunkRow],
    read: set[int],
    complete: bool,
    upper: int,
) -> int:
    """The first offset at or after the served batches where stored data may exist unserved (see the
    module doc). ``found``: the chunks the lookup found from ``offset`` on, by offset; ``read``: the ids
    of those whose batches were all examined; ``complete``: whether ``found`` is every chunk up to the
    high watermark (the lookup did not stop at its page size)."""
    if stop is not None:
        return min(stop, upper)
    served_to = end_of(batches, offset)
    for chunk in found:
        if chunk.chunk_id in read or chunk.last_offset < served_to:
            continue
        return min(max(chunk.base_offset, served_to), upper)
    if complete:
        return upper
    return min(max(found[-1].last_offset + 1, served_to) if found else served_to, upper)


def merge(batches: Batches, markers: Sequence[TxnMarker], upper: int) -> Batches:
    """The batches (those starting below ``upper``) and the markers as control batches, by offset."""
    out: Batches = []
    pending = list(markers)
    pending.reverse()
    for view, base in batches:
        if base >= upper:
            break
        while pending and pending[-1].offset < base:
            out.append(_as_batch(pending.pop()))
        out.append((view, base))
    out.extend(_as_batch(m) for m in reversed(pending) if m.offset < upper)
    return out


def _as_batch(marker: TxnMarker) -> tuple[memoryview, int]:
    data = control_batch(
        marker.offset, marker.producer_id, marker.epoch, marker.is_commit, marker.timestamp_ms
    )
    return memoryview(data), marker.offset


def aborted_list(aborted: Sequence[AbortedTxn]) -> list[tuple[int, int]]:
    """Kafka's aborted_transactions: (producer id, first offset) of each, by first offset."""
    return [(a.producer_id, a.first_offset) for a in aborted]


def committed_chunks(
    loaded: list[tuple[ChunkRow, memoryview]], upper: int, aborted: Sequence[AbortedTxn]
) -> list[tuple[ChunkRow, memoryview]]:
    """The chunks as a read_committed reader that decodes records sees them (the HTTP door): without the
    batches at or past ``upper`` (the LSO) and those of ``aborted`` transactions. A chunk that loses a
    batch is checked against its CRC first, then given the bytes of the batches it keeps, a row whose CRC
    covers them, and a last offset below ``upper``: the offsets of the batches left out read as holes.
    Chunks that lose nothing are returned as they are, unchecked (the reader checks them)."""
    out: list[tuple[ChunkRow, memoryview]] = []
    for chunk, data in loaded:
        if chunk.base_offset >= upper:
            break
        if chunk.last_offset < upper and not any(
            a.first_offset <= chunk.last_offset and chunk.base_offset <= a.last_offset for a in aborted
        ):
            out.append((chunk, data))
            continue
        verify(chunk, data)
        kept = bytearray()
        for header, batch in records.iter_batches(data, verify_crc=False):
            base = chunk.base_offset + header.base_offset
            if base >= upper:
                break
            if any(
                a.producer_id == header.producer_id and a.first_offset <= base <= a.last_offset
                for a in aborted
            ):
                continue
            kept += batch
        if not kept:
            continue  # every batch left out: its offsets are holes
        view = memoryview(bytes(kept))
        trimmed = replace(
            chunk,
            length=len(view),
            crc=crc32c(view),
            last_offset=min(chunk.last_offset, upper - 1),
            has_holes=True,
        )
        out.append((trimmed, view))
    return out
