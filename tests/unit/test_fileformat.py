"""Multi-partition file: round trips, ordering, and every corruption of footer or trailer as CodecError."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from storage.errors import CodecError
from storage.fileformat import (
    TRAILER_SIZE,
    ChunkMeta,
    FileBuilder,
    footer_span,
    parse_footer,
    parse_trailer,
    read_index,
    verify_chunk,
)
from storage.records import Record, decode_records, encode_batch
from tests.examples import examples

FAST = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def sample_file() -> tuple[bytes, tuple[ChunkMeta, ...]]:
    builder = FileBuilder()
    builder.add_chunk(
        "alpha",
        0,
        encode_batch([Record(0, 10, b"a", b"1"), Record(1, 12, b"b", b"2")]),
        record_count=2,
        last_offset_delta=1,
        min_timestamp=10,
        max_timestamp=12,
    )
    builder.add_chunk(
        "alpha",
        3,
        encode_batch([Record(0, 20, b"a", None), Record(5, 19, b"c", b"3")]),
        record_count=2,
        last_offset_delta=5,
        min_timestamp=19,
        max_timestamp=20,
        present=BitMap([0, 5]),
    )
    builder.add_chunk(
        "beta",
        1,
        encode_batch([Record(0, 30, None, b"x")]),
        record_count=1,
        last_offset_delta=0,
        min_timestamp=30,
        max_timestamp=30,
    )
    return builder.finish(), builder.chunks


def footer_start(data: bytes) -> int:
    start, _ = footer_span(len(data), data[-TRAILER_SIZE:])
    return start


def test_round_trip_with_and_without_bitmaps() -> None:
    data, chunks = sample_file()
    index = read_index(data)
    assert index == list(chunks)
    assert [(c.topic, c.partition) for c in index] == [("alpha", 0), ("alpha", 3), ("beta", 1)]
    assert index[0].present is None
    assert index[1].present == BitMap([0, 5])
    assert index[2].present is None
    assert index[0].position == 0
    assert index[-1].end == footer_start(data)
    for meta in index:
        chunk = data[meta.position : meta.end]
        verify_chunk(chunk, meta.crc)
        assert len(list(decode_records(chunk))) == meta.record_count
    alpha3 = data[index[1].position : index[1].end]
    assert [r.offset for r in decode_records(alpha3, offset_base=1000)] == [1000, 1005]


def test_ranged_read_path_matches_whole_file() -> None:
    data, chunks = sample_file()
    trailer = data[-TRAILER_SIZE:]
    start, length = footer_span(len(data), trailer)
    footer_length, footer_crc = parse_trailer(trailer)
    assert length == footer_length
    assert start + length + TRAILER_SIZE == len(data)
    assert parse_footer(data[start : start + length], footer_crc, footer_start=start) == list(chunks)
    with pytest.raises(CodecError):
        parse_footer(data[start : start + length], footer_crc, footer_start=start + 1)


def test_builder_size_and_chunks() -> None:
    builder = FileBuilder()
    assert builder.size == 0
    assert list(builder.chunks) == []
    payload = bytearray(encode_batch([Record(0, 1, None, b"v")]))
    meta = builder.add_chunk(
        "t", 0, payload, record_count=1, last_offset_delta=0, min_timestamp=1, max_timestamp=1
    )
    payload[-1] ^= 0xFF  # the builder copied the bytes; reusing the buffer does not change the file
    assert builder.size == meta.length == len(payload)
    assert builder.chunks == (meta,)
    data = builder.finish()
    assert builder.finish() is data
    verify_chunk(data[: meta.length], meta.crc)
    with pytest.raises(ValueError):
        builder.add_chunk("u", 0, b"x", record_count=1, last_offset_delta=0, min_timestamp=0, max_timestamp=0)


def test_finish_without_chunks_is_refused() -> None:
    with pytest.raises(ValueError):
        FileBuilder().finish()


@pytest.mark.parametrize(
    ("first", "second"),
    [(("b", 0), ("a", 9)), (("a", 2), ("a", 1))],
    ids=["topic-descends", "partition-descends"],
)
def test_order_enforcement(first: tuple[str, int], second: tuple[str, int]) -> None:
    builder = FileBuilder()
    builder.add_chunk(*first, b"x", record_count=1, last_offset_delta=0, min_timestamp=0, max_timestamp=0)
    with pytest.raises(ValueError, match="order"):
        builder.add_chunk(
            *second, b"x", record_count=1, last_offset_delta=0, min_timestamp=0, max_timestamp=0
        )


def test_a_partition_may_repeat_for_separate_runs() -> None:
    # Compaction output can hold two runs of one partition that another file separates.
    builder = FileBuilder()
    builder.add_chunk("a", 1, b"x", record_count=1, last_offset_delta=0, min_timestamp=0, max_timestamp=0)
    builder.add_chunk("a", 1, b"y", record_count=1, last_offset_delta=0, min_timestamp=0, max_timestamp=0)
    assert [(c.topic, c.partition, c.position) for c in read_index(builder.finish())] == [
        ("a", 1, 0),
        ("a", 1, 1),
    ]


def test_order_is_topic_first() -> None:
    builder = FileBuilder()
    builder.add_chunk("a", 9, b"x", record_count=1, last_offset_delta=0, min_timestamp=0, max_timestamp=0)
    builder.add_chunk("b", 0, b"x", record_count=1, last_offset_delta=0, min_timestamp=0, max_timestamp=0)
    assert [(c.topic, c.partition) for c in read_index(builder.finish())] == [("a", 9), ("b", 0)]


def test_dense_bitmap_is_stored_as_dense() -> None:
    builder = FileBuilder()
    meta = builder.add_chunk(
        "t",
        0,
        b"xyz",
        record_count=3,
        last_offset_delta=2,
        min_timestamp=0,
        max_timestamp=0,
        present=BitMap([0, 1, 2]),
    )
    assert meta.present is None
    assert read_index(builder.finish())[0].present is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"record_count": 2, "last_offset_delta": 0},  # dense but count != span
        {"record_count": 2, "last_offset_delta": 5, "present": BitMap([0, 1, 5])},  # bitmap size
        {"record_count": 2, "last_offset_delta": 5, "present": BitMap([0, 4])},  # bitmap max
        {"record_count": 1, "last_offset_delta": 0, "present": BitMap()},  # empty bitmap
        {"record_count": 0, "last_offset_delta": -1},
        {"record_count": 1, "last_offset_delta": 0, "min_timestamp": 5, "max_timestamp": 4},
        {"record_count": 1, "last_offset_delta": 0, "topic": ""},
        {"record_count": 1, "last_offset_delta": 0, "partition": -1},
        {"record_count": 1, "last_offset_delta": 0, "data": b""},
    ],
    ids=[
        "dense-mismatch",
        "bitmap-size",
        "bitmap-max",
        "empty-bitmap",
        "no-records",
        "timestamps",
        "empty-topic",
        "negative-partition",
        "empty-chunk",
    ],
)
def test_builder_rejects_inconsistent_metadata(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {
        "topic": "t",
        "partition": 0,
        "data": b"payload",
        "min_timestamp": 0,
        "max_timestamp": 0,
        "present": None,
    }
    args.update(kwargs)
    with pytest.raises(ValueError):
        FileBuilder().add_chunk(**args)  # type: ignore[arg-type]


def test_every_corrupted_footer_or_trailer_byte_is_detected() -> None:
    data, _ = sample_file()
    for position in range(footer_start(data), len(data)):
        for mask in (0x01, 0x80, 0xFF):
            corrupted = bytearray(data)
            corrupted[position] ^= mask
            with pytest.raises(CodecError):
                read_index(bytes(corrupted))


def test_chunk_crc_mismatch_is_detected() -> None:
    data, chunks = sample_file()
    meta = chunks[1]
    corrupted = bytearray(data)
    corrupted[meta.position + 30] ^= 0x04
    with pytest.raises(CodecError) as info:
        verify_chunk(memoryview(corrupted)[meta.position : meta.end], meta.crc, object_key="l0/abc")
    assert info.value.object_key == "l0/abc"
    # The footer does not cover chunk bytes, so the index still reads; the chunk check is what catches it.
    assert read_index(bytes(corrupted)) == list(chunks)


def test_trailer_checks() -> None:
    data, _ = sample_file()
    trailer = data[-TRAILER_SIZE:]
    with pytest.raises(CodecError, match="magic"):
        parse_trailer(trailer[:-6] + b"KAFKA!")
    with pytest.raises(CodecError, match="version"):
        parse_trailer(trailer[:8] + struct.pack(">H", 2) + trailer[10:])
    with pytest.raises(CodecError):
        parse_trailer(trailer[1:])
    with pytest.raises(CodecError):
        footer_span(TRAILER_SIZE + 3, trailer)
    with pytest.raises(CodecError):
        read_index(data[-10:])
    with pytest.raises(CodecError):
        read_index(b"")


def rebuild_footer(footer: bytes) -> bytes:
    """A whole file whose footer is ``footer`` with a matching CRC, and no chunk bytes."""
    return footer + struct.pack(">IIH6s", len(footer), crc32c(footer), 1, b"STRATA")


def test_structurally_bad_footers_with_valid_crc() -> None:
    data, chunks = sample_file()
    start = footer_start(data)
    footer = data[start:-TRAILER_SIZE]
    chunk_bytes = data[:start]
    # Trailing bytes after the last entry.
    with pytest.raises(CodecError, match="after its last entry"):
        read_index(chunk_bytes + rebuild_footer(footer + b"\x00"))
    # A chunk count larger than the entries.
    bad = struct.pack(">I", len(chunks) + 1) + footer[4:]
    with pytest.raises(CodecError):
        read_index(chunk_bytes + rebuild_footer(bad))
    # Chunks that claim bytes the object does not have before the footer.
    with pytest.raises(CodecError, match="footer starts"):
        read_index(chunk_bytes[1:] + rebuild_footer(footer))


def entry(
    topic: bytes = b"t",
    *,
    partition: int = 0,
    position: int = 0,
    length: int = 1,
    record_count: int = 1,
    last_offset_delta: int = 0,
    min_ts: int = 0,
    max_ts: int = 0,
    flags: int = 0,
    bitmap: bytes | None = None,
) -> bytes:
    out = struct.pack(">H", len(topic)) + topic
    out += struct.pack(
        ">IQIIIqqIB", partition, position, length, record_count, last_offset_delta, min_ts, max_ts, 0, flags
    )
    if bitmap is not None:
        out += struct.pack(">I", len(bitmap)) + bitmap
    return out


@pytest.mark.parametrize(
    "entries",
    [
        [entry(b"\xff\xfe")],
        [entry(b"")],
        [entry(flags=0x02)],
        [entry(record_count=0)],
        [entry(record_count=2, last_offset_delta=0)],
        [entry(min_ts=5, max_ts=4)],
        [entry(position=3)],
        [entry(b"b"), entry(b"a", position=1)],
        [entry(partition=2), entry(partition=1, position=1)],
        [entry(record_count=2, last_offset_delta=3, flags=1, bitmap=b"")],
        [entry(record_count=2, last_offset_delta=3, flags=1, bitmap=b"garbage!")],
        [entry(record_count=2, last_offset_delta=3, flags=1, bitmap=BitMap([0, 3]).serialize() + b"\x00")],
        [entry(record_count=2, last_offset_delta=3, flags=1, bitmap=BitMap([0, 2]).serialize())],
        [entry(record_count=3, last_offset_delta=3, flags=1, bitmap=BitMap([0, 3]).serialize())],
        [entry(record_count=2, last_offset_delta=1, flags=1, bitmap=BitMap([0, 1]).serialize())],
        [entry(record_count=2, last_offset_delta=3, flags=1)],
    ],
    ids=[
        "bad-utf8-topic",
        "empty-topic",
        "unknown-flag",
        "no-records",
        "dense-count-mismatch",
        "timestamps",
        "gap-before-first-chunk",
        "topic-order",
        "partition-order",
        "empty-bitmap",
        "garbage-bitmap",
        "bitmap-trailing-bytes",
        "bitmap-max-mismatch",
        "bitmap-count-mismatch",
        "dense-bitmap",
        "bitmap-missing",
    ],
)
def test_bad_footer_entries(entries: list[bytes]) -> None:
    footer = struct.pack(">I", len(entries)) + b"".join(entries)
    with pytest.raises(CodecError):
        parse_footer(footer, crc32c(footer))


# --- property tests --------------------------------------------------------------------------------------


@st.composite
def chunk_specs(draw: st.DrawFn) -> list[tuple[str, int, bytes, int, int, int, int, BitMap | None]]:
    keys = draw(
        st.lists(
            st.tuples(st.text(min_size=1, max_size=12), st.integers(0, 2**32 - 1)),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    specs = []
    for topic, partition in sorted(keys):
        data = draw(st.binary(min_size=1, max_size=64))
        present = draw(st.none() | st.sets(st.integers(0, 2**32 - 1), min_size=1, max_size=20).map(BitMap))
        if present is None:
            last = draw(st.integers(0, 2**32 - 1))
            count = last + 1
            if count > 2**32 - 1:
                last, count = 2**32 - 2, 2**32 - 1
        else:
            last, count = present.max(), len(present)
        min_ts = draw(st.integers(-(2**63), 2**63 - 1))
        max_ts = draw(st.integers(min_ts, 2**63 - 1))
        specs.append((topic, partition, data, count, last, min_ts, max_ts, present))
    return specs


@FAST
@given(chunk_specs())
def test_round_trip_property(specs: list[tuple[str, int, bytes, int, int, int, int, BitMap | None]]) -> None:
    builder = FileBuilder()
    for topic, partition, data, count, last, min_ts, max_ts, present in specs:
        before = builder.object_size_now
        builder.add_chunk(
            topic,
            partition,
            data,
            record_count=count,
            last_offset_delta=last,
            min_timestamp=min_ts,
            max_timestamp=max_ts,
            present=present,
        )
        # The projection compaction seals its outputs by, before a chunk would take one past its cap.
        assert builder.object_size_now == before + len(data) + FileBuilder.entry_size(topic, present)
    file = builder.finish()
    assert builder.object_size_now == len(file)
    index = read_index(file)
    assert index == list(builder.chunks)
    for meta, (topic, partition, data, count, last, _, _, present) in zip(index, specs, strict=True):
        assert (meta.topic, meta.partition, meta.record_count, meta.last_offset_delta) == (
            topic,
            partition,
            count,
            last,
        )
        assert file[meta.position : meta.end] == data
        verify_chunk(file[meta.position : meta.end], meta.crc)
        if meta.present is not None:
            assert meta.present == present
        elif present is not None:
            assert present == BitMap(range(last + 1))


@FAST
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_codec_error(data: bytes) -> None:
    try:
        read_index(data)
    except CodecError:
        pass


@FAST
@given(chunk_specs(), st.data())
def test_mutated_footer_with_valid_crc_raises_only_codec_error(
    specs: list[tuple[str, int, bytes, int, int, int, int, BitMap | None]], data: st.DataObject
) -> None:
    builder = FileBuilder()
    for topic, partition, chunk, count, last, min_ts, max_ts, present in specs:
        builder.add_chunk(
            topic,
            partition,
            chunk,
            record_count=count,
            last_offset_delta=last,
            min_timestamp=min_ts,
            max_timestamp=max_ts,
            present=present,
        )
    file = builder.finish()
    start = footer_start(file)
    footer = bytearray(file[start:-TRAILER_SIZE])
    for _ in range(data.draw(st.integers(1, 3))):
        footer[data.draw(st.integers(0, len(footer) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(footer)))
    mutated = bytes(footer[:cut])
    try:
        parse_footer(mutated, crc32c(mutated), footer_start=start)
    except CodecError:
        pass
