"""Markers in a Kafka Fetch answer (agents/txn_fetch.py), sans IO: the frontier past which no marker is
served, the merge by offset, and the HTTP door's committed view of a chunk."""

from __future__ import annotations

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch

from agents import txn_fetch
from storage import records
from storage.errors import CorruptObject
from storage.metadata.rows import ChunkRow
from storage.metadata.txn_state import AbortedTxn, TxnMarker


def chunk(chunk_id: int, base: int, last: int) -> ChunkRow:
    return ChunkRow(chunk_id, "t", 0, base, last, last - base + 1, "k", 0, 100, 0, 0, 0, False, 1000)


def stored(base: int, count: int, producer_id: int = -1, transactional: bool = False) -> memoryview:
    """A stored batch of ``count`` records (relative base 0), as the fetch path serves it at ``base``."""
    data = bytearray(records.encode_batch([records.Record(i, 1000 + i, None, b"v") for i in range(count)]))
    if transactional:
        data[21:23] = (0x10).to_bytes(2, "big")
    data[43:51] = producer_id.to_bytes(8, "big", signed=True)
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    return memoryview(bytes(data))


def marker(offset: int, commit: bool = True) -> TxnMarker:
    return TxnMarker(offset, 7, 0, commit, 5000)


def test_no_batch_served_serves_the_markers_up_to_the_end_when_nothing_else_exists() -> None:
    # A consumer at a partition's tail marker: the lookup found no chunk, so every offset to the end is one.
    assert txn_fetch.frontier([], None, 5, [], set(), True, 7) == 7
    # ...but when the lookup stopped at its page size, nothing past what it found is known.
    assert txn_fetch.frontier([], None, 5, [chunk(1, 3, 4)], set(), False, 9) == 5


def test_markers_stop_where_unread_data_may_be() -> None:
    batches = [(stored(0, 3), 0)]
    found = [chunk(1, 0, 2), chunk(2, 5, 6)]
    # Chunk 2 was found but not read (another file, a budget): markers at 3 and 4 only.
    assert txn_fetch.frontier(batches, None, 0, found, {1}, True, 10) == 5
    # Both read: up to the end.
    assert txn_fetch.frontier(batches, None, 0, found, {1, 2}, True, 10) == 10
    # The batches stopped short (a budget, the LSO): no marker past where they stopped.
    assert txn_fetch.frontier(batches, 3, 0, found, {1, 2}, True, 10) == 3


def test_merge_puts_markers_between_batches_by_offset() -> None:
    batches = [(stored(0, 3), 0), (stored(4, 2), 4)]
    merged = txn_fetch.merge(batches, [marker(3), marker(6, commit=False)], upper=10)
    assert [base for _, base in merged] == [0, 3, 4, 6]
    control = DefaultRecordBatch(bytes(merged[1][0]))
    assert (control.is_control_batch, control.base_offset, control.producer_id) == (True, 3, 7)
    # Nothing at or past the upper bound (the LSO of a read_committed read).
    assert [base for _, base in txn_fetch.merge(batches, [marker(3), marker(6)], upper=4)] == [0, 3]
    assert txn_fetch.end_of(merged, 0) == 7


def test_committed_chunks_leave_out_aborted_batches_and_what_is_past_the_lso() -> None:
    pieces = [
        stored(0, 2),
        stored(0, 1, producer_id=7, transactional=True),
        stored(0, 2, producer_id=8, transactional=True),
    ]
    # One chunk: offsets 0-1 plain, 2 aborted (producer 7), 3-4 an open transaction (producer 8).
    data = bytearray()
    for piece, base in zip(pieces, (0, 2, 3), strict=True):
        start = len(data)
        data += piece
        records.set_base_offset(data, start, base)
    row = ChunkRow(1, "t", 0, 0, 4, 5, "k", 0, len(data), 0, 0, crc32c(bytes(data)), False, len(data))
    view = memoryview(bytes(data))
    [(kept, kept_data)] = txn_fetch.committed_chunks([(row, view)], upper=3, aborted=[AbortedTxn(7, 2, 5)])
    assert [r.offset for r in records.decode_records(kept_data, offset_base=0)] == [0, 1]
    assert (kept.last_offset, kept.has_holes, kept.crc) == (2, True, crc32c(bytes(kept_data)))
    # Nothing to leave out: the chunk as it is, unchecked.
    assert txn_fetch.committed_chunks([(row, view)], upper=9, aborted=[]) == [(row, view)]


def test_a_damaged_chunk_that_would_lose_a_batch_is_refused() -> None:
    row = ChunkRow(1, "t", 0, 0, 1, 2, "k", 0, 10, 0, 0, 12345, False, 10)
    with pytest.raises(CorruptObject, match="CRC"):
        txn_fetch.committed_chunks([(row, memoryview(bytes(stored(0, 2))))], upper=1, aborted=[])
