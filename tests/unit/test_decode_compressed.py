"""The Spark reader's executor-side decoder (pipeline/decode.py): chunks holding compressed batches, and
the compiled column decoder held to the reference's rows and errors."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pyarrow as pa
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.decode import _decode_columns, decode_file, decode_file_reference
from pipeline.snapshot import ChunkTask
from storage import records
from storage.errors import CodecError
from storage.records import compression
from tests.examples import examples

CODECS = [0, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]


def _records(first: int, n: int) -> list[records.Record]:
    return [
        records.Record(
            first + i,
            1_700_000_000_000 + i,
            f"k{first + i}".encode(),
            None if i == 3 else f"v{first + i} ".encode() * 30,
            (records.Header("h", b"x"),),
        )
        for i in range(n)
    ]


def test_decode_file_reads_chunks_of_every_codec() -> None:
    # One file, one chunk per codec (and one uncompressed), each holding two batches of 5 records.
    content = bytearray(b"header")
    tasks = []
    expected: list[records.Record] = []
    base = 100
    for codec in [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD, 0]:
        chunk = records.encode_batch(_records(0, 5), codec=codec) + records.encode_batch(
            _records(5, 5), base_offset=5, codec=codec
        )
        tasks.append(ChunkTask("t", 0, base, len(content), len(chunk), crc32c(chunk), base + 1, base + 10))
        expected += [
            records.Record(r.offset + base, r.timestamp, r.key, r.value, r.headers)
            for r in _records(0, 5) + _records(5, 5)
            if r.offset >= 1
        ]
        content += chunk
        base += 10
    batch = decode_file(bytes(content), tasks, include_headers=True)
    rows = batch.to_pylist()
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [
        (r.offset, r.key, r.value) for r in expected
    ]
    assert all(r["headers"] == [{"key": "h", "value": b"x"}] for r in rows)


def test_decode_file_refuses_a_corrupt_compressed_chunk() -> None:
    plain = records.encode_batch(_records(0, 5))
    header = next(records.iter_batches(plain))[0]
    lz4 = bytearray(records.recompress_batch(plain, header, compression.LZ4))
    lz4[-3] ^= 0xFF  # inside the lz4 stream; the batch CRC no longer matches either
    task = ChunkTask("t", 0, 0, 0, len(lz4), crc32c(bytes(lz4)), 0, 5)
    with pytest.raises(CodecError):
        decode_file(bytes(lz4), [task], include_headers=False)


# --- the compiled column decoder against the reference --------------------------------------------------

_value = st.none() | st.binary(max_size=20)


@st.composite
def files(draw: st.DrawFn) -> tuple[bytes, list[ChunkTask]]:
    """A file of chunks (several topics and partitions, every codec, gaps, LogAppendTime), some broken."""
    content = bytearray(draw(st.binary(max_size=4)))
    tasks = []
    for c in range(draw(st.integers(0, 4))):
        base = draw(st.integers(0, 2**40))
        chunk = b""
        relative = 0
        for _ in range(draw(st.integers(1, 3))):
            n = draw(st.integers(1, 5))
            offsets = sorted(draw(st.sets(st.integers(0, 9), min_size=n, max_size=n)))
            recs = [
                records.Record(
                    relative + o, draw(st.integers(-(2**45), 2**45)), draw(_value), draw(_value), ()
                )
                for o in offsets
            ]
            batch = records.encode_batch(recs, relative, codec=draw(st.sampled_from(CODECS)))
            if draw(st.booleans()):  # LogAppendTime: every record takes the batch's maxTimestamp
                batch = _with_attributes(batch, 0x08 | (batch[22] & 0x07))
            chunk += batch
            relative = recs[-1].offset + 1
        if draw(st.integers(0, 4)) == 0:  # a malformed record behind a good CRC
            broken = bytearray(chunk)
            at = draw(st.integers(61, len(broken) - 1))
            broken[at] ^= draw(st.integers(1, 255))
            header = next(records.iter_batches(bytes(broken), verify_crc=False))[0]
            if header.size == len(broken):
                struct.pack_into(">I", broken, 17, crc32c(memoryview(broken)[21:]))
            chunk = bytes(broken)
        start = base + draw(st.integers(0, 4))
        end = start + draw(st.integers(0, 20))
        tasks.append(ChunkTask(f"t{c % 2}", c, base, len(content), len(chunk), crc32c(chunk), start, end))
        content += chunk
    return bytes(content), tasks


def _with_attributes(batch: bytes, attributes: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">h", out, 21, attributes)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def _outcome(run: Callable[[], pa.RecordBatch]) -> object:
    try:
        return run().to_pylist()
    except (CodecError, OverflowError) as exc:
        return type(exc).__name__


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files())
def test_column_decoder_gives_the_reference_rows(case: tuple[bytes, list[ChunkTask]]) -> None:
    content, tasks = case
    expected = _outcome(lambda: decode_file_reference(content, tasks, include_headers=False))
    assert _outcome(lambda: decode_file(memoryview(content), tasks, include_headers=False)) == expected


def test_column_decoder_takes_valid_files() -> None:
    chunk = records.encode_batch(_records(0, 10))
    task = ChunkTask("t", 3, 500, 0, len(chunk), crc32c(chunk), 502, 508)
    batch = _decode_columns(chunk, [task], "")
    assert batch is not None
    assert batch.to_pylist() == decode_file_reference(chunk, [task], include_headers=False).to_pylist()
    assert batch.column("value").null_count == 1
