"""build_file and FileLayout: one multi-partition file from the requests, without touching them."""

from __future__ import annotations

import asyncio
import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.buffer import PartitionBatch, PendingRequest, ProduceBuffer, ProduceRequest
from agents.layout import FileLayout, build_file
from agents.offsets import RecordOffsets, order_of
from storage import fileformat, records
from storage.objectstore.base import body_bytes
from tests.examples import examples


def batch(topic: str, partition: int, values: list[bytes], ts: int = 1000) -> PartitionBatch:
    recs = [records.Record(i, ts + i, None, v) for i, v in enumerate(values)]
    return PartitionBatch(topic, partition, records.encode_batch(recs), len(recs), ts, ts + len(recs) - 1)


def pending(batches: list[PartitionBatch], order: list[tuple[int, int]]) -> PendingRequest:
    loop = asyncio.new_event_loop()
    try:
        future: asyncio.Future[RecordOffsets] = loop.create_future()
    finally:
        loop.close()
    return PendingRequest(ProduceRequest(batches[0].topic, batches, order_of(order)), None, future)


def test_chunks_sorted_relative_offsets_and_spans() -> None:
    # Request 0 writes b/0 then a/1; request 1 writes a/1 again. Chunks must come out sorted (a/1, b/0),
    # with request 1's batch placed after request 0's inside chunk a/1.
    r0 = pending([batch("b", 0, [b"x", b"y"]), batch("a", 1, [b"p"])], [(0, 0), (1, 0), (0, 1)])
    r1 = pending([batch("a", 1, [b"q", b"r", b"s"])], [(0, 0), (0, 1), (0, 2)])
    before = copy.deepcopy([r.request for r in (r0, r1)])

    built = build_file([r0.batches, r1.batches])

    assert [r.request for r in (r0, r1)] == before  # pure: the inputs are unchanged
    assert built.tps == [("a", 1), ("b", 0)]
    assert [(c.topic, c.partition, c.record_count) for c in built.chunks] == [("a", 1, 4), ("b", 0, 2)]
    # (chunk index, first record's offset in the chunk) per batch: r0's b/0 opens chunk 1, its a/1 chunk 0;
    # r1's a/1 batch follows r0's single record there.
    assert built.spans([r0.batches, r1.batches]) == [[(1, 0), (0, 0)], [(0, 1)]]

    data = body_bytes(built.pieces)
    assert built.size == len(data)
    index = fileformat.read_index(data)
    assert [(m.topic, m.partition, m.position, m.length) for m in index] == [
        (c.topic, c.partition, c.position, c.length) for c in built.chunks
    ]
    chunk_a = data[index[0].position : index[0].end]
    fileformat.verify_chunk(chunk_a, built.chunks[0].crc)
    decoded = list(records.decode_records(chunk_a, offset_base=100))
    # Relative base offsets patched to 0, 1: absolute offsets follow once the base is known.
    assert [(r.offset, r.value) for r in decoded] == [(100, b"p"), (101, b"q"), (102, b"r"), (103, b"s")]
    assert (built.chunks[0].min_timestamp, built.chunks[0].max_timestamp) == (1000, 1002)


def test_batches_in_a_request_frame_are_laid_out_without_being_copied_or_changed() -> None:
    # A Kafka request's batches are views into its frame: the file's pieces are views of the same bytes,
    # with each batch's base offset given as a piece of its own, so the frame is never written to.
    first, second = (
        records.encode_batch([records.Record(0, 5, None, b"a")]),
        records.encode_batch([records.Record(0, 6, None, b"b"), records.Record(1, 7, None, b"c")]),
    )
    frame = bytearray(b"header" + first + second)
    view = memoryview(frame)
    a = PartitionBatch("t", 0, view[6 : 6 + len(first)], 1, 5, 5)
    b = PartitionBatch("t", 0, view[6 + len(first) :], 2, 6, 7)
    original = bytes(frame)

    built = build_file([[a], [b]])

    assert bytes(frame) == original
    assert any(isinstance(p, memoryview) and p.obj is frame for p in built.pieces)
    data = body_bytes(built.pieces)
    [meta] = fileformat.read_index(data)
    chunk = data[meta.position : meta.end]
    fileformat.verify_chunk(chunk, meta.crc)
    assert [(r.offset, r.value) for r in records.decode_records(chunk)] == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_the_buffer_lays_out_each_flush_as_its_requests_arrive() -> None:
    # Each drained flush carries the layout of exactly its own requests, in arrival order.
    buffer = ProduceBuffer(1 << 20)
    first = pending([batch("a", 0, [b"1", b"2"])], [(0, 0), (0, 1)])
    second = pending([batch("a", 0, [b"3"]), batch("b", 0, [b"4"])], [(0, 0), (1, 0)])
    third = pending([batch("a", 0, [b"5"])], [(0, 0)])
    buffer.add(first, buffer.reserve(0), now=0.0)
    buffer.add(second, buffer.reserve(0), now=0.0)
    flush = buffer.drain()
    buffer.add(third, buffer.reserve(0), now=0.0)
    later = buffer.drain()

    built = flush.layout.finish()
    data = body_bytes(built.pieces)
    values = {
        (m.topic, m.partition): [
            (r.offset, r.value) for r in records.decode_records(data[m.position : m.end])
        ]
        for m in fileformat.read_index(data)
    }
    assert values == {("a", 0): [(0, b"1"), (1, b"2"), (2, b"3")], ("b", 0): [(0, b"4")]}
    assert built.starts == [[0], [2, 0]]
    [(meta)] = fileformat.read_index(body_bytes(later.layout.finish().pieces))
    assert (meta.topic, meta.record_count) == ("a", 1)


def test_rebase_moves_the_batches_into_the_joined_file_and_a_new_layout_of_them_is_the_same() -> None:
    # A remote store's flush joins the file, then lets the batches point into it: their frames are freed.
    # A retry without some requests lays out the rest again from there.
    frame = bytearray(b"hdr" + records.encode_batch([records.Record(0, 5, b"k", b"a")]))
    first = [PartitionBatch("t", 0, memoryview(frame)[3:], 1, 5, 5)]
    second = [batch("t", 0, [b"b", b"c"]), batch("s", 1, [b"d"])]
    built = build_file([first, second])
    body = body_bytes(built.pieces)

    built.rebase([first, second], body)

    assert all(isinstance(b.data, memoryview) and b.data.obj is body for b in first + second)
    assert built.pieces == [body]
    assert body_bytes(build_file([first, second]).pieces) == body
    alone = body_bytes(build_file([second]).pieces)
    values = {
        (m.topic, m.partition): [
            (r.offset, r.value) for r in records.decode_records(alone[m.position : m.end])
        ]
        for m in fileformat.read_index(alone)
    }
    assert values == {("s", 1): [(0, b"d")], ("t", 0): [(0, b"b"), (1, b"c")]}


# A request: its batches, each (topic, partition, values, first timestamp).
_REQUESTS = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.integers(0, 2),
            st.lists(st.binary(max_size=20), min_size=1, max_size=4),
            st.integers(0, 2**40),
        ),
        min_size=1,
        max_size=4,
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=examples(200), deadline=None)
@given(_REQUESTS)
def test_any_requests_are_laid_out_as_the_file_format_reads_them(requests: list[list[tuple]]) -> None:
    # The layout (agents/_layout.c) against the file reader: every chunk's CRC, records in request order
    # with relative offsets, timestamps, spans and byte positions, whatever the mix of partitions.
    batches = [[batch(t, p, values, ts) for t, p, values, ts in request] for request in requests]
    built = build_file(batches)
    data = body_bytes(built.pieces)
    index = fileformat.read_index(data)
    assert [(m.topic, m.partition) for m in index] == sorted(
        {(b.topic, b.partition) for r in batches for b in r}
    )
    expected: dict[tuple[str, int], list[bytes | None]] = {}
    for request in batches:
        for b in request:
            expected.setdefault((b.topic, b.partition), []).extend(
                r.value for r in records.decode_records(bytes(b.data))
            )
    for meta, chunk in zip(index, built.chunks, strict=True):
        body = data[meta.position : meta.end]
        fileformat.verify_chunk(body, chunk.crc)
        decoded = list(records.decode_records(body))
        assert [(r.offset, r.value) for r in decoded] == list(
            enumerate(expected[(meta.topic, meta.partition)])
        )
        assert (chunk.min_timestamp, chunk.max_timestamp) == (
            min(r.timestamp for r in decoded),
            max(r.timestamp for r in decoded),
        )
    for r, (request, spans) in enumerate(zip(batches, built.spans(batches), strict=True)):
        for b, (one, (chunk_index, start)) in enumerate(zip(request, spans, strict=True)):
            meta = index[chunk_index]
            at = meta.position + built.offsets[r][b]
            assert (meta.topic, meta.partition) == (one.topic, one.partition)
            assert data[at + 8 : at + len(one.data)] == bytes(one.data)[8:]  # the batch, as sent
            assert int.from_bytes(data[at : at + 8], "big") == start == built.starts[r][b]


def test_a_batch_shorter_than_its_base_offset_is_refused() -> None:
    layout = FileLayout()
    with pytest.raises(ValueError, match="shorter than its base offset"):
        layout.add([PartitionBatch("t", 0, b"1234567", 1, 0, 0)])
